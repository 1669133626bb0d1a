"""A relay heartbeat writes one row version per instance, not one per vpart: a lease is live while its owner's
``outbox.relay_instance`` row is unexpired (the lease rows change only with their owner), and the floors move to
``outbox.relay_floor``, written by their owner only when they moved, at most every few seconds
(docs/design/relay.md, docs/design/outbox-storage.md). The statements are ``outbox/migrations.sql``.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0008"
down_revision = "0007"

_QUERIES = load_queries("pin.outbox", "migrations.sql")


def upgrade() -> None:
    """The floors' own table, the lease rows without expiry nor floors, the leases' state as a view."""
    op.execute(_QUERIES["0008_upgrade"])


def downgrade() -> None:
    """The floors and the expiry back in the lease rows."""
    op.execute(_QUERIES["0008_downgrade"])
