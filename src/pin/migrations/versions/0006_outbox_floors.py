"""The outbox read past a floor per vpart (docs/design/outbox-storage.md), and autovacuum per outbox table.

Each row records its inserting transaction (``outbox.message.xid``), each vpart's lease row its floor (an id and the
snapshot it was taken under), and ``outbox.unpublished`` is every row waiting for the relay, read past the floors: a
held xmin horizon no longer makes the relay's read or the gauges walk the dead rows it keeps. The statements are
``outbox/migrations.sql``.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0006"
down_revision = "0005"

_QUERIES = load_queries("pin.outbox", "migrations.sql")


def upgrade() -> None:
    """The rows' transaction, the floors, the view of the waiting rows, autovacuum per table."""
    op.execute(_QUERIES["0006_upgrade"])


def downgrade() -> None:
    """Reads from each vpart's head again."""
    op.execute(_QUERIES["0006_downgrade"])
