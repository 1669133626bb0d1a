"""appointment-timeout in process against a real PostgreSQL: one test per row of seed 000's Тесты table.

Concurrency rows make the race happen with real connections: the agent's confirm runs the real use case in a
thread, held open inside its transaction by a pg_sleep trigger; the infrastructure error terminates the worker's
real backend with pg_terminate_backend while it waits on a row lock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.calendar import expiry, service
from pin.calendar.domain import AppointmentNotPendingError, SlotNotAvailableError
from pin.calendar.expiry import CLAIM_SQL, AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.calendar.service import Actor, CalendarPolicy, UseCaseContext
from pin.db import Conn, connect, database_now
from pin.jobs import bookkeeping
from pin.jobs import runner as jobs_runner
from pin.jobs.runner import JobRunner, PollingJob, RunnerConfig
from pin.messaging.contracts import utc_iso
from pin.outbox.writer import RELAY_POLICY, MessageContext
from tests.calendar.worker.factory import (
    Cluster,
    break_slot,
    db_now,
    execute,
    outbox_rows,
    rows_by_id,
    seed_appointments,
    slow_expiry,
    statuses,
)
from tests.support import plans

pytestmark = pytest.mark.integration

CANCELLED = "pin.calendar.appointment-cancelled"
STATUS_CHANGED = "pin.calendar.event-status-changed"
EXPIRED_TEXT = "Запись не подтверждена агентом в срок"


class RecordingClock:
    """The database clock, remembering every AsOf it gave (the injectable clock of the job)."""

    def __init__(self, shift: timedelta = timedelta(0)) -> None:
        self.shift = shift
        self.readings: list[datetime] = []

    def __call__(self, conn: Conn) -> datetime:
        value = database_now(conn) + self.shift
        self.readings.append(value)
        return value


def make_job(pool: ConnectionPool[Conn], clock: Callable[[Conn], datetime] = database_now, **config: Any) -> Any:
    """An appointment-timeout job on ``pool`` named "test" in jobs.cycle."""
    return AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(instance="test", **config), clock=clock)


def last_run_id(pool: ConnectionPool[Conn], instance: str = "test") -> str:
    """The run id of this instance's last cycle, from jobs.cycle."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT run_id FROM jobs.cycle WHERE job = 'appointment-timeout' AND instance = %s", (instance,)
        ).fetchone()
    assert row is not None
    return str(row["run_id"])


def metric(name: str, **labels: str) -> float:
    """The current value of a sample of the default registry (0 when absent)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def per_key(pool: ConnectionPool[Conn], event_type: str) -> dict[str, int]:
    """How many outbox rows of ``event_type`` each message key has."""
    counts: dict[str, int] = {}
    for row in outbox_rows(pool, event_type):
        counts[row["message_key"]] = counts.get(row["message_key"], 0) + 1
    return counts


@pytest.fixture
def runner(pool: ConnectionPool[Conn]) -> Iterator[Callable[..., threading.Thread]]:
    """Start a JobRunner of a job in a thread; every runner is stopped at the end of the test."""
    started: list[tuple[threading.Event, threading.Thread]] = []

    def _start(job: PollingJob, config: RunnerConfig) -> threading.Thread:
        stop = threading.Event()
        thread = threading.Thread(target=JobRunner(job, config, stop).run, daemon=True)
        thread.start()
        started.append((stop, thread))
        return thread

    yield _start
    for stop, thread in started:
        stop.set()
        thread.join(10)


# ---------------------------------------------------------------------------------------------- Empty batch


def test_empty_batch(pool: ConnectionPool[Conn]) -> None:
    not_due = seed_appointments(pool, 2, pending_expires_at=db_now(pool) + timedelta(hours=1))
    confirmed = seed_appointments(pool, 1, auto_confirm=True)
    ids = [c.appointment_id for c in [*not_due, *confirmed]]
    before = rows_by_id(pool, "appointment", ids)

    with capture_logs() as logs:
        result = make_job(pool).run_once()

    assert dict(result.as_dict()) == {
        "ExpiredCount": 0,
        "SlotsReleasedCount": 0,
        "SlotsExpiredCount": 0,
        "SkippedLockedCount": 0,
        "DurationMs": result.duration_ms,
    }
    assert not result.is_full
    assert rows_by_id(pool, "appointment", ids) == before  # no mutation
    assert outbox_rows(pool) == []  # no event
    # an idle cycle is one DEBUG line: not three INFO lines per interval in `pin up`'s terminal
    assert [(entry["event"], entry["log_level"]) for entry in logs] == [("cycle completed", "debug")]
    assert logs[0]["ExpiredCount"] == 0
    with pool.connection() as conn:
        cycle = conn.execute("SELECT succeeded, counters FROM jobs.cycle WHERE instance = 'test'").fetchone()
    assert cycle is not None
    assert cycle["succeeded"] is True  # a no-op is a success


# ---------------------------------------------------------------------------- Таймаут, слот пригоден


def test_timeout_slot_still_bookable(pool: ConnectionPool[Conn], monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(expiry, "tracer", lambda: provider.get_tracer("pin"))
    (c,) = seed_appointments(pool, 1, start_at=db_now(pool) + timedelta(days=2), lead_minutes=60)
    clock = RecordingClock()

    with capture_logs() as logs:
        result = make_job(pool, clock).run_once()

    (as_of,) = clock.readings  # AsOf read once per cycle
    assert dict(result.as_dict()) == {
        "ExpiredCount": 1,
        "SlotsReleasedCount": 1,
        "SlotsExpiredCount": 0,
        "SkippedLockedCount": 0,
        "DurationMs": result.duration_ms,
    }
    appointment = rows_by_id(pool, "appointment", [c.appointment_id])[c.appointment_id]
    assert appointment["status"] == "Expired"
    assert appointment["version"] == 2
    assert appointment["updated_at"] == as_of
    assert appointment["cancelled_by"] is None  # a timeout is not a cancellation
    assert appointment["cancel_reason"] is None
    slot = rows_by_id(pool, "availability_slot", [c.slot_id])[c.slot_id]
    assert (slot["status"], slot["version"], slot["updated_at"]) == ("Available", 3, as_of)  # INV-SLT-5
    event = rows_by_id(pool, "calendar_event", [c.event_id])[c.event_id]
    assert (event["status"], event["cancel_reason"], event["version"]) == ("Cancelled", EXPIRED_TEXT, 2)
    assert statuses(pool, "event_reminder", list(c.reminder_ids)) == ["Skipped", "Skipped"]

    run_id = last_run_id(pool)
    rows = outbox_rows(pool)
    assert [row["event_type"] for row in rows] == [CANCELLED, STATUS_CHANGED]
    cancelled, changed = rows
    assert cancelled["topic"] == "pin.calendar.appointment-cancelled.v1"
    assert cancelled["message_key"] == str(c.appointment_id)
    assert {k: v for k, v in cancelled["payload"].items() if k != "MessageId"} == {
        "AppointmentId": str(c.appointment_id),
        "TenantId": str(c.tenant_id),
        "AgentUserId": str(c.agent_user_id),
        "InvestorUserId": str(c.investor_user_id),
        "Kind": "Showing",
        "StartAt": utc_iso(c.start_at),
        "TimeZone": "Europe/Moscow",
        "Reason": "Expired",
        "CancelledBy": None,
        "RescheduledToAppointmentId": None,
        "ContractVersion": 1,
        "OccurredAt": utc_iso(as_of),
    }
    assert changed["topic"] == "pin.calendar.event-status-changed.v1"
    assert changed["message_key"] == str(c.event_id)
    assert {k: v for k, v in changed["payload"].items() if k != "MessageId"} == {
        "CalendarEventId": str(c.event_id),
        "TenantId": str(c.tenant_id),
        "OwnerUserId": str(c.agent_user_id),
        "Origin": "Appointment",
        "AppointmentId": str(c.appointment_id),
        "Status": "Cancelled",
        "StartAt": utc_iso(c.start_at),
        "EndAt": utc_iso(c.end_at),
        "TimeZone": "Europe/Moscow",
        "Version": 2,
        "ContractVersion": 1,
        "OccurredAt": utc_iso(as_of),
    }
    # correlation id = job run id; the traceparent is the item span's, inside the cycle span's trace
    spans = {span.name: span for span in exporter.get_finished_spans()}
    cycle_span, item_span = spans["appointment-timeout cycle"], spans["appointment-timeout item"]
    assert cycle_span.attributes is not None
    assert item_span.attributes is not None
    assert cycle_span.attributes["pin.run_id"] == run_id
    assert item_span.attributes["pin.tenant_id"] == str(c.tenant_id)
    assert item_span.parent is not None
    assert item_span.parent.span_id == cycle_span.context.span_id
    expected_traceparent = f"00-{item_span.context.trace_id:032x}-{item_span.context.span_id:016x}-"
    for row in rows:
        assert row["headers"]["correlation-id"] == run_id
        assert row["headers"]["traceparent"].startswith(expected_traceparent)  # then the trace flags

    expired_logs = [entry for entry in logs if entry["event"] == "appointment expired"]
    assert expired_logs == [
        {
            "event": "appointment expired",
            "log_level": "info",
            "job": "appointment-timeout",
            "RunId": run_id,
            "AppointmentId": str(c.appointment_id),
            "SlotId": str(c.slot_id),
            "CalendarEventId": str(c.event_id),
            "TenantId": str(c.tenant_id),
            "SlotOutcome": "released",
        }
    ]
    (completed,) = [entry for entry in logs if entry["event"] == "cycle completed"]
    assert completed["ExpiredCount"] == 1
    assert completed["SkippedLocked"] == 0
    assert "DurationMs" in completed

    # idempotent by state: the next cycle finds nothing, no second pair of events
    assert make_job(pool).run_once().expired_count == 0
    assert len(outbox_rows(pool)) == 2


# -------------------------------------------------------------------------- Таймаут, lead time прошёл


def test_timeout_after_lead_time(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    # StartAt - MinLeadTime is 30 min ago: the slot cannot be sold again
    (late,) = seed_appointments(pool, 1, start_at=now + timedelta(minutes=30), lead_minutes=60)
    (early,) = seed_appointments(pool, 1, start_at=now + timedelta(days=1), lead_minutes=60)
    released_before = metric("calendar_appointment_timeout_items_total", slot_outcome="released")
    expired_before = metric("calendar_appointment_timeout_items_total", slot_outcome="expired")

    result = make_job(pool).run_once()

    assert (result.expired_count, result.slots_released_count, result.slots_expired_count) == (2, 1, 1)
    assert statuses(pool, "appointment", [late.appointment_id, early.appointment_id]) == ["Expired", "Expired"]
    assert statuses(pool, "availability_slot", [late.slot_id, early.slot_id]) == ["Expired", "Available"]
    assert statuses(pool, "calendar_event", [late.event_id]) == ["Cancelled"]
    assert statuses(pool, "event_reminder", list(late.reminder_ids)) == ["Skipped", "Skipped"]
    assert per_key(pool, CANCELLED) == {str(late.appointment_id): 1, str(early.appointment_id): 1}
    assert per_key(pool, STATUS_CHANGED) == {str(late.event_id): 1, str(early.event_id): 1}
    assert metric("calendar_appointment_timeout_items_total", slot_outcome="released") == released_before + 1
    assert metric("calendar_appointment_timeout_items_total", slot_outcome="expired") == expired_before + 1


def test_backlog_is_taken_oldest_first_by_the_next_cycles(pool: ConnectionPool[Conn]) -> None:
    """Batch size bounds a cycle; a full batch says so (the runner then loops at once) and the backlog gauge counts
    what is left, which the next cycles take in PendingExpiresAt order."""
    now = db_now(pool)
    clusters = seed_appointments(pool, 5, pending_expires_at=now - timedelta(minutes=5), spread=timedelta(seconds=1))
    job = make_job(pool, batch_size=2)
    order = [c.appointment_id for c in clusters]

    first = job.run_once()

    assert (first.expired_count, first.is_full) == (2, True)
    assert statuses(pool, "appointment", order) == ["Expired", "Expired", "Pending", "Pending", "Pending"]
    assert metric("calendar_appointment_timeout_backlog") == 3
    second, third = job.run_once(), job.run_once()
    assert (second.expired_count, second.is_full, third.expired_count, third.is_full) == (2, True, 1, False)
    assert statuses(pool, "appointment", order) == ["Expired"] * 5
    assert metric("calendar_appointment_timeout_backlog") == 0
    expired_at = [rows_by_id(pool, "appointment", [i])[i]["updated_at"] for i in order]
    assert expired_at == sorted(expired_at)  # oldest PendingExpiresAt first, cycle after cycle


# ------------------------------------------------------------------------------- Auto-confirm вне выборки


def test_auto_confirm_never_selected(pool: ConnectionPool[Conn]) -> None:
    auto = seed_appointments(pool, 3, auto_confirm=True)
    ids = [c.appointment_id for c in auto]
    job = make_job(pool, RecordingClock(shift=timedelta(days=3650)))  # whatever AsOf: PendingExpiresAt is null

    assert job.seconds_until_next_due() is None  # no deadline at all: the wake-up ignores them too
    result = job.run_once()

    assert result.expired_count == 0
    assert statuses(pool, "appointment", ids) == ["Confirmed"] * 3
    assert [r["version"] for r in rows_by_id(pool, "appointment", ids).values()] == [1, 1, 1]
    assert outbox_rows(pool) == []
    (pending,) = seed_appointments(pool, 1)  # beside them, a due Pending one is expired in the same setting
    assert job.run_once().expired_count == 1
    assert statuses(pool, "appointment", [pending.appointment_id, *ids]) == ["Expired"] + ["Confirmed"] * 3


# ------------------------------------------------------------------------------------------ Partial failure


def test_partial_failure(pool: ConnectionPool[Conn]) -> None:
    poison, *healthy = seed_appointments(pool, 5)  # the poison item sorts first: the head of the index
    break_slot(pool, poison.slot_id)
    errors_before = metric("calendar_appointment_timeout_errors_total")
    job = make_job(pool, batch_size=2)

    with capture_logs() as logs:
        first = job.run_once()

    # the poison item rolled back whole; the rest of the batch committed
    assert (first.expired_count, first.failed_count, first.is_full) == (1, 1, True)
    assert statuses(pool, "appointment", [poison.appointment_id, healthy[0].appointment_id]) == ["Pending", "Expired"]
    assert statuses(pool, "availability_slot", [poison.slot_id]) == ["Available"]  # as the test left it
    assert statuses(pool, "calendar_event", [poison.event_id]) == ["Scheduled"]
    assert statuses(pool, "event_reminder", list(poison.reminder_ids)) == ["Pending", "Pending"]
    assert str(poison.appointment_id) not in per_key(pool, CANCELLED)
    (failed,) = [entry for entry in logs if entry["event"] == "item failed"]
    assert failed["log_level"] == "error"
    assert failed["AppointmentId"] == str(poison.appointment_id)
    assert failed["error"].startswith("SlotNotBookedError")
    assert isinstance(failed["exc_info"], Exception)
    assert metric("calendar_appointment_timeout_errors_total") == errors_before + 1
    with pool.connection() as conn:
        failure = conn.execute("SELECT attempts, last_error FROM jobs.item_failure WHERE item_id = %s",
                               (poison.appointment_id,)).fetchone()  # fmt: skip
    assert failure is not None
    assert failure["attempts"] == 1

    # seed 000: "остаётся на следующий цикл". The next cycles take the due items behind it first (the batch is
    # full with them: no retry yet), then, with room left, try the poison item again: one more failure, counted.
    second = job.run_once()
    assert (second.expired_count, second.failed_count, second.is_full) == (2, 0, True)
    with capture_logs() as logs:
        third = job.run_once()
    assert (third.expired_count, third.failed_count, third.claimed_count, third.is_full) == (1, 1, 2, False)
    assert statuses(pool, "appointment", [c.appointment_id for c in healthy]) == ["Expired"] * 4
    assert set(per_key(pool, CANCELLED)) == {str(c.appointment_id) for c in healthy}
    assert [e["AppointmentId"] for e in logs if e["event"] == "item failed"] == [str(poison.appointment_id)]
    assert metric("calendar_appointment_timeout_errors_total") == errors_before + 2
    # the backlog counts it (it is due and not processed), and so does the poison gauge
    assert metric("calendar_appointment_timeout_backlog") == 1
    assert metric("calendar_appointment_timeout_poison_items") == 1

    # repaired: the next cycle expires it and forgets the failure
    execute(pool, "UPDATE calendar.availability_slot SET status = 'Booked', version = version + 1 WHERE id = %s",
            (poison.slot_id,))  # fmt: skip
    assert job.run_once().expired_count == 1
    assert statuses(pool, "appointment", [poison.appointment_id]) == ["Expired"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
    assert (metric("calendar_appointment_timeout_backlog"), metric("calendar_appointment_timeout_poison_items")) == (
        0,
        0,
    )


def test_a_poison_item_at_the_head_of_1000_due_items_holds_none_of_them_up(pool: ConnectionPool[Conn]) -> None:
    """Every other item is expired by the first cycles, at full batches; then the poison item is tried once per
    cycle (never twice in one, never back to back), each failure counted and logged."""
    poison, *healthy = seed_appointments(pool, 1001)
    break_slot(pool, poison.slot_id)
    errors_before = metric("calendar_appointment_timeout_errors_total")
    job = make_job(pool)

    with capture_logs() as logs:
        cycles = [job.run_once() for _ in range(6)]

    # cycle 1 meets the poison item first (not known yet) and fails it once; 199 + 4 x 200 + 1 = 1000
    assert [(r.expired_count, r.failed_count, r.is_full) for r in cycles] == [
        (199, 1, True), (200, 0, True), (200, 0, True), (200, 0, True), (200, 0, True), (1, 1, False),
    ]  # fmt: skip
    assert statuses(pool, "appointment", [c.appointment_id for c in healthy]) == ["Expired"] * 1000
    failed = [e for e in logs if e["event"] == "item failed"]
    assert [(e["AppointmentId"], e["log_level"], e["Attempts"]) for e in failed] == [
        (str(poison.appointment_id), "error", 1), (str(poison.appointment_id), "error", 2),
    ]  # fmt: skip
    assert metric("calendar_appointment_timeout_errors_total") == errors_before + 2
    # only the poison item is left: each cycle fails it once more, and it never wakes the worker early
    assert job.seconds_until_next_due() is None
    again = job.run_once()
    assert (again.claimed_count, again.failed_count, again.is_full) == (1, 1, False)
    assert metric("calendar_appointment_timeout_errors_total") == errors_before + 3


def test_the_claim_uses_the_partial_index_in_both_passes(pool: ConnectionPool[Conn]) -> None:
    """With many rows (20,000 due, 50 of them poison, 20,000 not due), the first pass walks
    ix_appointments_pending_expires_at in order and sorts nothing; neither pass scans the table. So too in the plan
    made for any parameters (a generic plan: psycopg prepares a statement after a few runs), with the cluster locked
    or the claim alone (parameters of the one statement, as the pass is). Both plan cache modes on the same rows:
    seeding them is most of the test's time."""
    clusters = seed_appointments(pool, 20_000, spread=timedelta(microseconds=1))
    seed_appointments(pool, 20_000, pending_expires_at=db_now(pool) + timedelta(days=1))
    with pool.connection() as conn:
        for c in clusters[::400]:
            bookkeeping.item_failure_record(conn, expiry.JOB_NAME, c.appointment_id, RuntimeError("x"))
        conn.execute("ANALYZE calendar.appointment")
        conn.execute("ANALYZE jobs.item_failure")
    params = {
        "as_of": db_now(pool), "after_at": None, "after_id": None, "job": expiry.JOB_NAME, "failed": [],
        "passed_over_cap": bookkeeping.BACKLOG_CAP,
    }  # fmt: skip
    cases = [
        (mode, lock, poison) for mode in plans.PLAN_CACHE_MODES for lock in (True, False) for poison in (False, True)
    ]
    for plan_cache_mode, lock_cluster, poison in cases:
        with pool.connection() as conn:
            values = {**params, "lock_cluster": lock_cluster, "poison": poison}
            plan = plans.explain(conn, CLAIM_SQL, values, plan_cache_mode)
            claimed = plans.cte(plan, "claimed")
        case = (plan_cache_mode, lock_cluster, poison)
        assert "appointment" not in plans.seq_scanned(claimed), (case, claimed)
        if not poison:  # the poison pass may as well start from the few poison rows
            assert "ix_appointments_pending_expires_at" in plans.index_names(claimed), (case, claimed)
            assert "Sort" not in plans.node_types(claimed), (case, claimed)


# ------------------------------------------------------------------------- Гонка с подтверждением агента


def _calendar(pool: ConnectionPool[Conn]) -> UseCaseContext:
    return UseCaseContext(pool, CalendarPolicy(), MessageContext("test-agent-request"), RELAY_POLICY)


def _slow_confirm(pool: ConnectionPool[Conn], seconds: float) -> None:
    """Every Pending -> Confirmed UPDATE sleeps inside its transaction, holding the appointment's row lock."""
    execute(pool, f"CREATE FUNCTION public.test_slow_confirm() RETURNS trigger LANGUAGE plpgsql AS $$"
                  f" BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$")  # fmt: skip
    execute(pool, "CREATE TRIGGER test_slow_confirm BEFORE UPDATE ON calendar.appointment FOR EACH ROW"
                  " WHEN (OLD.status = 'Pending' AND NEW.status = 'Confirmed')"
                  " EXECUTE FUNCTION public.test_slow_confirm()")  # fmt: skip


def _sleeping_backends(pool: ConnectionPool[Conn]) -> int:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"
        ).fetchone()
    assert row is not None
    count = row["n"]
    assert isinstance(count, int)
    return count


def test_race_with_agent_confirm_holding_the_row_lock(pool: ConnectionPool[Conn]) -> None:
    (c,) = seed_appointments(pool, 1)
    _slow_confirm(pool, 1.5)
    agent = Actor(c.agent_user_id, c.tenant_id)
    outcome: list[object] = []

    def confirm() -> None:
        outcome.append(service.confirm_appointment(_calendar(pool), agent, c.appointment_id))

    thread = threading.Thread(target=confirm)
    thread.start()
    wait_for(lambda: _sleeping_backends(pool) == 1, 5, "the confirm to hold the appointment's row lock")

    during = make_job(pool).run_once()  # the cycle runs while the confirm is in flight

    assert (during.expired_count, during.skipped_locked) == (0, 1)  # skipped, not waited for, counted
    thread.join(10)
    assert len(outcome) == 1  # the confirm committed
    after = make_job(pool).run_once()
    assert (after.expired_count, after.skipped_locked) == (0, 0)  # Confirmed: out of the selection
    appointment = rows_by_id(pool, "appointment", [c.appointment_id])[c.appointment_id]
    assert (appointment["status"], appointment["version"]) == ("Confirmed", 2)
    assert statuses(pool, "availability_slot", [c.slot_id]) == ["Booked"]
    assert [row["event_type"] for row in outbox_rows(pool)] == ["pin.calendar.appointment-confirmed"]


def test_race_with_agent_confirm_committed_just_before(pool: ConnectionPool[Conn]) -> None:
    (c,) = seed_appointments(pool, 1)
    service.confirm_appointment(_calendar(pool), Actor(c.agent_user_id, c.tenant_id), c.appointment_id)

    with capture_logs() as logs:
        result = make_job(pool).run_once()

    assert (result.expired_count, result.skipped_locked) == (0, 0)
    assert [entry["event"] for entry in logs] == ["cycle completed"]  # not selected: an idle cycle
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Confirmed"]
    assert [row["event_type"] for row in outbox_rows(pool)] == ["pin.calendar.appointment-confirmed"]


def test_race_with_agent_confirm_arriving_while_the_worker_holds_the_lock(pool: ConnectionPool[Conn]) -> None:
    (c,) = seed_appointments(pool, 1)
    slow_expiry(pool, 1.0)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(make_job(pool).run_once()))
    worker.start()
    wait_for(lambda: _sleeping_backends(pool) == 1, 5, "the worker to hold the appointment inside its expiry")

    # the confirm waits for the worker's row lock, then re-reads: no longer Pending, the confirm loses
    with pytest.raises(AppointmentNotPendingError):
        service.confirm_appointment(_calendar(pool), Actor(c.agent_user_id, c.tenant_id), c.appointment_id)

    worker.join(10)
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Expired"]
    assert [row["event_type"] for row in outbox_rows(pool)] == [CANCELLED, STATUS_CHANGED]


def test_race_with_an_operation_holding_the_slot(pool: ConnectionPool[Conn], database_url: str) -> None:
    """A row of the cluster held elsewhere past the item's lock timeout: that item rolls back untouched, is counted
    as skipped, and the rest of the batch goes on (the cycle neither hangs nor overwrites)."""
    held, free = seed_appointments(pool, 2)
    blocker = connect(database_url)
    try:
        blocker.execute("SELECT 1 FROM calendar.availability_slot WHERE id = %s FOR NO KEY UPDATE", (held.slot_id,))
        result = make_job(pool, item_lock_timeout_seconds=0.3).run_once()
    finally:
        blocker.rollback()
        blocker.close()

    assert (result.expired_count, result.skipped_locked) == (1, 1)
    assert statuses(pool, "appointment", [held.appointment_id, free.appointment_id]) == ["Pending", "Expired"]
    appointment = rows_by_id(pool, "appointment", [held.appointment_id])[held.appointment_id]
    assert appointment["version"] == 1  # rolled back whole
    assert statuses(pool, "calendar_event", [held.event_id]) == ["Scheduled"]
    assert str(held.appointment_id) not in per_key(pool, CANCELLED)
    with pool.connection() as conn:  # a skipped item is not poison
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
    assert make_job(pool).run_once().expired_count == 1  # released: the next cycle takes it
    assert statuses(pool, "appointment", [held.appointment_id]) == ["Expired"]


# ------------------------------------------------------------------------------------------------ SLO точности


def _expired_at(pool: ConnectionPool[Conn], c: Cluster) -> datetime | None:
    """AsOf of the expiry (the appointment's UpdatedAt) once it is Expired, checking the slot is released with it."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT a.status, a.updated_at, s.status AS slot_status FROM calendar.appointment AS a"
            " JOIN calendar.availability_slot AS s ON s.id = a.slot_id WHERE a.id = %s",
            (c.appointment_id,),
        ).fetchone()
    assert row is not None
    if row["status"] != "Expired":
        assert row["slot_status"] == "Booked"
        return None
    assert row["slot_status"] == "Available"  # the released slot is visible as soon as the expiry committed
    updated_at = row["updated_at"]
    assert isinstance(updated_at, datetime)
    return updated_at


class DozeWatcher:
    """A job that lets the test know when the runner, after a cycle, has asked for the next deadline (is dozing)."""

    def __init__(self, job: AppointmentTimeoutJob) -> None:
        self.job = job
        self.name = job.name
        self.cycles = 0
        self.dozing = threading.Event()

    def run_once(self) -> Any:
        self.dozing.clear()
        result = self.job.run_once()
        self.cycles += 1
        return result

    def seconds_until_next_due(self) -> float | None:
        until = self.job.seconds_until_next_due()
        self.dozing.set()  # the runner now sleeps on what this answer knew
        return until

    def wait_until_dozing(self) -> None:
        assert self.dozing.wait(10), "the runner never went to sleep"


def test_slo_expired_by_t_plus_interval_plus_cycle(
    pool: ConnectionPool[Conn], runner: Callable[..., threading.Thread], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the wake-up (deadline polling off), the 60 s tick alone bounds the delay: t + interval + cycle, with
    the default jitter at the draw that used to put the tick latest (it now comes early, never late)."""
    monkeypatch.setattr(jobs_runner.random, "random", lambda: 0.999)
    interval = 1.5
    watcher = DozeWatcher(make_job(pool))
    runner(watcher, RunnerConfig(interval_seconds=interval, due_poll_seconds=0))
    watcher.wait_until_dozing()  # the worker now sleeps towards its next tick, knowing of no deadline
    (c,) = seed_appointments(pool, 1, pending_expires_at=db_now(pool) + timedelta(seconds=0.2))
    assert c.pending_expires_at is not None

    wait_for(lambda: _expired_at(pool, c) is not None, interval + 3, "the expiry on the next tick")

    expired_at = _expired_at(pool, c)
    assert expired_at is not None
    with pool.connection() as conn:
        cycle = conn.execute("SELECT duration_ms FROM jobs.cycle WHERE instance = 'test'").fetchone()
    assert cycle is not None
    duration_ms = cycle["duration_ms"]
    assert isinstance(duration_ms, int)
    assert expired_at - c.pending_expires_at <= timedelta(seconds=interval, milliseconds=duration_ms + 100)


def test_slo_wake_up_expires_within_two_seconds_of_t(
    pool: ConnectionPool[Conn], runner: Callable[..., threading.Thread]
) -> None:
    """With the real schedule (60 s ticks), an appointment booked after the worker fell asleep expires within 2 s."""
    (booked_before,) = seed_appointments(pool, 1, pending_expires_at=db_now(pool) + timedelta(seconds=1))
    watcher = DozeWatcher(make_job(pool))
    runner(watcher, RunnerConfig(interval_seconds=60))
    watcher.wait_until_dozing()  # asleep towards the first deadline (or the 60 s tick): the second one is born now
    (booked_after,) = seed_appointments(pool, 1, pending_expires_at=db_now(pool) + timedelta(seconds=1.5))

    for c in (booked_before, booked_after):
        wait_for(lambda c=c: _expired_at(pool, c) is not None, 4, "the expiry at its deadline")  # type: ignore[misc]
        expired_at = _expired_at(pool, c)
        assert expired_at is not None
        assert c.pending_expires_at is not None
        assert timedelta(0) < expired_at - c.pending_expires_at < timedelta(seconds=2)
        assert db_now(pool) - c.pending_expires_at < timedelta(seconds=2.5)  # and committed by then


# ------------------------------------------------------------------------- Инфраструктурная ошибка


def test_infrastructure_error_connection_terminated_mid_cycle(
    pool: ConnectionPool[Conn], database_url: str, runner: Callable[..., threading.Thread]
) -> None:
    clusters = seed_appointments(pool, 4)
    errors_before = metric("calendar_appointment_timeout_errors_total")
    blocker = connect(database_url)
    try:
        # an in-flight operation holds the second appointment's slot: the worker's item waits on it mid-cycle
        blocker.execute("SELECT 1 FROM calendar.availability_slot WHERE id = %s FOR NO KEY UPDATE",
                        (clusters[1].slot_id,))  # fmt: skip
        thread = runner(make_job(pool, item_lock_timeout_seconds=30), RunnerConfig(interval_seconds=60))

        def waiting_worker() -> int | None:
            row = blocker.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            return None if row is None else int(row["pid"])  # type: ignore[call-overload]

        wait_for(lambda: waiting_worker() is not None, 15, "the worker to wait on the slot lock")
        assert statuses(pool, "appointment", [clusters[0].appointment_id]) == ["Expired"]
        blocker.execute("SELECT pg_terminate_backend(%s)", (waiting_worker(),))
    finally:
        blocker.rollback()
        blocker.close()

    ids = [c.appointment_id for c in clusters]
    wait_for(lambda: statuses(pool, "appointment", ids) == ["Expired"] * 4, 20, "the next cycle to expire the rest")
    assert thread.is_alive()  # the loop survived
    assert metric("calendar_appointment_timeout_errors_total") == errors_before + 1
    # no event lost or doubled: exactly one pair per appointment
    assert per_key(pool, CANCELLED) == {str(i): 1 for i in ids}
    assert per_key(pool, STATUS_CHANGED) == {str(c.event_id): 1 for c in clusters}
    assert statuses(pool, "availability_slot", [c.slot_id for c in clusters]) == ["Available"] * 4
    with pool.connection() as conn:  # no row lock left: NOWAIT raises LockNotAvailable on any held row
        assert len(conn.execute("SELECT id FROM calendar.appointment FOR NO KEY UPDATE NOWAIT").fetchall()) == 4
        assert len(conn.execute("SELECT id FROM calendar.availability_slot FOR NO KEY UPDATE NOWAIT").fetchall()) == 4


# ------------------------------------------------------------------- the claim's boundary: PendingExpiresAt < AsOf


def test_the_claim_takes_an_appointment_only_once_pending_expires_at_is_strictly_before_as_of(
    pool: ConnectionPool[Conn],
) -> None:
    """Seed 000: due when ``PendingExpiresAt < AsOf``. At AsOf = PendingExpiresAt exactly it is not due; one
    microsecond later it is (the worker's own claim, with AsOf injected)."""
    (c,) = seed_appointments(pool, 1, pending_expires_at=db_now(pool) + timedelta(hours=1))
    assert c.pending_expires_at is not None

    at_deadline = make_job(pool, lambda conn: c.pending_expires_at).run_once()

    assert (at_deadline.claimed_count, at_deadline.expired_count) == (0, 0)
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Pending"]
    after = make_job(pool, lambda conn: c.pending_expires_at + timedelta(microseconds=1)).run_once()
    assert after.expired_count == 1
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Expired"]


# ------------------------------------------------------------------- reminders: only Pending ones are Skipped


def test_a_sent_reminder_stays_sent_when_its_appointment_expires(pool: ConnectionPool[Conn]) -> None:
    """Event-reminder rule 3: the event's Pending reminders become Skipped; one already Sent stays Sent."""
    (c,) = seed_appointments(pool, 1)
    sent, pending = c.reminder_ids
    execute(pool, "UPDATE calendar.event_reminder SET status = 'Sent' WHERE id = %s", (sent,))

    assert make_job(pool).run_once().expired_count == 1

    assert statuses(pool, "event_reminder", [sent, pending]) == ["Sent", "Skipped"]
    assert statuses(pool, "calendar_event", [c.event_id]) == ["Cancelled"]


# ------------------------------------------------------------ Гонка «освобождение слота ↔ новое бронирование»


def _lock_waiters(pool: ConnectionPool[Conn]) -> int:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    assert row is not None
    return int(row["n"])  # type: ignore[call-overload]


@pytest.mark.parametrize("slot_outcome", ["released", "expired"])
def test_race_between_the_slot_release_and_new_bookings_of_that_slot(
    pool: ConnectionPool[Conn], database_url: str, slot_outcome: str
) -> None:
    """INV-SLT-3: the release and new bookings compete for the slot row; the slot is bookable only after the
    worker commits, and exactly one booking wins (none when the slot is retired, INV-SLT-5). The race is made
    certain: the worker is held inside its expiry, with the cluster locked, by a trigger that waits for an
    advisory lock the test holds, while three investors' bookings, each on its own connection, start and wait for
    the slot's row lock; then the test lets the worker commit and they go."""
    now = db_now(pool)
    start_at = now + (timedelta(days=3) if slot_outcome == "released" else timedelta(minutes=10))
    (c,) = seed_appointments(pool, 1, start_at=start_at, lead_minutes=30)
    execute(pool, "CREATE FUNCTION public.test_hold_expiry() RETURNS trigger LANGUAGE plpgsql AS $$"
                  " BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$")  # fmt: skip
    execute(pool, "CREATE TRIGGER test_hold_expiry BEFORE UPDATE ON calendar.appointment FOR EACH ROW"
                  " WHEN (OLD.status = 'Pending' AND NEW.status = 'Expired')"
                  " EXECUTE FUNCTION public.test_hold_expiry()")  # fmt: skip
    gate = connect(database_url, autocommit=True)
    gate.execute("SELECT pg_advisory_lock(4242)")
    waiting_before = _lock_waiters(pool)
    results: list[object] = []
    # the held expiry waits on the gate within the item's lock timeout: make that one longer than the test's waits
    job = make_job(pool, item_lock_timeout_seconds=60)
    worker = threading.Thread(target=lambda: results.append(job.run_once()))
    worker.start()
    investors = [Actor(uuid.uuid4(), c.tenant_id) for _ in range(3)]

    def book(investor: Actor) -> object:
        try:
            return service.book_slot(_calendar(pool), investor, c.slot_id)
        except SlotNotAvailableError as exc:
            return exc

    try:
        wait_for(lambda: _lock_waiters(pool) == waiting_before + 1, 10, "the worker to be held inside its expiry")
        with ThreadPoolExecutor(max_workers=3) as executor:
            bookings = [executor.submit(book, investor) for investor in investors]
            wait_for(lambda: _lock_waiters(pool) == waiting_before + 4, 10, "the three bookings to wait for the slot")
            assert worker.is_alive()  # the worker still holds the slot: nobody booked it yet
            gate.execute("SELECT pg_advisory_unlock(4242)")
            outcomes = [b.result(timeout=30) for b in bookings]
    finally:
        gate.close()
    worker.join(10)

    assert statuses(pool, "appointment", [c.appointment_id]) == ["Expired"]
    won = [o for o in outcomes if not isinstance(o, SlotNotAvailableError)]
    with pool.connection() as conn:
        on_slot = conn.execute(
            "SELECT status, count(*) AS n FROM calendar.appointment WHERE slot_id = %s GROUP BY status ORDER BY status",
            (c.slot_id,),
        ).fetchall()
        slot = conn.execute(
            "SELECT status, version FROM calendar.availability_slot WHERE id = %s", (c.slot_id,)
        ).fetchone()
    assert slot is not None
    if slot_outcome == "released":
        assert len(won) == 1, outcomes  # exactly one booking wins, the others see the slot Booked
        assert on_slot == [{"status": "Expired", "n": 1}, {"status": "Pending", "n": 1}]  # no double booking
        assert (slot["status"], slot["version"]) == ("Booked", 4)  # seeded 2, released +1, booked +1
    else:
        assert won == [], outcomes  # retired, not released: nobody can book it
        assert on_slot == [{"status": "Expired", "n": 1}]
        assert (slot["status"], slot["version"]) == ("Expired", 3)


# ----------------------------------------------------------------------------- the "cycle started" log line


def test_the_cycle_started_line_carries_the_run_id_and_as_of(pool: ConnectionPool[Conn]) -> None:
    """Seed 000's log table: "cycle started (runId, AsOf)"; the run id is the one of jobs.cycle and of the
    outbox rows' correlation id, AsOf the cycle's one clock reading."""
    seed_appointments(pool, 1)
    clock = RecordingClock(shift=timedelta(seconds=5))

    with capture_logs() as logs:
        make_job(pool, clock).run_once()

    started = logs[0]
    assert started["event"] == "cycle started"
    assert started["log_level"] == "info"
    assert started["RunId"] == last_run_id(pool)
    assert started["AsOf"] == clock.readings[0].isoformat()
    assert len(clock.readings) == 1  # read once per cycle
    (row, _) = outbox_rows(pool)
    assert row["headers"]["correlation-id"] == started["RunId"]
