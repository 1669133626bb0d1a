"""Every queue-like or constantly rewritten table vacuumed on purpose: the jobs' tables, the inbox, the consumers'
membership rows and the appointment-timeout cascade's tables get per-table autovacuum settings, each with its
reason beside it (docs/runbooks/database-health.md). The statements are in ``jobs/migrations.sql``,
``messaging/migrations.sql`` and ``calendar/migrations.sql``.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0005"
down_revision = "0004"

_CONTEXTS = ("pin.jobs", "pin.messaging", "pin.calendar")
_QUERIES = [load_queries(context, "migrations.sql") for context in _CONTEXTS]


def upgrade() -> None:
    """Per-table autovacuum settings (and fillfactor for the single rows rewritten in place)."""
    for queries in _QUERIES:
        op.execute(queries["0005_upgrade"])


def downgrade() -> None:
    """The server's autovacuum settings again."""
    for queries in reversed(_QUERIES):
        op.execute(queries["0005_downgrade"])
