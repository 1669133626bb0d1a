"""appointment-timeout as real `pin worker appointment-timeout` processes: duplicate instances on one backlog of
1,000 due appointments, a graceful stop on SIGTERM in the middle of a cycle, and `--once`."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.calendar.worker.factory import (
    Cluster,
    db_now,
    execute,
    outbox_rows,
    rows_by_id,
    seed_appointments,
    slow_expiry,
    statuses,
)
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER = ("worker", "appointment-timeout")
CANCELLED = "pin.calendar.appointment-cancelled"
STATUS_CHANGED = "pin.calendar.event-status-changed"


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of a role's output (its logs and, with --once, its result)."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


def events_of(process: RoleProcess, event: str) -> list[dict[str, Any]]:
    """The log lines of one event."""
    return [line for line in json_lines(process.output()) if line.get("event") == event]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def count_status(pool: ConnectionPool[Conn], status: str) -> int:
    """How many appointments have ``status``."""
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) AS n FROM calendar.appointment WHERE status = %s", (status,)).fetchone()
    assert row is not None
    count = row["n"]
    assert isinstance(count, int)
    return count


# ------------------------------------------------------------------------ Duplicate / параллельные инстансы


def test_duplicate_instances(pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]) -> None:
    # DEBUG: the first cycle is idle, and an idle cycle's one line ("cycle completed") is at DEBUG
    env = {"PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": "60", "PIN_LOG_LEVEL": "DEBUG"}
    workers = [spawn_role(*WORKER, env=env) for _ in range(3)]
    wait_for(lambda: all(events_of(w, "cycle completed") for w in workers), 30, "every worker's first cycle")
    # 1,000 appointments fall due at the same instant while all three doze: the wake-up brings all three onto
    # the head of the same index at once, where SKIP LOCKED must hand each appointment to exactly one of them.
    clusters = seed_appointments(pool, 1000, pending_expires_at=db_now(pool) + timedelta(seconds=2))

    wait_for(lambda: count_status(pool, "Expired") == 1000, 150, "all 1,000 appointments to expire")

    ids = [c.appointment_id for c in clusters]
    assert {row["version"] for row in rows_by_id(pool, "appointment", ids).values()} == {2}  # expired once
    cancelled = Counter(row["message_key"] for row in outbox_rows(pool, CANCELLED))
    changed = Counter(row["message_key"] for row in outbox_rows(pool, STATUS_CHANGED))
    assert cancelled == Counter({str(c.appointment_id): 1 for c in clusters})  # exactly one event each
    assert changed == Counter({str(c.event_id): 1 for c in clusters})
    assert statuses(pool, "availability_slot", [c.slot_id for c in clusters]) == ["Available"] * 1000
    for worker in workers:
        assert worker.terminate() == 0
    expired_by = [sum(line["ExpiredCount"] for line in events_of(w, "cycle completed")) for w in workers]
    skipped = sum(line["SkippedLockedCount"] for w in workers for line in events_of(w, "cycle completed"))
    logged = Counter(line["AppointmentId"] for w in workers for line in events_of(w, "appointment expired"))
    assert sum(expired_by) == 1000  # no appointment counted by two instances
    assert set(logged.values()) == {1}
    assert len(logged) == 1000
    assert sum(1 for n in expired_by if n > 0) >= 2, expired_by  # the work really was shared
    assert skipped > 0  # ... and the instances really met each other's locks


# ---------------------------------------------------------------------------------------------- Cancellation


def _whole_or_absent(pool: ConnectionPool[Conn], clusters: list[Cluster]) -> tuple[int, int]:
    """Every cluster fully expired (with its two outbox rows) or fully untouched; returns (expired, pending)."""
    appointments = rows_by_id(pool, "appointment", [c.appointment_id for c in clusters])
    slots = rows_by_id(pool, "availability_slot", [c.slot_id for c in clusters])
    events = rows_by_id(pool, "calendar_event", [c.event_id for c in clusters])
    reminders = rows_by_id(pool, "event_reminder", [r for c in clusters for r in c.reminder_ids])
    outbox = Counter(row["message_key"] for row in outbox_rows(pool))
    expired = pending = 0
    for c in clusters:
        state = (
            appointments[c.appointment_id]["status"],
            slots[c.slot_id]["status"],
            events[c.event_id]["status"],
            tuple(reminders[r]["status"] for r in c.reminder_ids),
            outbox[str(c.appointment_id)],
            outbox[str(c.event_id)],
        )
        if state == ("Expired", "Available", "Cancelled", ("Skipped", "Skipped"), 1, 1):
            expired += 1
        else:
            assert state == ("Pending", "Booked", "Scheduled", ("Pending", "Pending"), 0, 0), state
            pending += 1
    return expired, pending


def test_cancellation(pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]) -> None:
    clusters = seed_appointments(pool, 25)
    slow_expiry(pool, 0.5)  # each item holds its locks 500 ms: the cycle lasts at least 12.5 s
    worker = spawn_role(*WORKER, env={"PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": "60"})
    wait_for(lambda: len(events_of(worker, "appointment expired")) >= 3, 30, "the cycle to be under way")

    stopped_at = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    # within 3 s (the item in flight cancelled and rolled back, then the process's exit), not at the cycle's end
    assert time.monotonic() - stopped_at < 3

    expired, pending = _whole_or_absent(pool, clusters)
    assert expired >= 3
    assert pending > 0  # it really stopped mid-cycle
    (completed,) = events_of(worker, "cycle completed")
    assert completed["ExpiredCount"] == expired  # the item in flight at SIGTERM rolled back; no other started
    with pool.connection() as conn:  # no lock left behind: every row can be taken at once
        # raises LockNotAvailable if any row were still held
        locked = conn.execute("SELECT id FROM calendar.appointment FOR NO KEY UPDATE NOWAIT").fetchall()
        conn.rollback()
    assert len(locked) == 25
    # the rest is taken by the next run, once each (without the slow trigger: 11 s of sleeps covered nothing more)
    execute(pool, "DROP TRIGGER test_slow_expiry ON calendar.appointment")
    rerun = spawn_role(*WORKER, "--once")
    assert rerun.wait(30) == 0
    assert _whole_or_absent(pool, clusters) == (25, 0)


# ------------------------------------------------------------------------------------------------- --once


def test_once_prints_the_result_counters_as_json(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    now = db_now(pool)
    seed_appointments(pool, 2, start_at=now + timedelta(days=2))
    seed_appointments(pool, 1, start_at=now + timedelta(minutes=20), lead_minutes=60)  # past its lead time

    worker = spawn_role(*WORKER, "--once")

    assert worker.wait(30) == 0
    (result,) = [line for line in json_lines(worker.output()) if "event" not in line]
    assert set(result) == {
        "ExpiredCount",
        "SlotsReleasedCount",
        "SlotsExpiredCount",
        "SkippedLockedCount",
        "DurationMs",
    }
    assert (result["ExpiredCount"], result["SlotsReleasedCount"], result["SlotsExpiredCount"]) == (3, 2, 1)
    assert result["SkippedLockedCount"] == 0
    assert count_status(pool, "Expired") == 3


def test_cancellation_with_the_database_gone(spawn_role: Callable[..., RoleProcess]) -> None:
    """SIGTERM while every step fails to reach the database: the worker still stops, exit 0, within seconds."""
    with socket.socket() as probe:  # a port nothing listens on: the database is gone
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = spawn_role(*WORKER, env={"PIN_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/gone"})
    # it waits for the database, one line per attempt (docs/operations.md), before its first cycle
    wait_for(lambda: bool(events_of(worker, "database unreachable; waiting")), 30, "the worker to wait")

    stopped_at = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
    assert time.monotonic() - stopped_at < 6  # not the pool's 30 s wait for a connection
