"""appointment-timeout's cycle budget (seed 000, "Max duration: < 30 s per cycle; over it the tick is skipped and the
rest is taken by the next cycle"), against a real PostgreSQL: rows held by another session, and a slow statement."""

from __future__ import annotations

import time

import pytest
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.calendar.timeout_worker import AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.db import Conn, connect
from pin.jobs.cycle import InfrastructureError
from tests.calendar.worker.factory import seed_appointments, slow_expiry, statuses

pytestmark = pytest.mark.integration

CANCELLED = "pin.calendar.appointment-cancelled"


def _exhausted() -> float:
    return REGISTRY.get_sample_value("calendar_appointment_timeout_cycle_budget_exhausted_total", {}) or 0.0


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
    holder = connect(database_url)
    try:
        holder.execute(
            "SELECT 1 FROM calendar.availability_slot WHERE id = ANY(%s) FOR NO KEY UPDATE",
            ([c.slot_id for c in clusters],),
        )
        started = time.monotonic()
        with capture_logs() as logs:
            result = _job(pool, item_lock_timeout_seconds=lock_timeout, cycle_budget_seconds=budget).run_once()
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()

    # within the budget plus one item's worst case (two lock waits), with room for a loaded machine's overhead
    # (the old code, with no budget, took 7.5 s over all the held items)
    assert took < budget + 2 * lock_timeout + 2.0
    assert result.budget_exhausted
    assert not result.is_full  # the rest waits for the next tick, the runner does not loop at once
    assert 1 <= result.skipped_locked_count < len(clusters)  # it gave up before trying them all (12 x 0.6 s)
    assert result.expired_count == 0
    (line,) = [entry for entry in logs if entry["event"] == "cycle budget exhausted"]
    assert line["log_level"] == "warning"
    assert (line["BudgetSeconds"], line["SkippedLockedCount"], line["ExpiredCount"]) == (
        budget, result.skipped_locked_count, 0
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
    """A write slower than the budget is cancelled at the budget (a statement timeout: the database's fault, so the
    cycle ends and the item is not poison), not left to run."""
    (cluster,) = seed_appointments(pool, 1)
    slow_expiry(pool, 10)  # the expiry's UPDATE sleeps 10 s holding its locks
    started = time.monotonic()

    with pytest.raises(InfrastructureError, match="QueryCanceled"):
        _job(pool, cycle_budget_seconds=1.0).run_once()

    # cancelled at about 1 s, not after the 10 s sleep (the margin is a loaded machine's: the cycle's error log,
    # its traceback rendered for the console, took 2-4 s after a cancel at 1.05 s at load 5)
    assert time.monotonic() - started < 9.0
    assert statuses(pool, "appointment", [cluster.appointment_id]) == ["Pending"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
