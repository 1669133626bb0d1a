"""appointment-timeout's cycle budget (seed 000, "Max duration: < 30 s per cycle; over it the tick is skipped and the
rest is taken by the next cycle"), against a real PostgreSQL: rows held by another session, and a slow statement."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.db import Conn
from tests.calendar.worker.factory import Cluster, seed_appointments, slow_expiry, statuses
from tests.support.contention import holding_connection

pytestmark = pytest.mark.integration

CANCELLED = "pin.calendar.appointment-cancelled"


def _exhausted() -> float:
    return REGISTRY.get_sample_value("calendar_appointment_timeout_cycle_budget_exhausted_total", {}) or 0.0


def _errors() -> float:
    return REGISTRY.get_sample_value("calendar_appointment_timeout_errors_total", {}) or 0.0


@contextmanager
def _slots_held(database_url: str, clusters: list[Cluster]) -> Iterator[None]:
    """The clusters' slots held by another connection for the block."""
    holder = holding_connection(database_url)
    try:
        holder.execute(
            "SELECT 1 FROM calendar.availability_slot WHERE id = ANY(%s) FOR NO KEY UPDATE",
            ([c.slot_id for c in clusters],),
        )
        yield
    finally:
        holder.rollback()
        holder.close()


def _job(pool: ConnectionPool[Conn], **config: float) -> AppointmentTimeoutJob:
    return AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(instance="test", **config))  # type: ignore[arg-type]


def test_a_backlog_held_by_another_session_ends_its_cycle_within_the_budget_and_the_next_takes_the_rest(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    """Every slot is held elsewhere: each item costs two lock waits (the cluster claim, then the fall-back path's
    slot lock) and is skipped. The cycle stops claiming once its budget is spent, within the budget plus one
    item's worst case, instead of waiting on all of them."""
    clusters = seed_appointments(pool, 12)
    lock_timeout, budget = 0.3, 1.0
    exhausted_before = _exhausted()
    with _slots_held(database_url, clusters):
        started = time.monotonic()
        with capture_logs() as logs:
            result = _job(pool, item_lock_timeout_seconds=lock_timeout, cycle_budget_seconds=budget).run_once()
        took = time.monotonic() - started

    # within the budget + 1 s: the item waiting at the end of the budget is cancelled (the old code, with no budget,
    # took 7.5 s over all the held items)
    assert took < budget + 1.0
    assert result.budget_exhausted
    assert not result.is_full  # the rest waits for the next tick, the runner does not loop at once
    assert 1 <= result.skipped_locked < len(clusters)  # it gave up before trying them all (12 x 0.6 s)
    assert result.expired_count == 0
    (line,) = [entry for entry in logs if entry["event"] == "cycle budget exhausted"]
    assert line["log_level"] == "warning"
    assert (line["BudgetSeconds"], line["SkippedLockedCount"], line["ExpiredCount"]) == (
        budget, result.skipped_locked, 0
    )  # fmt: skip
    assert [entry["event"] for entry in logs][-1] == "cycle completed"  # it committed what it finished
    assert _exhausted() == exhausted_before + 1
    with pool.connection() as conn:
        last = conn.execute("SELECT succeeded, counters FROM jobs.cycle WHERE job = 'appointment-timeout'").fetchone()
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}  # none is poison
    assert last is not None
    assert (last["succeeded"], last["counters"]["BudgetExhausted"]) == (True, 1)  # type: ignore[index]

    # the rows free, the next cycle takes the rest: each appointment expired once
    again = _job(pool).run_once()

    assert (again.expired_count, again.budget_exhausted) == (len(clusters), False)
    ids = [c.appointment_id for c in clusters]
    assert statuses(pool, "appointment", ids) == ["Expired"] * len(clusters)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT message_key, count(*) AS n FROM outbox.message WHERE event_type = %s GROUP BY message_key",
            (CANCELLED,),
        ).fetchall()
    assert {row["message_key"]: row["n"] for row in rows} == {str(i): 1 for i in ids}


def test_no_statement_of_a_cycle_outlives_its_budget(pool: ConnectionPool[Conn]) -> None:
    """A write slower than the budget is cancelled at the budget: its item rolls back whole, and the cycle ends as
    one over its budget (the cancel was the cycle's own: not a failed cycle, not an infrastructure error, and the
    item is not poison)."""
    (cluster,) = seed_appointments(pool, 1)
    slow_expiry(pool, 10)  # the expiry's UPDATE sleeps 10 s holding its locks
    errors_before = _errors()
    started = time.monotonic()

    with capture_logs() as logs:
        result = _job(pool, cycle_budget_seconds=1.0).run_once()

    assert time.monotonic() - started < 1.0 + 1.0  # the budget + 1 s, not the 10 s sleep
    assert (result.budget_exhausted, result.expired_count) == (True, 0)
    (line,) = [entry for entry in logs if entry["event"].startswith("cycle budget spent")]
    assert (line["RolledBack"], line["AppointmentId"]) == ("the item", str(cluster.appointment_id))
    assert not [entry for entry in logs if entry["event"] == "cycle failed"]
    assert _errors() == errors_before
    assert statuses(pool, "appointment", [cluster.appointment_id]) == ["Pending"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
        last = conn.execute("SELECT succeeded, counters FROM jobs.cycle WHERE job = 'appointment-timeout'").fetchone()
        # no lock left behind: the appointment can be taken at once
        conn.execute("SELECT 1 FROM calendar.appointment WHERE id = %s FOR UPDATE NOWAIT", (cluster.appointment_id,))
        conn.rollback()
    assert last is not None
    assert (last["succeeded"], last["counters"]["BudgetExhausted"]) == (True, 1)  # type: ignore[index]


def test_rows_held_longer_than_the_budget_end_the_cycle_within_the_budget_plus_a_second(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    """Every slot is held by another connection, and each item would wait its default 3 s lock timeout (twice):
    the statement waiting at the end of the budget is cancelled, so the cycle ends within budget + 1 s (the old
    cycle, whose statements each had the whole budget, waited 3 s on the first item alone)."""
    clusters = seed_appointments(pool, 3)
    budget = 1.0
    with _slots_held(database_url, clusters):
        started = time.monotonic()
        result = _job(pool, cycle_budget_seconds=budget).run_once()
        took = time.monotonic() - started

    assert took < budget + 1.0
    assert (result.budget_exhausted, result.expired_count, result.is_full) == (True, 0, False)
    assert statuses(pool, "appointment", [c.appointment_id for c in clusters]) == ["Pending"] * 3
    again = _job(pool).run_once()  # the rows free, the next cycle takes them
    assert again.expired_count == 3
