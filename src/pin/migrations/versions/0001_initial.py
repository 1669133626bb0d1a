"""Initial schema: one PostgreSQL schema per bounded context, from each context's ``schema.sql`` (docs/architecture.md).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from importlib import resources

from alembic import op

revision = "0001"
down_revision = None

# Order matters only for cross-schema references; contexts reference each other by id, never by FK.
_CONTEXTS = ("outbox", "jobs", "calendar", "promotion", "crm", "notifications", "catalog", "news", "messaging")


def upgrade() -> None:
    """Create every context's schema."""
    for context_name in _CONTEXTS:
        ddl = resources.files(f"pin.{context_name}").joinpath("schema.sql").read_text(encoding="utf-8")
        op.execute(ddl)


def downgrade() -> None:
    """Drop every context's schema (development only)."""
    for context_name in reversed(_CONTEXTS):
        op.execute(f'DROP SCHEMA IF EXISTS "{context_name}" CASCADE')
