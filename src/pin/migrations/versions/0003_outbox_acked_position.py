"""Where the broker acknowledged the relay's sends (outbox.acked_position): what waits for each consumer group is
read against it while the group is down (docs/design/consumer-waits.md). The statements are ``outbox/migrations.sql``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0003"
down_revision = "0002"

_QUERIES = load_queries("pin.outbox", "migrations.sql")


def upgrade() -> None:
    """The table of acknowledged positions."""
    op.execute(_QUERIES["0003_upgrade"])


def downgrade() -> None:
    """No table of acknowledged positions (the signal reads nothing until it is back)."""
    op.execute(_QUERIES["0003_downgrade"])
