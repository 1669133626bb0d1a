"""The outbox's and its dead letters' uniqueness: MessageId and topic, not MessageId alone.

During a contract migration (docs/runbooks/contract-migration.md) one event is two rows, its v1 and its v2, with
the same MessageId on two topics (pin.outbox.writer.build_rows). The statements are ``outbox/migrations.sql``.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

from pin.db import load_queries

revision = "0002"
down_revision = "0001"

_QUERIES = load_queries("pin.outbox", "migrations.sql")


def upgrade() -> None:
    """(message_id, topic) unique in outbox.message and outbox.dead_letter."""
    op.execute(_QUERIES["0002_upgrade"])


def downgrade() -> None:
    """MessageId unique again (fails while an event has two rows)."""
    op.execute(_QUERIES["0002_downgrade"])
