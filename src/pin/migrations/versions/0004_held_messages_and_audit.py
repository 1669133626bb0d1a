"""The messages consumers hold in retry (``messaging.held_message``) and the audit trail of operator actions
(``operations.audit``): `pin dlq park` marks a held message with an audit row, its holder dead-letters it.

The statements are ``messaging/migrations.sql`` and ``operations/migrations.sql``.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0004"
down_revision = "0003"

_AUDIT = load_queries("pin.operations", "migrations.sql")
_HELD = load_queries("pin.messaging", "migrations.sql")


def upgrade() -> None:
    """operations.audit, then messaging.held_message."""
    op.execute(_AUDIT["0004_upgrade"])
    op.execute(_HELD["0004_upgrade"])


def downgrade() -> None:
    """Both gone (development only)."""
    op.execute(_HELD["0004_downgrade"])
    op.execute(_AUDIT["0004_downgrade"])
