"""The leases' liveness per relay instance (docs/design/relay.md, "Virtual partitions and leases").

A heartbeat writes one row version per relay instance whatever the vparts it holds (counted on a real relay
process by PostgreSQL's own statistics), and a relay whose instance expired cannot settle what it read before:
its marks and dead letters are refused once another relay took its vparts over, and also when nobody did (it then
takes them again, at a new epoch, as an expired lease was taken again before). The kill -9 take-over within TTL +
heartbeat is ``test_relay_instances.py``'s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from pin.db import connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.relay import OutboxRelay, queries
from pin.outbox.relay.kept_floors import FLOOR_WRITE_SECONDS
from pin.outbox.writer import VPARTS, outbox_insert
from pin.settings import Settings
from tests.outbox.support import (
    RELAY_TEST_ENV,
    broker_settings,
    event_row,
    insert_rows,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration

_LEASE_TABLES = ("outbox.relay_lease", "outbox.relay_instance", "outbox.relay_floor")
_UPDATES = "SELECT relid::regclass::text AS name, n_tup_upd AS n FROM pg_stat_user_tables WHERE relid = %s::regclass"
_LIVE_LEASES = "SELECT count(*) FROM outbox.relay_lease_state WHERE live"


def _updates(database_url: str) -> dict[str, int]:
    """Row versions each lease table got by UPDATE so far (the statistics the relay's backends flushed)."""
    with connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return {name: int(str(conn.execute(_UPDATES, (name,)).fetchone()["n"])) for name in _LEASE_TABLES}  # type: ignore[index]


@pytest.mark.slow
def test_a_heartbeat_writes_one_row_version_per_instance_not_one_per_vpart(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    heartbeat = float(RELAY_TEST_ENV["PIN_RELAY_HEARTBEAT_SECONDS"])
    spawn_role("relay", env={"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **RELAY_TEST_ENV})
    wait_for(lambda: scalar(database_url, _LIVE_LEASES) == VPARTS, timeout=60, what="the relay holds every vpart")
    stop = threading.Event()

    def write() -> None:  # rows in every vpart all along, so that every floor keeps moving
        with connect(database_url) as conn:
            n = 0
            while not stop.is_set():
                outbox_insert(conn, [event_row(f"beat-{n % 640}", n) for n in range(n, n + 16)])
                conn.commit()
                n += 16
                time.sleep(0.05)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        time.sleep(2.0)  # the statistics of what came before the window are flushed (at most every second)
        before, started = _updates(database_url), time.monotonic()
        time.sleep(12.0)
        after, window = _updates(database_url), time.monotonic() - started
    finally:
        stop.set()
        writer.join(timeout=10)
    written = {name: after[name] - before[name] for name in _LEASE_TABLES}
    beats = window / heartbeat

    assert written["outbox.relay_lease"] == 0, written  # no owner changed: no lease row was rewritten
    assert 0.5 * beats <= written["outbox.relay_instance"] <= beats + 4, (written, beats)  # one a heartbeat
    # the floors, at most every FLOOR_WRITE_SECONDS each (a window may hold one more write than its length says)
    assert written["outbox.relay_floor"] <= VPARTS * (math.ceil(window / FLOOR_WRITE_SECONDS) + 1), written
    # before: every heartbeat rewrote every held lease row (VPARTS versions a heartbeat)
    assert sum(written.values()) < VPARTS * beats / 4, (written, beats)
    assert scalar(database_url, "SELECT max(floor_id) FROM outbox.relay_floor") > 0, "the floors were never stored"
    wait_for(lambda: outbox_count(database_url) == 0, timeout=30, what="the relay published every row")


def test_a_relay_whose_instance_expired_cannot_settle_what_it_read(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    rows = insert_rows(database_url, [event_row(f"fenced-{n}", 1) for n in range(8)])
    stale, survivor = new_relay(settings), new_relay(settings)
    read_under = stale.heartbeat()  # alone: every vpart, at the epochs its batches are read under
    assert len(read_under) == VPARTS
    with connect(database_url, autocommit=True) as conn:
        ids = [int(str(r["id"])) for r in conn.execute("SELECT id, vpart FROM outbox.message ORDER BY id")]
        vparts = {int(str(r["id"])): int(str(r["vpart"])) for r in conn.execute("SELECT id, vpart FROM outbox.message")}

        def settle_as_stale() -> list[object]:
            """The stale relay's settle of a failure of each row, under the epoch it read the row at."""
            outcomes = []
            for row_id in ids:
                fence = {"id": row_id, "owner": stale.instance_id, "epoch": read_under[vparts[row_id]], "error": "x"}
                outcomes.append(conn.execute(queries.OUTBOX_MARK_FAILED, {**fence, "delay": 1.0}).fetchone())
                outcomes.append(conn.execute(queries.OUTBOX_DEAD_LETTER, {**fence, "permanent": True}).fetchone())
            return outcomes

        def expire(relay: OutboxRelay) -> None:  # its heartbeat stopped for longer than its TTL (a pause, a cut)
            conn.execute(
                "UPDATE outbox.relay_instance SET expires_at = now() - interval '1 second' WHERE instance_id = %s",
                (relay.instance_id,),
            )

        # another relay took its vparts over
        expire(stale)
        assert len(survivor.heartbeat()) == VPARTS
        assert settle_as_stale() == [None] * (2 * len(ids))
        assert stale.run_once().read == 0  # nor does it read them any more
        assert stale.heartbeat() == {}  # it registers again, with nothing free to take
        assert settle_as_stale() == [None] * (2 * len(ids))
        unchanged = "SELECT count(*) FROM outbox.message WHERE attempts = 0 AND next_attempt_at IS NULL"
        assert scalar(database_url, unchanged) == len(rows)
        assert scalar(database_url, "SELECT count(*) FROM outbox.dead_letter") == 0

        # nobody took them over: it gives them up when its heartbeat finds itself expired, and takes them again
        # at a new epoch; what it read before is still not its to settle
        survivor.release_all()
        read_under = stale.heartbeat()
        assert len(read_under) == VPARTS
        expire(stale)
        again = stale.heartbeat()
        assert len(again) == VPARTS
        assert all(again[v] == read_under[v] + 1 for v in again)
        assert settle_as_stale() == [None] * (2 * len(ids))
        assert scalar(database_url, unchanged) == len(rows)

    assert stale.run_once().published == len(rows)  # under its new epoch, everything goes out once
    assert outbox_count(database_url) == 0
    stale.release_all()


@pytest.mark.slow
def test_the_relay_publishes_while_its_heartbeat_waits_for_the_database(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    """A heartbeat's transaction that waits (here for its instance row, locked by another session; under a held
    horizon, for its floor advance) does not hold up the publishing loop: the read takes the floors without the
    heartbeat's lock. Before, every read waited for the whole heartbeat."""
    broker_settings(make_settings, kafka.bootstrap_servers)
    ttl, hold = 12.0, 6.0  # the instance row stays unexpired while its renewal waits
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **RELAY_TEST_ENV}
    spawn_role("relay", env={**env, "PIN_RELAY_LEASE_TTL_SECONDS": str(ttl)})
    wait_for(lambda: scalar(database_url, _LIVE_LEASES) == VPARTS, timeout=60, what="the relay holds every vpart")
    insert_rows(database_url, [event_row("warm-up", 0)])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=30, what="the relay publishes")
    with connect(database_url) as blocker:
        blocker.execute("SELECT * FROM outbox.relay_instance FOR UPDATE").fetchall()  # the next renewal waits
        held_since = time.monotonic()
        time.sleep(1.0)  # a heartbeat (every 0.5 s) is now waiting for the row
        insert_rows(database_url, [event_row(f"during-{n}", n) for n in range(20)])
        wait_for(lambda: outbox_count(database_url) == 0, timeout=hold, what="the rows published during the wait")
        published_within = time.monotonic() - held_since
        waiting = scalar(
            database_url,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND position('relay_instance' IN query) > 0",
        )
        blocker.rollback()
    assert published_within < hold
    assert waiting == 1  # the heartbeat was still waiting when the rows had gone out
