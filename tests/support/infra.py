"""Session-wide PostgreSQL with a migrated template database, and embedded brokers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from pin.db import migrate
from pin.local.embedded.postgres import EmbeddedPostgres


class TestDatabases:
    """Creates a fresh database per test from a migrated template (a file copy: tens of milliseconds)."""

    __test__ = False

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.template = f"pin_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self._admin = psycopg.connect(server_url, autocommit=True)
        self._admin.execute(f'CREATE DATABASE "{self.template}"')
        migrate(self.url_of(self.template))

    def url_of(self, name: str) -> str:
        """The URL of database ``name`` on the same server."""
        base, _, query = self.server_url.partition("?")
        base = base.rsplit("/", 1)[0]
        return f"{base}/{name}" + (f"?{query}" if query else "")

    def create(self) -> str:
        """A new migrated database; returns its URL."""
        name = f"pin_test_{uuid.uuid4().hex[:12]}"
        self._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return self.url_of(name)

    def drop(self, url: str) -> None:
        """Drop a test database, ending its sessions first."""
        name = url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
        self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        """Drop the template and disconnect."""
        self._admin.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
        self._admin.close()


@contextmanager
def postgres_server(tmp_root: Path) -> Iterator[tuple[str, EmbeddedPostgres | None]]:
    """PIN_TEST_DATABASE_URL's server, or an embedded one for the session."""
    external = os.environ.get("PIN_TEST_DATABASE_URL")
    if external:
        yield external, None
        return
    server = EmbeddedPostgres(tmp_root / "postgres")
    server.start()
    try:
        yield server.url, server
    finally:
        server.destroy()
