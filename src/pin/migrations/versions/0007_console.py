"""The operator console's tables: the index of the consumer groups' dead letters (``messaging.dead_letter_index``)
and the cluster-wide pauses (``operations.pause``). The statements are ``messaging/migrations.sql`` and
``operations/migrations.sql``.

Revision ID: 0007
Revises: 0003, 0004 (a merge point on this branch: both came from 0002; the chain is re-made at merge)
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0007"
down_revision = ("0003", "0004")

_MESSAGING = load_queries("pin.messaging", "migrations.sql")
_OPERATIONS = load_queries("pin.operations", "migrations.sql")


def upgrade() -> None:
    """The dead letters' index, then the pauses."""
    op.execute(_MESSAGING["0007_upgrade"])
    op.execute(_OPERATIONS["0007_upgrade"])


def downgrade() -> None:
    """Both gone (development only)."""
    op.execute(_OPERATIONS["0007_downgrade"])
    op.execute(_MESSAGING["0007_downgrade"])
