"""The xmin horizon held by replication: a standby streaming through a physical slot and one without, each with
hot_standby_feedback and a REPEATABLE READ snapshot open on it, hold the primary's horizon; the gauges report them by
kind (slot, standby), timed from the record of when each was first seen at its xmin, `pin status`'s statement names
them (the slot's name, the standby's walsender), and the console's overview paints them red once held past
XminHorizonHeld's threshold."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import REGISTRY

from pin.db import connect, create_pool, migrate
from pin.local.embedded.postgres import SYSTEM_USER, EmbeddedPostgres
from pin.observability.database_health import DatabaseHealth, horizon_holders
from pin.observability.thresholds import THRESHOLDS
from pin.settings import Settings
from pin.status.collect import collect_status
from tests.console.test_overview import render_overview

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
    migrate(primary.url)  # the record of the holds is a table of the schema
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
            health = DatabaseHealth(pool)
            health.refresh()  # records since when each has held its xmin (operations.xmin_horizon_hold)
            with pool.connection() as conn:  # as if the first refresh had been 100 s ago
                conn.execute("UPDATE operations.xmin_horizon_hold SET since = since - interval '100 seconds'")
            health.refresh()
            slot_age = _value("pin_db_xmin_horizon_age_seconds", holder="slot")
            standby_age = _value("pin_db_xmin_horizon_age_seconds", holder="standby")
            # the console's overview reads the same record: each row red once held past XminHorizonHeld's threshold
            young = _horizon_rows(primary.url)
            with pool.connection() as conn:
                conn.execute(
                    "UPDATE operations.xmin_horizon_hold SET since = since - make_interval(secs => %s)",
                    (THRESHOLDS["database.xmin-horizon-held"].value,),
                )
            old = _horizon_rows(primary.url)
        finally:
            pool.close()
        assert 100 <= slot_age < 160
        assert 100 <= standby_age < 160
        assert _value("pin_db_xmin_horizon_age_transactions", holder="slot") >= 20
        assert _value("pin_db_xmin_horizon_age_transactions", holder="standby") >= 20
        assert set(young) == set(old) == {"slot", "standby"}
        assert not any('class="red"' in row for row in young.values())
        assert all('class="red"' in row for row in old.values())
    finally:
        for reader in readers:
            reader.close()


def _horizon_rows(url: str) -> dict[str, str]:
    """The console overview's rows of the xmin horizon's slot and standby holders (the snapshot `pin status` reads)."""
    snapshot = collect_status(Settings.model_validate({"database_url": url, "jwt_secret": "x" * 32}), kafka=False)
    table = render_overview(snapshot).split('<table id="horizon">', 1)[1].split("</table>", 1)[0]
    return {kind: row for row in table.split("<tr>") for kind in ("slot", "standby") if f"<td>{kind}</td>" in row}
