"""expire-promotions as real `pin worker expire-promotions` processes: AC2 (several instances), AC6 through
the command line (logs), SIGTERM mid-cycle (the batch in flight rolled back), and the wake-up precision."""

# ruff: noqa: N802 - test names carry the seed's acceptance criterion ids (AC1..AC8)
from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.outbox.writer import RELAY_POLICY
from pin.promotion import service
from tests.promotion.support import (
    STANDARD_7D,
    db_now,
    die_once_at_commit,
    fail_updates_of,
    json_lines,
    json_objects,
    purchase_events,
    purchase_rows,
    seed_purchases,
    slow_transitions_to,
)
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER = ("worker", "expire-promotions")


def _events_of(process: RoleProcess, event: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(process.output()) if line.get("event") == event]


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _count_status(pool: ConnectionPool[Conn], status: str) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) AS n FROM promotion.purchase WHERE status = %s", (status,)).fetchone()
    assert row is not None
    count = row["n"]
    assert isinstance(count, int)
    return count


def test_AC2_three_worker_processes_expire_each_purchase_once_with_exactly_one_event(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    # DEBUG: the first cycle finds nothing, and an idle cycle's one line ("cycle completed") is at DEBUG
    env = {
        "PIN_EXPIRE_PROMOTIONS_BATCH_SIZE": "50",
        "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": "60",
        "PIN_LOG_LEVEL": "DEBUG",
    }
    workers = [spawn_role(*WORKER, env=env) for _ in range(3)]
    _wait(lambda: all(_events_of(w, "cycle completed") for w in workers), 90, "every worker's first cycle")
    # 1000 purchases fall due at the same instant while all three doze; each expiry holds its row lock 2 ms,
    # so the instances' batches overlap and they really compete for the head of the index.
    slow_transitions_to(pool, "Expired", 0.002)
    purchases = seed_purchases(pool, 1000, ends_at=db_now(pool) + timedelta(seconds=2))

    _wait(lambda: _count_status(pool, "Expired") == 1000, 120, "all 1000 purchases to expire")

    rows = purchase_rows(pool)
    assert {row["version"] for row in rows.values()} == {2}
    events = purchase_events(pool, "Expired")
    per_key = Counter(e["message_key"] for e in events)
    assert len(per_key) == 1000
    assert set(per_key.values()) == {1}
    assert set(per_key) == {str(p.id) for p in purchases}
    for worker in workers:
        assert worker.terminate() == 0
    expired_by = [sum(c["ExpiredCount"] for c in _events_of(w, "cycle completed")) for w in workers]
    skipped = sum(c["SkippedLocked"] for w in workers for c in _events_of(w, "cycle completed"))
    assert sum(expired_by) == 1000  # no purchase counted by two instances
    assert sum(1 for n in expired_by if n > 0) >= 2, expired_by  # the work really was shared
    assert skipped > 0  # ... and instances really met each other's locks
    expired_logs = [line["PurchaseId"] for w in workers for line in _events_of(w, "promotion expired")]
    assert Counter(expired_logs) == Counter({str(p.id): 1 for p in purchases})


def test_AC6_once_excludes_the_poison_purchase_logs_it_and_commits_the_rest(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    purchases = seed_purchases(pool, 5, ends_at=db_now(pool) - timedelta(minutes=1))
    poison = purchases[1]
    fail_updates_of(pool, poison.id)

    once = spawn_role(*WORKER, "--once")
    assert once.wait(60) == 0

    lines = json_lines(once.output())
    result = next(line for line in lines if "ExpiredCount" in line and "event" not in line)
    assert result == {"ExpiredCount": 4, "SkippedLocked": 0, "DurationMs": result["DurationMs"]}
    (failed,) = [line for line in lines if line.get("event") == "item failed"]
    assert failed["level"] == "error"
    assert failed["PurchaseId"] == str(poison.id)
    assert "injected poison" in failed["exception"]
    started = next(line for line in lines if line.get("event") == "cycle started")
    assert {"RunId", "AsOf"} <= set(started)
    selected = next(line for line in lines if line.get("event") == "batch selected")
    assert selected["Count"] == 5
    expired = [line for line in lines if line.get("event") == "promotion expired"]  # one line per purchase
    assert {line["PurchaseId"] for line in expired} == {str(p.id) for p in purchases} - {str(poison.id)}
    assert len(expired) == 4
    assert all({"PurchaseId", "TenantId", "PackageKind"} <= set(line) for line in expired)
    assert {line["TenantId"] for line in expired} == {str(purchases[0].tenant_id)}
    completed = next(line for line in lines if line.get("event") == "cycle completed")
    assert (completed["ExpiredCount"], completed["SkippedLocked"]) == (4, 0)
    rows = purchase_rows(pool)
    assert rows[poison.id]["status"] == "Active"
    assert sum(1 for p in purchases if rows[p.id]["status"] == "Expired") == 4
    assert len(purchase_events(pool, "Expired")) == 4


def test_sigterm_mid_cycle_rolls_the_batch_in_flight_back_and_exits_0(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    seed_purchases(pool, 600, ends_at=db_now(pool) - timedelta(minutes=1))
    slow_transitions_to(pool, "Expired", 0.005)  # a batch of 200 takes about a second
    worker = spawn_role(*WORKER, env={"PIN_EXPIRE_PROMOTIONS_BATCH_SIZE": "200"})
    _wait(lambda: bool(_events_of(worker, "batch selected")), 30, "the first batch to be selected")

    stopped_at = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert time.monotonic() - stopped_at < 3  # the batch's write is cancelled, not waited for

    assert _events_of(worker, "worker stopped")
    expired = _count_status(pool, "Expired")
    assert expired in (0, 200, 400)  # whole batches only (the one in flight rolled back); the backlog not done
    events = purchase_events(pool, "Expired")
    assert len(events) == expired == len({e["message_key"] for e in events})
    completed = _events_of(worker, "cycle completed")
    assert sum(c["ExpiredCount"] for c in completed) == expired


def test_a_purchase_expires_within_a_second_of_its_ends_at_with_a_60_s_interval(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    # DEBUG: the first cycle is idle, its one line at DEBUG
    worker = spawn_role(*WORKER, env={"PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": "60", "PIN_LOG_LEVEL": "DEBUG"})
    _wait(lambda: bool(_events_of(worker, "cycle completed")), 30, "the worker's first cycle")
    time.sleep(0.5)  # the worker is now dozing towards a tick ~60 s away
    now = db_now(pool)
    # Created after the worker went to sleep, through the real use case, ending two seconds from now.
    purchase = service.activate_purchase(
        pool,
        tenant_id=uuid.uuid4(),
        buyer_user_id=uuid.uuid4(),
        package_id=STANDARD_7D,
        targets=[service.TargetInput("Project", uuid.uuid4())],
        ends_at=now + timedelta(seconds=2),
        correlation_id="precision",
        outbox=RELAY_POLICY,
    )

    _wait(lambda: purchase_rows(pool, [purchase.id])[purchase.id]["status"] == "Expired", 10, "the expiry")

    as_of = purchase_rows(pool, [purchase.id])[purchase.id]["updated_at"]
    lateness = (as_of - purchase.ends_at).total_seconds()
    assert 0 <= lateness < 1.0, lateness  # never early; within about a second
    assert worker.terminate() == 0


def test_AC7_a_running_worker_whose_backend_is_terminated_at_commit_recovers_with_one_event_each(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    purchases = seed_purchases(pool, 20, ends_at=db_now(pool) - timedelta(seconds=10))
    die_once_at_commit(pool)

    worker = spawn_role(*WORKER)
    _wait(lambda: _count_status(pool, "Expired") == 20, 30, "the retried batch to commit")

    assert _events_of(worker, "cycle failed")  # the first batch died at commit ...
    assert worker.process.poll() is None  # ... and the worker lived on and retried
    events = purchase_events(pool, "Expired")
    assert sorted(e["message_key"] for e in events) == sorted(str(p.id) for p in purchases)
    assert worker.terminate() == 0


def test_a_cycle_is_one_trace_whose_id_the_events_carry(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    purchases = seed_purchases(pool, 2, ends_at=db_now(pool) - timedelta(seconds=1))

    once = spawn_role(*WORKER, "--once", env={"OTEL_TRACES_EXPORTER": "console"})
    assert once.wait(60) == 0

    spans = [o for o in json_objects(once.output()) if "context" in o and "name" in o]
    (cycle,) = [s for s in spans if s["name"] == "expire-promotions cycle"]
    items = [s for s in spans if s["name"] == "expire-promotions item"]
    run_id = cycle["attributes"]["pin.run_id"]
    assert {s["attributes"]["pin.purchase_id"] for s in items} == {str(p.id) for p in purchases}
    assert {s["parent_id"] for s in items} == {cycle["context"]["span_id"]}
    assert {s["attributes"]["pin.run_id"] for s in items} == {run_id}
    trace_id = cycle["context"]["trace_id"].removeprefix("0x")
    for event in purchase_events(pool, "Expired"):
        assert event["headers"]["correlation-id"] == run_id  # the job run id is the correlation id
        assert event["headers"]["traceparent"].split("-")[1] == trace_id  # consumers continue this trace


def test_without_a_span_exporter_there_are_no_item_spans_and_the_events_still_carry_the_cycle_trace(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess]
) -> None:
    seed_purchases(pool, 3, ends_at=db_now(pool) - timedelta(seconds=1))

    once = spawn_role(*WORKER, "--once", env={"OTEL_TRACES_EXPORTER": "none"})
    assert once.wait(60) == 0

    assert not [o for o in json_objects(once.output()) if "context" in o and "name" in o]  # nothing exported
    events = purchase_events(pool, "Expired")
    assert len(events) == 3
    traceparents = {e["headers"]["traceparent"] for e in events}
    assert len(traceparents) == 1  # the cycle span's, recorded even though nothing exports it
    (traceparent,) = traceparents
    assert len(traceparent.split("-")[1]) == 32


def test_a_bad_batch_size_stops_the_worker_with_exit_2_naming_the_variable(
    spawn_role: Callable[..., RoleProcess],
) -> None:
    worker = spawn_role(*WORKER, "--once", env={"PIN_EXPIRE_PROMOTIONS_BATCH_SIZE": "0"})

    assert worker.wait(60) == 2
    assert "PIN_EXPIRE_PROMOTIONS_BATCH_SIZE" in worker.output()
    assert "Traceback" not in worker.output()
