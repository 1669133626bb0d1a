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


# The queue-like tables and the rows rewritten constantly that migration 0005 tunes (the other hot tables carry
# theirs in schema.sql): each vacuumed by a fixed number of dead rows, never by a fraction of the table.
TUNED_BY_0005 = (
    "calendar.availability_slot", "calendar.calendar_event", "calendar.event_reminder", "jobs.cycle",
    "jobs.item_failure", "messaging.inbox", "messaging.consumer_member",
)  # fmt: skip


def test_every_queue_like_table_carries_its_own_autovacuum_settings(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        options = dict(
            conn.execute(
                "SELECT oid::regclass::text, reloptions FROM pg_class WHERE oid = ANY(%s::regclass[])",
                (list(TUNED_BY_0005),),
            ).fetchall()
        )
    assert set(options) == set(TUNED_BY_0005)
    for table, reloptions in options.items():
        assert "autovacuum_vacuum_scale_factor=0" in reloptions, table
        assert any(o.startswith("autovacuum_vacuum_threshold=") for o in reloptions), table
    assert "fillfactor=50" in options["jobs.cycle"]
    assert "fillfactor=50" in options["messaging.consumer_member"]


def test_the_record_of_the_xmin_horizons_holds_carries_its_own_autovacuum_settings(database_url: str) -> None:
    """operations.xmin_horizon_hold (migration 0009): a handful of rows every worker's refresh rewrites when an xmin
    moves; vacuumed by a fixed number of dead rows, like the hot tables of 0005."""
    with psycopg.connect(database_url) as conn:
        [(reloptions,)] = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'operations.xmin_horizon_hold'::regclass"
        ).fetchall()
    assert "autovacuum_vacuum_scale_factor=0" in reloptions
    assert "autovacuum_vacuum_threshold=50" in reloptions
