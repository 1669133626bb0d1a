"""A stop reaches the statement in flight (seed 000, "Cancellation": a host's stop reaches every I/O; the current
batch commits or rolls back whole; locks are released): both workers as real `pin worker` processes, blocked in a
statement on the server (a trigger that sleeps, a row the test's own connection holds), receive SIGTERM."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.calendar.worker.factory import seed_appointments, slow_expiry, statuses
from tests.outbox.support import wait_for
from tests.promotion.support import db_now as promotion_db_now
from tests.promotion.support import gate_transitions, json_lines, purchase_events, purchase_rows, seed_purchases
from tests.support.contention import holding_connection
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# SIGTERM to exit: the cancel, the rollback, the cycle's record, the pool's close and the interpreter's exit
STOP_SECONDS = 3.0


def _lines(process: RoleProcess, prefix: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(process.output()) if str(line.get("event", "")).startswith(prefix)]


def _waiting(pool: ConnectionPool[Conn], condition: str) -> bool:
    """Whether another session of this database is in a statement that waits (``condition`` on pg_stat_activity)."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity"
            f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND {condition}"
        ).fetchone()
    assert row is not None
    return bool(row["n"])


def _stop(worker: RoleProcess, signum: int = signal.SIGTERM) -> tuple[int, float]:
    """SIGTERM (or ``signum``); the exit code and the seconds it took."""
    started = time.monotonic()
    worker.process.send_signal(signum)
    code = worker.wait(15)
    return code, time.monotonic() - started


def _last_cycle(pool: ConnectionPool[Conn], job: str) -> dict[str, Any] | None:
    with pool.connection() as conn:
        return conn.execute("SELECT succeeded, counters FROM jobs.cycle WHERE job = %s", (job,)).fetchone()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_cancels_the_appointment_timeout_statement_and_rolls_its_item_back(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess], signum: int
) -> None:
    """The expiry's UPDATE sleeps 20 s in a trigger: SIGTERM (or Ctrl-C) cancels it, the item rolls back whole,
    exit 0 in 3 s."""
    (cluster,) = seed_appointments(pool, 1)
    slow_expiry(pool, 20)
    worker = spawn_role("worker", "appointment-timeout")
    wait_for(lambda: _waiting(pool, "wait_event = 'PgSleep'"), timeout=30, what="the worker in its sleeping UPDATE")

    code, took = _stop(worker, signum)

    assert code == 0, worker.output()
    assert took < STOP_SECONDS
    (line,) = _lines(worker, "cycle stopped")
    assert (line["RolledBack"], line["AppointmentId"]) == ("the item", str(cluster.appointment_id))
    assert not _lines(worker, "cycle failed")
    assert not _lines(worker, "job cycle failed")
    # nothing half-done: the appointment, its slot and its event as they were, no event written
    assert statuses(pool, "appointment", [cluster.appointment_id]) == ["Pending"]
    assert statuses(pool, "availability_slot", [cluster.slot_id]) == ["Booked"]
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone() == {"n": 0}
        # no lock left behind: a follow-up statement gets the rows at once
        conn.execute("SELECT 1 FROM calendar.appointment WHERE id = %s FOR UPDATE NOWAIT", (cluster.appointment_id,))
        conn.execute("SELECT 1 FROM calendar.availability_slot WHERE id = %s FOR UPDATE NOWAIT", (cluster.slot_id,))
        conn.rollback()
    # the cycle's own bookkeeping ran after the cancel: a completed cycle, not a failed one
    last = _last_cycle(pool, "appointment-timeout")
    assert last is not None
    assert last["succeeded"] is True
    assert last["counters"]["ExpiredCount"] == 0


def test_sigterm_cancels_the_expire_promotions_statement_and_rolls_the_batch_back(
    pool: ConnectionPool[Conn], database_url: str, spawn_role: Callable[..., RoleProcess]
) -> None:
    """The batch's write waits on a row the test's own connection holds: SIGTERM cancels it, the whole batch
    rolls back, its row locks go, exit 0 within 3 s."""
    purchases = seed_purchases(pool, 5, ends_at=promotion_db_now(pool) - timedelta(minutes=1))
    take_gate = gate_transitions(pool)
    holder = holding_connection(database_url)
    try:
        holder.execute(take_gate)
        worker = spawn_role("worker", "expire-promotions")
        wait_for(lambda: _waiting(pool, "wait_event_type = 'Lock'"), timeout=30, what="the write to wait on the row")

        code, took = _stop(worker)
    finally:
        holder.rollback()
        holder.close()

    assert code == 0, worker.output()
    assert took < STOP_SECONDS
    (line,) = _lines(worker, "cycle stopped")
    assert (line["RolledBack"], line["Count"]) == ("the batch", 5)
    assert not _lines(worker, "job cycle failed")
    rows = purchase_rows(pool)
    assert {rows[p.id]["status"] for p in purchases} == {"Active"}  # the batch rolled back whole
    assert purchase_events(pool, "Expired") == []
    with pool.connection() as conn:
        conn.execute("SELECT 1 FROM promotion.purchase FOR UPDATE NOWAIT")  # no lock left behind
        conn.rollback()
    last = _last_cycle(pool, "expire-promotions")
    assert last is not None
    assert (last["succeeded"], last["counters"]["ExpiredCount"]) == (True, 0)
