"""PostgreSQL access: connection pools, migrations, named query files and the shared clock."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import LiteralString, cast

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

Conn = psycopg.Connection[dict[str, object]]

# A statement of a query file starts at a "-- name --" line; the comment lines right after it are its description.
_QUERY_HEADER = re.compile(r"^-- ([a-z0-9_]+) --\n(?:--.*\n)*", re.MULTILINE)


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[dict[str, object]]:
    """One connection with dict rows; the caller closes it."""
    return psycopg.connect(url, autocommit=autocommit, row_factory=dict_row)


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "pin",
    timeout: float = 30.0,
    configure: Callable[[psycopg.Connection[dict[str, object]]], None] | None = None,
) -> ConnectionPool[psycopg.Connection[dict[str, object]]]:
    """A connection pool whose connections yield dict rows and are checked before use; ``configure`` runs once on
    each new connection (session settings)."""
    return ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        timeout=timeout,  # seconds a caller waits for a connection before PoolTimeout
        open=True,
        check=ConnectionPool.check_connection,
        configure=configure,
        kwargs={"row_factory": dict_row},
        connection_class=psycopg.Connection[dict[str, object]],
    )


def sqlalchemy_url(url: str) -> str:
    """The libpq URL rewritten for SQLAlchemy's psycopg 3 dialect (used by Alembic only)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def migrate(url: str) -> None:
    """Apply every pending migration (idempotent; safe to run from several processes at once)."""
    # imported here: Alembic (and SQLAlchemy under it) costs seconds at start and only migrations need it
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resources.files("pin") / "migrations"))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    command.upgrade(config, "head")


def database_now(conn: psycopg.Connection[dict[str, object]]) -> datetime:
    """The database server's clock: the one clock every instance shares (SPEC section 4)."""
    row = conn.execute("SELECT clock_timestamp() AS now").fetchone()
    assert row is not None
    value = row["now"]
    assert isinstance(value, datetime)
    return value


def parse_queries(text: str) -> dict[str, LiteralString]:
    """The statements of a query file by name (the text before the first name is the file's own comment)."""
    parts = _QUERY_HEADER.split(text)
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        raise ValueError(f"a query name is used twice in {names}")
    # the file is part of the package, as trusted as a literal in the code
    return {name: cast(LiteralString, body.strip()) for name, body in zip(names, bodies, strict=True)}


def load_queries(package: str, file_name: str = "queries.sql") -> dict[str, LiteralString]:
    """The named statements of a package's query file, as written (never reformatted)."""
    return parse_queries(resources.files(package).joinpath(file_name).read_text(encoding="utf-8"))
