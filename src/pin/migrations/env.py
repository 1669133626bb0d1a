"""Alembic environment: online migrations only, serialized by an advisory lock so that several
`pin migrate` (or `pin up`) processes starting at once apply each revision exactly once."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

# Any constant works; it only has to be the same for every process that migrates this database.
_MIGRATION_LOCK_KEY = 0x50494E4D  # "PINM"


def run_migrations_online() -> None:
    """Apply every pending revision inside one transaction under the migration lock."""
    url = context.config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        # the session's dead-peer settings (pin.db.migrate); a SET, not the startup options PgBouncer refuses
        for name, value in context.config.attributes.get("session_settings", {}).items():
            connection.execute(text("SELECT set_config(:name, :value, false)"), {"name": name, "value": value})
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        try:
            context.configure(connection=connection, transactional_ddl=True)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            connection.commit()
    engine.dispose()


run_migrations_online()
