"""Migrations: idempotent, and safe when several processes apply them at once."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from tests.support.infra import TestDatabases

pytestmark = pytest.mark.integration


def test_migrate_twice_and_concurrently(test_databases: TestDatabases) -> None:
    admin = psycopg.connect(test_databases.server_url, autocommit=True)
    admin.execute("CREATE DATABASE pin_migrate_check")
    url = test_databases.url_of("pin_migrate_check")
    try:
        env = {"PIN_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
        children = [
            subprocess.Popen(
                [sys.executable, "-m", "pin", "migrate"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(3)
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err.decode()
        again = subprocess.run(
            [sys.executable, "-m", "pin", "migrate"], env=env, capture_output=True, timeout=120, check=False
        )
        assert again.returncode == 0
        with psycopg.connect(url) as conn:
            schemas = {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")}
            version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        assert {"calendar", "promotion", "outbox", "crm", "notifications", "catalog", "news"} <= schemas
        assert len(version) == 1
    finally:
        admin.execute("DROP DATABASE IF EXISTS pin_migrate_check WITH (FORCE)")
        admin.close()
