"""The operator console's tables: the index of the consumer groups' dead letters (``messaging.dead_letter_index``),
the cluster-wide pauses (``operations.pause``), the replays larger than a page (``operations.replay_job``) and the
relay's discarded dead letters (``outbox.dead_letter_discarded``). The statements are ``messaging/migrations.sql``,
``operations/migrations.sql`` and ``outbox/migrations.sql``.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0007"
down_revision = "0006"

_MESSAGING = load_queries("pin.messaging", "migrations.sql")
_OPERATIONS = load_queries("pin.operations", "migrations.sql")
_OUTBOX = load_queries("pin.outbox", "migrations.sql")


def upgrade() -> None:
    """The dead letters' index, the pauses, the discarded letters."""
    op.execute(_MESSAGING["0007_upgrade"])
    op.execute(_OPERATIONS["0007_upgrade"])
    op.execute(_OPERATIONS["0007_replay_job_upgrade"])
    op.execute(_OUTBOX["0007_upgrade"])


def downgrade() -> None:
    """Both gone (development only)."""
    op.execute(_OUTBOX["0007_downgrade"])
    op.execute(_OPERATIONS["0007_replay_job_downgrade"])
    op.execute(_OPERATIONS["0007_downgrade"])
    op.execute(_MESSAGING["0007_downgrade"])
