"""The xmin horizon held by replication: a standby streaming through a physical slot and one without, each with
hot_standby_feedback and a REPEATABLE READ snapshot open on it, hold the primary's horizon; the gauges report them by
kind (slot, standby) and `pin status`'s statement names them (the slot's name, the standby's walsender)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import REGISTRY

from pin.db import connect, create_pool
from pin.local.embedded.postgres import SYSTEM_USER, EmbeddedPostgres
from pin.observability.database_health import DatabaseHealth, horizon_holders

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.deep]

SLOT = "pin_standby_a"
FEEDBACK = {"hot_standby_feedback": "on", "wal_receiver_status_interval": "1"}


def _value(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    assert value is not None
    return value


def _standby(primary: EmbeddedPostgres, folder: Path, slot: str | None) -> EmbeddedPostgres:
    """A streaming standby of ``primary`` from a base backup (``slot``: its physical slot), with feedback on."""
    folder.mkdir(parents=True)
    user = None
    if os.geteuid() == 0:
        import pwd

        entry = pwd.getpwnam(SYSTEM_USER)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        user = SYSTEM_USER
    folder.chmod(0o700)
    args = [str(primary.bin_dir / "pg_basebackup"), "-D", str(folder), "-h", primary.host, "-p", str(primary.port)]
    args += ["-U", "postgres", "-R", "-X", "stream", *(["-S", slot] if slot else [])]
    subprocess.run(args, check=True, capture_output=True, timeout=120, user=user)
    standby = EmbeddedPostgres(folder, settings=FEEDBACK)
    standby.start()
    return standby


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[tuple[EmbeddedPostgres, EmbeddedPostgres, EmbeddedPostgres]]:
    primary = EmbeddedPostgres(tmp_path / "primary")
    primary.start()
    with psycopg.connect(primary.url, autocommit=True) as conn:
        conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (SLOT,))
    servers = [primary]
    try:
        servers.append(_standby(primary, tmp_path / "with-slot", SLOT))
        servers.append(_standby(primary, tmp_path / "without-slot", None))
        yield servers[0], servers[1], servers[2]
    finally:
        for server in reversed(servers):
            server.destroy()


def test_a_slot_and_a_standby_holding_the_horizon_are_reported_by_kind_and_named(
    replicated: tuple[EmbeddedPostgres, EmbeddedPostgres, EmbeddedPostgres],
) -> None:
    primary, with_slot, without_slot = replicated
    readers = [psycopg.connect(s.url) for s in (with_slot, without_slot)]
    try:
        for reader in readers:  # a snapshot held on each standby: its feedback's xmin stays put
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM pg_class").fetchone()
        with connect(primary.url, autocommit=True) as conn:
            for _ in range(20):  # the primary moves on: the held xmins get older
                conn.execute("SELECT txid_current()")
            deadline = time.monotonic() + 60
            while True:
                kinds = {(h.holder, h.name) for h in horizon_holders(conn)}
                if ("slot", SLOT) in kinds and any(k == "standby" for k, _ in kinds):
                    break
                assert time.monotonic() < deadline, f"no feedback reached the primary: {kinds}"
                time.sleep(0.5)
            (standby,) = [h for h in horizon_holders(conn) if h.holder == "standby"]
            assert standby.pid is not None  # the walsender serving it
            assert standby.application  # its application_name (the standby's cluster name or walreceiver)
        pool = create_pool(primary.url, min_size=1, max_size=1, name="horizon")
        try:
            clock = [0.0]
            health = DatabaseHealth(pool, clock=lambda: clock[0])
            health.refresh()
            clock[0] = 100.0
            health.refresh()
        finally:
            pool.close()
        assert _value("pin_db_xmin_horizon_age_seconds", holder="slot") == 100.0
        assert _value("pin_db_xmin_horizon_age_seconds", holder="standby") == 100.0
        assert _value("pin_db_xmin_horizon_age_transactions", holder="slot") >= 20
        assert _value("pin_db_xmin_horizon_age_transactions", holder="standby") >= 20
    finally:
        for reader in readers:
            reader.close()
