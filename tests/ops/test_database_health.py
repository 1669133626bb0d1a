"""The database-health gauges (pin_db_*): what they report, from bounded statements on an interval, not per scrape."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import psycopg
import pytest
from prometheus_client import REGISTRY, generate_latest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.observability.database_health import (
    CLAIM_INDEXES,
    HOT_TABLES,
    DatabaseHealth,
    HorizonHolder,
    held_for,
    horizon_holders,
    record_holds,
)
from tests.calendar.worker.factory import seed_appointments

pytestmark = pytest.mark.integration


def _value(name: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, labels)
    assert value is not None, f"{name}{labels} is not exported"
    return value


def _churn_inbox(conn: Conn, rows: int) -> None:
    """Insert and delete ``rows`` inbox rows: as many dead tuples, flushed to the statistics at once."""
    conn.execute(
        'INSERT INTO messaging.inbox (consumer_group, message_id, topic, partition, "offset")'
        " SELECT 'crm', gen_random_uuid(), 't', 0, n FROM generate_series(1, %(rows)s) n",
        {"rows": rows},
    )
    conn.execute("DELETE FROM messaging.inbox WHERE consumer_group = 'crm'")
    conn.commit()
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.commit()


def test_dead_tuples_live_tuples_and_last_vacuum_of_each_hot_table(pool: ConnectionPool[Conn]) -> None:
    with pool.connection() as conn:
        _churn_inbox(conn, 500)
    health = DatabaseHealth(pool)
    deadline = time.monotonic() + 10
    while True:  # the statistics of another backend arrive within a second or so
        health.refresh()
        if _value("pin_db_table_dead_tuples", table="messaging.inbox") >= 500 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert _value("pin_db_table_dead_tuples", table="messaging.inbox") >= 500
    for table in HOT_TABLES:
        assert _value("pin_db_table_live_tuples", table=table) >= 0
    before = time.time()
    with pool.connection() as conn:
        conn.autocommit = True
        conn.execute("VACUUM messaging.inbox")
        conn.execute("SELECT pg_stat_force_next_flush()")
    deadline = time.monotonic() + 10
    while _value("pin_db_table_last_vacuum_timestamp_seconds", table="messaging.inbox") < before - 1:
        assert time.monotonic() < deadline, "the vacuum never showed in the gauge"
        health.refresh()
    assert _value("pin_db_table_dead_tuples", table="messaging.inbox") < 500


def test_claim_index_size_and_entries_are_the_catalogs(pool: ConnectionPool[Conn]) -> None:
    DatabaseHealth(pool).refresh()
    with pool.connection() as conn:
        for index in CLAIM_INDEXES:
            row = conn.execute(
                "SELECT pg_relation_size(%(i)s::regclass) AS bytes, greatest(reltuples, 0) AS tuples"
                " FROM pg_class WHERE oid = %(i)s::regclass",
                {"i": index},
            ).fetchone()
            assert row is not None
            assert _value("pin_db_index_size_bytes", index=index) == float(str(row["bytes"])) > 0
            assert _value("pin_db_index_tuples", index=index) == float(str(row["tuples"]))


def test_the_oldest_open_transaction_is_reported_with_its_age(pool: ConnectionPool[Conn], database_url: str) -> None:
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT pg_current_xact_id()")  # an open transaction with an xid: the horizon
        row = holder.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp() - now())::float8").fetchone()
        assert row is not None
        DatabaseHealth(pool).refresh()
        assert _value("pin_db_oldest_transaction_age_seconds") >= row[0] > 0
        holder.rollback()
    DatabaseHealth(pool).refresh()
    assert _value("pin_db_oldest_transaction_age_seconds") < row[0] + 5  # gone with its transaction


def test_a_scrape_reads_the_last_values_and_never_the_database(pool: ConnectionPool[Conn]) -> None:
    DatabaseHealth(pool).refresh()
    refreshed = _value("pin_db_health_last_refresh_timestamp_seconds")
    pool.close()  # a scrape that queried would fail now
    text = generate_latest(REGISTRY).decode()
    assert 'pin_db_table_dead_tuples{table="outbox.message"}' in text
    assert _value("pin_db_health_last_refresh_timestamp_seconds") == refreshed


class _FailsFirst(DatabaseHealth):
    """A refresh that fails once (the database away), then works."""

    failed = False

    def refresh(self) -> None:
        if not self.failed:
            self.failed = True
            raise psycopg.OperationalError("connection refused")
        super().refresh()


def test_the_loop_refreshes_on_its_interval_and_survives_a_failed_refresh(pool: ConnectionPool[Conn]) -> None:
    DatabaseHealth(pool).refresh()
    first = _value("pin_db_health_last_refresh_timestamp_seconds")
    stop = threading.Event()
    health = _FailsFirst(pool)
    thread = health.start(stop, 0.05)
    try:
        deadline = time.monotonic() + 10
        while _value("pin_db_health_last_refresh_timestamp_seconds") <= first:
            assert time.monotonic() < deadline, "the loop did not refresh after a failure"
            time.sleep(0.02)
        assert health.failed
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)


def test_reindex_concurrently_shrinks_a_claim_index_the_gauges_show_as_bloated(pool: ConnectionPool[Conn]) -> None:
    """The runbook's step: a claim index emptied by the worker keeps its pages; REINDEX CONCURRENTLY gives them back."""
    index = "calendar.ix_appointments_pending_expires_at"
    clusters = seed_appointments(pool, 5_000)
    keep = [c.appointment_id for c in clusters[:10]]
    with pool.connection() as conn:
        conn.autocommit = True
        # what the worker does to most of them: Pending ends, the entry leaves the partial index's predicate
        conn.execute(
            "UPDATE calendar.appointment SET status = 'Expired', version = version + 1 WHERE id <> ALL(%s)", (keep,)
        )
        conn.execute("VACUUM ANALYZE calendar.appointment")
    health = DatabaseHealth(pool)
    health.refresh()
    bloated = _value("pin_db_index_size_bytes", index=index)
    assert bloated / max(_value("pin_db_index_tuples", index=index), 1) > 1024  # the alert's per-entry threshold
    with pool.connection() as conn:
        conn.autocommit = True
        conn.execute(f"REINDEX INDEX CONCURRENTLY {index}")
        conn.execute("ANALYZE calendar.appointment")
    health.refresh()
    assert _value("pin_db_index_size_bytes", index=index) < bloated / 10
    assert _value("pin_db_index_tuples", index=index) == len(keep)


def test_the_horizon_is_reported_by_kind_of_holder_and_a_held_transaction_by_its_age(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    """A `BEGIN; SELECT txid_current();` left open: the transaction kind's age is its own; no slot, no standby."""
    with psycopg.connect(database_url, application_name="forgotten-psql") as holder:
        holder.execute("SELECT txid_current()")
        row = holder.execute(
            "SELECT EXTRACT(EPOCH FROM clock_timestamp() - now())::float8, pg_backend_pid()"
        ).fetchone()
        assert row is not None
        open_for, pid = row
        with pool.connection() as conn:
            conn.execute("SELECT txid_current()")  # one more transaction id: the holder's xmin is one older
            conn.commit()
            (named,) = [h for h in horizon_holders(conn) if h.pid == pid]
        assert (named.holder, named.application) == ("transaction", "forgotten-psql")
        assert named.xids >= 1
        DatabaseHealth(pool).refresh()
        assert _value("pin_db_xmin_horizon_age_seconds", holder="transaction") >= open_for > 0
        assert _value("pin_db_xmin_horizon_age_transactions", holder="transaction") >= 1
        assert _value("pin_db_xmin_horizon_age_seconds", holder="slot") == 0
        assert _value("pin_db_xmin_horizon_age_seconds", holder="standby") == 0
        holder.rollback()


def test_a_slot_or_standby_xmin_ages_from_when_it_was_first_seen_at_that_value(pool: ConnectionPool[Conn]) -> None:
    """A slot's xmin carries no time: its age is how long it has been recorded unchanged (operations.
    xmin_horizon_hold, on the database clock, whichever instance saw it first), reset when it moves, forgotten when
    it goes. The holders are given (a real slot holding an xmin needs a standby: test_horizon_standby.py)."""

    def held(xmin: str) -> list[HorizonHolder]:
        return [HorizonHolder("slot", None, None, "standby_a", 500.0, None, xmin),
                HorizonHolder("standby", 4242, "walreceiver", None, 400.0, None, "650")]  # fmt: skip

    def ages(holders: list[HorizonHolder]) -> dict[str, float | None]:
        with pool.connection() as conn:
            record_holds(conn, holders)
            return {h.holder: h.seconds for h in held_for(conn, holders)}

    def backdate(seconds: float) -> None:
        with pool.connection() as conn:
            conn.execute(
                "UPDATE operations.xmin_horizon_hold SET since = since - make_interval(secs => %s)", (seconds,)
            )

    first = ages(held("700"))
    assert 0 <= first["slot"] < 5  # type: ignore[operator]
    assert 0 <= first["standby"] < 5  # type: ignore[operator]
    backdate(120)
    again = ages(held("700"))  # another refresh (or instance) sees the same xmin: the record's time holds
    assert 120 <= again["slot"] < 125  # type: ignore[operator]
    with pool.connection() as conn:  # what `pin status` and the console read, without recording
        assert 120 <= held_for(conn, held("700"))[0].seconds < 125  # type: ignore[operator]
        assert held_for(conn, held("800"))[0].seconds is None  # not recorded at that xmin: not timed
    moved = ages(held("900"))  # the slot's xmin moved on: held for 0 s at the new value; the standby's did not
    assert moved["slot"] < 5  # type: ignore[operator]
    assert 120 <= moved["standby"] < 125  # type: ignore[operator]
    # the gauges take the recorded ages as they are
    DatabaseHealth(pool)._set_horizon([replace(h, seconds=s) for h, s in zip(held("900"), (7.0, 130.0), strict=True)])
    assert _value("pin_db_xmin_horizon_age_seconds", holder="slot") == 7
    assert _value("pin_db_xmin_horizon_age_seconds", holder="standby") == 130
    assert _value("pin_db_xmin_horizon_age_transactions", holder="slot") == 500
    ages([])  # both gone: forgotten
    with pool.connection() as conn:
        assert conn.execute("SELECT * FROM operations.xmin_horizon_hold").fetchall() == []
