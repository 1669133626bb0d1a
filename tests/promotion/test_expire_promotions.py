"""expire-promotions in process against a real PostgreSQL: seed 002's acceptance criteria AC1, AC3..AC7.

AC2 (several processes), graceful stop and the wake-up precision run real `pin` processes:
see test_expire_promotions_processes.py. AC8 and the consumer half of AC1 arrive with the consumers.
"""

# ruff: noqa: N802 - test names carry the seed's acceptance criterion ids (AC1..AC8)
from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.db import Conn, connect
from pin.jobs import bookkeeping
from pin.messaging import topics
from pin.messaging.contracts import utc_iso
from pin.observability.tracing import spans_exported
from pin.outbox.writer import RELAY_POLICY
from pin.promotion import expiry, service
from pin.promotion.domain import PromotionPurchase, PurchaseTerminalError, Target, TargetKind
from pin.promotion.expiry import JOB_NAME, ExpirePromotionsConfig, ExpirePromotionsJob
from tests.promotion.support import (
    RUB,
    TOP_1D,
    db_now,
    die_once_at_commit,
    execute,
    fail_updates_of,
    heal_poison,
    purchase_events,
    purchase_rows,
    seed_purchases,
    slow_transitions_to,
)
from tests.support import plans

pytestmark = pytest.mark.integration


def _with_processor(provider: TracerProvider) -> TracerProvider:
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider


def _job(pool: ConnectionPool[Conn], batch_size: int = 200, **kwargs: object) -> ExpirePromotionsJob:
    return ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=batch_size), **kwargs)  # type: ignore[arg-type]


def _cancel(pool: ConnectionPool[Conn], purchase: PromotionPurchase, correlation_id: str) -> PromotionPurchase:
    """The manager's cancel use case on ``purchase`` (its tenant, no If-Match)."""
    return service.cancel_purchase(
        pool, purchase_id=purchase.id, tenant_id=purchase.tenant_id, if_match=None, correlation_id=correlation_id,
        outbox=RELAY_POLICY,
    )  # fmt: skip


def _metric(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


def test_AC1_expiry_moves_to_expired_with_version_plus_one_and_writes_the_event(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    project, post = uuid.uuid4(), uuid.uuid4()
    targets = [Target(TargetKind.PROJECT, project), Target(TargetKind.POST, post)]
    (purchase,) = seed_purchases(pool, ends_at=now - timedelta(seconds=5), targets=targets)
    expired_before = _metric("promotion_expire_items_total", {"outcome": "expired"})
    runs_before = _metric("promotion_expire_run_total")

    result = _job(pool).run_once()

    assert (result.expired_count, result.skipped_locked) == (1, 0)
    assert set(result.as_dict()) == {"ExpiredCount", "SkippedLocked", "DurationMs"}
    row = purchase_rows(pool)[purchase.id]
    assert (row["status"], row["version"]) == ("Expired", 2)
    (event,) = purchase_events(pool, "Expired")
    as_of = row["updated_at"]  # UpdatedAt = AsOf (seed 002, step 3)
    assert now <= as_of
    assert event["topic"] == topics.PURCHASE_CHANGED == "pin.promotion.purchase-changed.v1"
    assert event["event_type"] == "pin.promotion.purchase-changed"
    assert event["message_key"] == str(purchase.id)  # key = PurchaseId
    assert event["contract_version"] == 1
    payload = event["payload"]
    assert uuid.UUID(payload.pop("MessageId"))
    assert payload.pop("ContractVersion") == 1
    assert payload.pop("OccurredAt") == utc_iso(as_of)  # OccurredAt = AsOf
    assert payload == {
        "PurchaseId": str(purchase.id),
        "TenantId": str(purchase.tenant_id),
        "BuyerUserId": str(purchase.buyer_user_id),
        "PackageId": str(TOP_1D),
        "PackageCode": "TOP-1D",
        "PackageKind": "Top",
        "Targets": [
            {"TargetKind": "Project", "TargetId": str(project)},
            {"TargetKind": "Post", "TargetId": str(post)},
        ],
        "Status": "Expired",
        "PaymentStatus": "NotRequired",
        "BoostWeight": 50,
        "StartsAt": utc_iso(purchase.starts_at),
        "EndsAt": utc_iso(purchase.ends_at),
        "Price": {"Amount": "990.00", "CurrencyId": str(RUB), "Currency": {"Code": "RUB", "Symbol": "₽"}},
        "Version": 2,
    }
    with pool.connection() as conn:
        cycle = conn.execute("SELECT * FROM jobs.cycle WHERE job = %s", (JOB_NAME,)).fetchone()
    assert cycle is not None
    assert cycle["succeeded"]
    assert event["headers"]["correlation-id"] == str(cycle["run_id"])  # the job run id correlates the event
    assert cycle["counters"]["ExpiredCount"] == 1
    assert _metric("promotion_expire_items_total", {"outcome": "expired"}) == expired_before + 1
    assert _metric("promotion_expire_run_total") == runs_before + 1
    assert _metric("promotion_expire_backlog") == 0


def test_AC3_an_expired_purchase_is_never_selected_again(pool: ConnectionPool[Conn]) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(minutes=1))
    job = _job(pool)
    assert job.run_once().expired_count == 1

    again = job.run_once()

    assert (again.expired_count, again.skipped_locked, again.claimed_count) == (0, 0, 0)
    assert len(purchase_events(pool, "Expired")) == 1
    assert purchase_rows(pool)[purchase.id]["version"] == 2
    # INV-6 in the database too: even a hand-written update of a terminal purchase is refused.
    with pytest.raises(psycopg.errors.CheckViolation, match="TerminalFrozen"):
        execute(pool, "UPDATE promotion.purchase SET status = 'Active' WHERE id = %s", [purchase.id])
    with pytest.raises(psycopg.errors.CheckViolation, match="TerminalFrozen"):  # its targets are frozen with it
        execute(pool, "DELETE FROM promotion.purchase_target WHERE purchase_id = %s", [purchase.id])


def test_AC4_a_cancel_in_flight_is_skipped_then_the_purchase_is_cancelled_never_expired(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(seconds=1))
    (other,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(seconds=1))
    # The cancel's UPDATE sleeps 4 s after it took the row lock: the worker's cycle runs inside that window.
    slow_transitions_to(pool, "Cancelled", 4)
    outcome: dict[str, object] = {}

    def cancel() -> None:
        try:
            outcome["purchase"] = _cancel(pool, purchase, "c-1")
        except Exception as exc:
            outcome["error"] = exc

    canceller = threading.Thread(target=cancel)
    canceller.start()
    _wait_for_sleeping_backend(database_url)

    during = _job(pool).run_once()
    cancel_still_in_flight = canceller.is_alive()  # the worker did not wait for the lock: it skipped the row
    canceller.join(15)

    assert cancel_still_in_flight

    assert (during.expired_count, during.skipped_locked) == (1, 1)  # the other one expired; ours was skipped
    assert "error" not in outcome
    after = _job(pool).run_once()
    assert (after.expired_count, after.skipped_locked) == (0, 0)
    rows = purchase_rows(pool)
    assert (rows[purchase.id]["status"], rows[purchase.id]["version"]) == ("Cancelled", 2)
    assert rows[other.id]["status"] == "Expired"
    ours = [e["payload"]["Status"] for e in purchase_events(pool) if e["message_key"] == str(purchase.id)]
    assert ours == ["Active", "Cancelled"]  # never an Expired event for it


def test_AC4_a_cancel_waiting_behind_the_batch_reads_expired_and_conflicts(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(seconds=1))
    slow_transitions_to(pool, "Expired", 2)  # the worker holds the row lock for 2 s
    worker = threading.Thread(target=_job(pool).run_once)
    worker.start()
    _wait_for_sleeping_backend(database_url)

    with pytest.raises(PurchaseTerminalError):
        _cancel(pool, purchase, "c-2")
    worker.join(15)

    assert purchase_rows(pool)[purchase.id]["status"] == "Expired"
    ours = [e["payload"]["Status"] for e in purchase_events(pool) if e["message_key"] == str(purchase.id)]
    assert ours == ["Active", "Expired"]


def test_AC5_an_empty_cycle_is_a_no_op(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    (future,) = seed_purchases(pool, ends_at=now + timedelta(hours=1))
    (cancelled,) = seed_purchases(pool, ends_at=now - timedelta(hours=1))
    execute(pool, "UPDATE promotion.purchase SET status = 'Cancelled', version = 2 WHERE id = %s", [cancelled.id])
    events_before = purchase_events(pool)

    result = _job(pool).run_once()

    assert (result.expired_count, result.skipped_locked, result.claimed_count) == (0, 0, 0)
    assert purchase_events(pool) == events_before
    rows = purchase_rows(pool)
    assert (rows[future.id]["status"], rows[future.id]["version"]) == ("Active", 1)
    assert rows[cancelled.id]["status"] == "Cancelled"


def test_AC6_a_poison_purchase_is_tried_again_on_every_cycle_and_each_failure_is_counted(
    pool: ConnectionPool[Conn],
) -> None:
    now = db_now(pool)
    purchases = seed_purchases(pool, 3, ends_at=now - timedelta(minutes=5))
    poison = purchases[0]  # oldest first: it sits at the head of the order
    fail_updates_of(pool, poison.id)
    errors_before = _metric("promotion_expire_errors_total")

    first = _job(pool).run_once()

    assert (first.expired_count, first.failed_count) == (2, 1)
    assert _metric("promotion_expire_errors_total") == errors_before + 1
    with pool.connection() as conn:
        failure = conn.execute("SELECT * FROM jobs.item_failure WHERE job = %s", (JOB_NAME,)).fetchone()
    assert failure is not None
    assert failure["item_id"] == poison.id
    assert failure["attempts"] == 1
    assert "injected poison" in failure["last_error"]
    # seed 002 A2: "Poison — на следующий цикл". It stays in the backlog (due, not processed) and in the poison
    # gauge; it does not wake the worker early (it waits for the next tick) ...
    assert (_metric("promotion_expire_backlog"), _metric("promotion_expire_poison_items")) == (1, 1)
    assert _job(pool).seconds_until_next_due() is None
    # ... and the next cycle tries it again: one more failure, logged with its id and counted
    with capture_logs() as logs:
        second = _job(pool).run_once()
    assert (second.claimed_count, second.failed_count, second.retried_count, second.is_full) == (1, 1, 1, False)
    (failed,) = [entry for entry in logs if entry["event"] == "item failed"]
    assert (failed["PurchaseId"], failed["log_level"], failed["Attempts"]) == (str(poison.id), "error", 2)
    assert "injected poison" in failed["exception"]
    assert _metric("promotion_expire_errors_total") == errors_before + 2
    # Healed, it expires on the next cycle and its failure is forgotten.
    heal_poison(pool)
    later = _job(pool).run_once()
    assert (later.expired_count, later.failed_count) == (1, 0)
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
    assert (_metric("promotion_expire_backlog"), _metric("promotion_expire_poison_items")) == (0, 0)
    assert len(purchase_events(pool, "Expired")) == 3


def test_AC6_a_poison_purchase_at_the_head_of_1000_due_ones_holds_none_of_them_up(pool: ConnectionPool[Conn]) -> None:
    """The poison purchase is claimed after the other due ones (the claim's second pass, with the room left), so
    the first cycles expire all the others at full batches; a batch it is part of is not "full"."""
    now = db_now(pool)
    (poison,) = seed_purchases(pool, ends_at=now - timedelta(hours=1))
    others = seed_purchases(pool, 1000, ends_at=now - timedelta(minutes=30))
    fail_updates_of(pool, poison.id)
    job = _job(pool)

    cycles = [job.run_once() for _ in range(6)]

    # cycle 1 meets it first (not known as poison yet): 199 + 4 x 200 + 1 = 1000, the poison one failing twice
    assert [(r.expired_count, r.failed_count, r.is_full) for r in cycles] == [
        (199, 1, True), (200, 0, True), (200, 0, True), (200, 0, True), (200, 0, True), (1, 1, False),
    ]  # fmt: skip
    rows = purchase_rows(pool)
    assert {rows[p.id]["status"] for p in others} == {"Expired"}
    assert rows[poison.id]["status"] == "Active"


@pytest.mark.parametrize("path", ["set-based write", "item by item"])
def test_A1_a_version_conflict_on_write_is_read_again_and_a_purchase_no_longer_active_is_left_alone(
    pool: ConnectionPool[Conn], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Seed 002 A1: "конфликт по версии → перечитка". The manager's cancel lands between the claim's read and the
    worker's write (played here inside the worker's transaction, right after its claim: a real cancel cannot
    commit meanwhile, the claim's row lock makes it wait). The guarded write matches nothing; the worker reads the
    purchase again, finds it Cancelled and leaves it alone: no error, no poison record, no event."""
    purchases = sorted(seed_purchases(pool, 3, ends_at=db_now(pool) - timedelta(minutes=1)), key=lambda p: p.id)
    cancelled = purchases[1]
    if path == "item by item":
        fail_updates_of(pool, purchases[2].id)  # one refused row makes the set-based write fail: item by item
    claim_due = expiry.purchase_claim_due

    def claim_then_cancel(conn: Conn, **kwargs: Any) -> expiry.Claim:
        claim = claim_due(conn, **kwargs)
        if any(p.id == cancelled.id for p in claim.purchases):
            conn.execute(
                "UPDATE promotion.purchase SET status = 'Cancelled', version = version + 1, updated_at = now()"
                " WHERE id = %s",
                (cancelled.id,),
            )
        return claim

    monkeypatch.setattr(expiry, "purchase_claim_due", claim_then_cancel)
    errors_before = _metric("promotion_expire_errors_total")

    with capture_logs() as logs:
        result = _job(pool).run_once()

    expected_failed = 1 if path == "item by item" else 0
    assert (result.expired_count, result.failed_count, result.skipped_locked) == (
        2 - expected_failed,
        expected_failed,
        1,
    )
    (skipped,) = [entry for entry in logs if entry["event"] == "item skipped: changed concurrently"]
    assert (skipped["PurchaseId"], skipped["Status"]) == (str(cancelled.id), "Cancelled")
    assert str(cancelled.id) not in [entry.get("PurchaseId") for entry in logs if entry["event"] == "item failed"]
    assert _metric("promotion_expire_errors_total") == errors_before + expected_failed
    rows = purchase_rows(pool)
    assert (rows[cancelled.id]["status"], rows[cancelled.id]["version"]) == ("Cancelled", 2)
    assert str(cancelled.id) not in [e["message_key"] for e in purchase_events(pool, "Expired")]
    with pool.connection() as conn:
        poisoned = conn.execute("SELECT item_id FROM jobs.item_failure").fetchall()
    assert cancelled.id not in [row["item_id"] for row in poisoned]


@pytest.mark.parametrize("plan_cache_mode", plans.PLAN_CACHE_MODES)
def test_the_claim_uses_the_partial_index_in_both_passes(pool: ConnectionPool[Conn], plan_cache_mode: str) -> None:
    """With many rows (20,000 due, 50 of them poison), the first pass walks ix_purchase_active_ends_at in order and
    sorts nothing; the second never scans the table (it walks the index too, or starts from the few poison rows). So
    too in the plan made for any parameters (a generic plan: psycopg prepares a statement after a few runs)."""
    now = db_now(pool)
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO promotion.purchase (id, tenant_id, buyer_user_id, package_id, package_code, package_kind,"
            " boost_weight, price_amount, currency_id, currency_code, currency_symbol, starts_at, ends_at, status,"
            " version, created_at, updated_at)"
            " SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), %(package)s, 'TOP-1D', 'Top', 50, 990,"
            " %(rub)s, 'RUB', 'R', %(now)s - interval '2 days', %(now)s + (i - 20000) * interval '1 second', 'Active',"
            " 1, %(now)s, %(now)s FROM generate_series(1, 40000) AS i",
            {"package": TOP_1D, "rub": RUB, "now": now},
        )
        conn.execute(
            "INSERT INTO jobs.item_failure (job, item_id, last_error)"
            " SELECT %s, id, 'x' FROM promotion.purchase WHERE ends_at < %s ORDER BY ends_at LIMIT 50",
            (JOB_NAME, now),
        )
        conn.execute("ANALYZE promotion.purchase")
        conn.execute("ANALYZE jobs.item_failure")
        params = {"job": JOB_NAME, "as_of": now, "batch_size": 200, "skipped_cap": bookkeeping.BACKLOG_CAP}
        for poison in (False, True):
            plan = plans.explain(conn, expiry.CLAIM_SQL, {**params, "poison": poison}, plan_cache_mode)
            claimed = plans.cte(plan, "claimed")
            assert "purchase" not in plans.seq_scanned(claimed), (poison, claimed)
            if not poison:
                assert "ix_purchase_active_ends_at" in plans.index_names(claimed), claimed
                assert "Sort" not in plans.node_types(claimed), claimed


def test_AC6_a_purchase_the_domain_guard_rejects_is_excluded_and_the_rest_commits(pool: ConnectionPool[Conn]) -> None:
    purchases = seed_purchases(pool, 4, ends_at=db_now(pool) - timedelta(minutes=1))
    broken = purchases[2]
    execute(pool, "DELETE FROM promotion.purchase_target WHERE purchase_id = %s", [broken.id])  # an impossible state

    result = _job(pool).run_once()

    assert (result.expired_count, result.failed_count) == (3, 1)
    rows = purchase_rows(pool)
    assert rows[broken.id]["status"] == "Active"
    assert {e["message_key"] for e in purchase_events(pool, "Expired")} == {str(p.id) for p in purchases} - {
        str(broken.id)
    }


def test_AC6_when_the_set_based_write_fails_each_purchase_is_written_alone_and_only_the_poison_one_is_left(
    pool: ConnectionPool[Conn],
) -> None:
    # one EndsAt: the claim's order is then the ids' order
    purchases = sorted(seed_purchases(pool, 5, ends_at=db_now(pool) - timedelta(minutes=1)), key=lambda p: p.id)
    poison = purchases[3]
    fail_updates_of(pool, poison.id)  # the database refuses its row: the one statement for the batch fails

    with capture_logs() as logs:
        result = _job(pool).run_once()

    assert (result.expired_count, result.failed_count, result.claimed_count) == (4, 1, 5)
    events = [entry["event"] for entry in logs]
    assert "batch write failed, writing item by item" in events  # the fallback ran ...
    (failed,) = [entry for entry in logs if entry["event"] == "item failed"]  # ... and isolated the poison one
    assert failed["PurchaseId"] == str(poison.id)
    assert failed["log_level"] == "error"
    expired_logs = [entry["PurchaseId"] for entry in logs if entry["event"] == "promotion expired"]
    assert expired_logs == [str(p.id) for p in purchases if p != poison]
    rows = purchase_rows(pool)
    assert (rows[poison.id]["status"], rows[poison.id]["version"]) == ("Active", 1)
    assert {rows[p.id]["status"] for p in purchases if p != poison} == {"Expired"}
    # the rest committed with exactly one outbox row each (none for the poison one), in the batch's order
    expired = purchase_events(pool, "Expired")
    assert [e["message_key"] for e in expired] == [str(p.id) for p in purchases if p != poison]
    assert {e["payload"]["Version"] for e in expired} == {2}
    assert len({e["payload"]["MessageId"] for e in expired}) == 4
    assert len({e["headers"]["correlation-id"] for e in expired}) == 1
    with pool.connection() as conn:
        failure = conn.execute("SELECT item_id, last_error FROM jobs.item_failure").fetchone()
    assert failure is not None
    assert failure["item_id"] == poison.id
    assert "injected poison" in failure["last_error"]


def test_a_purchase_the_set_based_guard_does_not_match_is_left_alone_without_an_event(
    pool: ConnectionPool[Conn], monkeypatch: pytest.MonkeyPatch
) -> None:
    purchases = sorted(seed_purchases(pool, 3, ends_at=db_now(pool) - timedelta(minutes=1)), key=lambda p: p.id)
    stale = purchases[1]
    claim_due = expiry.purchase_claim_due

    def claim_with_a_stale_read(conn: Conn, **kwargs: Any) -> expiry.Claim:
        claim = claim_due(conn, **kwargs)
        for purchase in claim.purchases:
            if purchase.id == stale.id:
                purchase.version = 7  # as if read before a change the database already has
        return claim

    monkeypatch.setattr(expiry, "purchase_claim_due", claim_with_a_stale_read)

    with capture_logs() as logs:
        result = _job(pool).run_once()

    assert (result.expired_count, result.failed_count) == (2, 1)
    assert "batch write failed, writing item by item" not in [entry["event"] for entry in logs]  # no fallback
    (failed,) = [entry for entry in logs if entry["event"] == "item failed"]
    assert failed["PurchaseId"] == str(stale.id)
    assert "VersionConflictError" in failed["exception"]
    rows = purchase_rows(pool)
    assert (rows[stale.id]["status"], rows[stale.id]["version"]) == ("Active", 1)  # never overwritten
    assert [e["message_key"] for e in purchase_events(pool, "Expired")] == [str(purchases[0].id), str(purchases[2].id)]


def test_the_set_based_write_gives_each_expired_purchase_one_event_in_claim_order(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    purchases = [seed_purchases(pool, ends_at=now - timedelta(minutes=10 - k))[0] for k in range(5)]

    with capture_logs() as logs:
        result = _job(pool).run_once()

    assert result.expired_count == 5
    assert "batch write failed, writing item by item" not in [entry["event"] for entry in logs]
    expired = purchase_events(pool, "Expired")
    assert [e["message_key"] for e in expired] == [str(p.id) for p in purchases]  # oldest first
    assert [e["payload"]["PurchaseId"] for e in expired] == [str(p.id) for p in purchases]
    assert {e["payload"]["Version"] for e in expired} == {2}


@pytest.mark.parametrize(
    ("provider", "exported"),
    [
        (trace.ProxyTracerProvider(), False),  # tracing never configured: every span is a no-op
        (trace.NoOpTracerProvider(), False),
        (TracerProvider(), False),  # the SDK without an exporter: spans are recorded, then dropped
        (_with_processor(TracerProvider()), True),
    ],
)
def test_item_spans_are_started_only_when_spans_are_exported(
    monkeypatch: pytest.MonkeyPatch, provider: trace.TracerProvider, exported: bool
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    assert spans_exported() is exported


def test_the_poison_record_of_a_purchase_cancelled_meanwhile_is_pruned(pool: ConnectionPool[Conn]) -> None:
    (broken,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(minutes=1))
    execute(pool, "DELETE FROM promotion.purchase_target WHERE purchase_id = %s", [broken.id])
    assert _job(pool).run_once().failed_count == 1
    _cancel(pool, broken, "x")

    _job(pool).run_once()

    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}


def test_AC7_a_failure_at_commit_rolls_back_the_whole_batch_and_the_next_cycle_redoes_it(
    pool: ConnectionPool[Conn],
) -> None:
    purchases = seed_purchases(pool, 5, ends_at=db_now(pool) - timedelta(seconds=30))
    die_once_at_commit(pool)  # pg_terminate_backend of the worker's own session, exactly at COMMIT
    job = _job(pool)

    with pytest.raises(psycopg.OperationalError):
        job.run_once()

    rows = purchase_rows(pool)
    assert {rows[p.id]["status"] for p in purchases} == {"Active"}
    assert purchase_events(pool, "Expired") == []
    with pool.connection() as conn:  # the locks went with the backend
        locked = conn.execute(
            "SELECT id FROM promotion.purchase WHERE id = ANY(%s) FOR NO KEY UPDATE NOWAIT",
            ([p.id for p in purchases],),
        ).fetchall()
        assert len(locked) == 5
        conn.rollback()
        last = conn.execute("SELECT succeeded FROM jobs.cycle WHERE job = %s", (JOB_NAME,)).fetchone()
    assert last == {"succeeded": False}

    again = job.run_once()

    assert again.expired_count == 5
    events = purchase_events(pool, "Expired")
    assert sorted(e["message_key"] for e in events) == sorted(str(p.id) for p in purchases)  # one each
    assert {e["payload"]["Version"] for e in events} == {2}


def test_backlog_is_taken_oldest_first_by_batches(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    old = seed_purchases(pool, 3, ends_at=now - timedelta(hours=2))
    recent = seed_purchases(pool, 3, ends_at=now - timedelta(minutes=1))
    job = _job(pool, batch_size=3)

    first = job.run_once()
    assert _metric("promotion_expire_backlog") == 3  # counted after the cycle: due and not expired yet
    second = job.run_once()
    third = job.run_once()

    assert (first.expired_count, first.is_full) == (3, True)
    assert (second.expired_count, third.expired_count, third.is_full) == (3, 0, False)
    expired_order = [e["message_key"] for e in purchase_events(pool, "Expired")]
    assert set(expired_order[:3]) == {str(p.id) for p in old}
    assert set(expired_order[3:]) == {str(p.id) for p in recent}


def test_nothing_expires_before_its_ends_at_on_the_injected_clock(pool: ConnectionPool[Conn]) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) + timedelta(minutes=10))
    just_before = _job(pool, clock=lambda conn: purchase.ends_at - timedelta(microseconds=1)).run_once()
    at_deadline = _job(pool, clock=lambda conn: purchase.ends_at).run_once()

    assert (just_before.expired_count, at_deadline.expired_count) == (0, 1)  # EndsAt <= AsOf
    row = purchase_rows(pool)[purchase.id]
    assert row["updated_at"] == purchase.ends_at


@pytest.mark.parametrize(
    ("held", "batch_size", "expected"),
    [
        (slice(0, 2), 3, (3, 2)),  # the two oldest are held: passed over before the batch filled up
        (slice(4, 6), 3, (3, 0)),  # the two newest are held: the full batch never reached them
        (slice(4, 6), 10, (4, 2)),  # not full: every due row it could not take was skipped
    ],
)
def test_skipped_locked_counts_the_due_rows_the_claim_passed_over(
    pool: ConnectionPool[Conn], database_url: str, held: slice, batch_size: int, expected: tuple[int, int]
) -> None:
    purchases = seed_purchases(pool, 6, ends_at=db_now(pool) - timedelta(minutes=1))
    ordered = sorted(purchases, key=lambda p: (p.ends_at, p.id))
    with connect(database_url) as other:  # another instance's batch holds some of them
        held_ids = [p.id for p in ordered[held]]
        other.execute("SELECT id FROM promotion.purchase WHERE id = ANY(%s) FOR NO KEY UPDATE", (held_ids,))
        result = _job(pool, batch_size=batch_size).run_once()
        other.rollback()

    assert (result.expired_count, result.skipped_locked) == expected
    assert _job(pool).run_once().expired_count == 6 - expected[0]


def test_seconds_until_next_due_follows_the_earliest_active_ends_at(pool: ConnectionPool[Conn]) -> None:
    job = _job(pool)
    assert job.seconds_until_next_due() is None
    seed_purchases(pool, ends_at=db_now(pool) + timedelta(seconds=30))
    seed_purchases(pool, ends_at=db_now(pool) + timedelta(seconds=10))

    until = job.seconds_until_next_due()

    assert until is not None
    assert 8 < until <= 10


def test_prices_keep_two_decimals(pool: ConnectionPool[Conn]) -> None:
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(seconds=1))
    assert purchase.price.amount == Decimal("990.00")
    _job(pool).run_once()
    assert purchase_events(pool, "Expired")[0]["payload"]["Price"]["Amount"] == "990.00"


def _wait_for_sleeping_backend(database_url: str, timeout: float = 10.0) -> None:
    """Until some session of this database sleeps inside a test trigger (holding its row lock)."""
    deadline = time.monotonic() + timeout
    with connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event = 'PgSleep'"
            ).fetchone()
            if row and row["n"]:
                return
            time.sleep(0.02)
    raise AssertionError("no session started sleeping in the trigger")


def test_the_cycle_started_line_carries_the_run_id_and_as_of(pool: ConnectionPool[Conn]) -> None:
    """Seed 002's logs: "cycle started/completed"; started names the run (the events' correlation id) and AsOf."""
    seed_purchases(pool, 1, ends_at=db_now(pool) - timedelta(minutes=1))
    readings = []

    def clock(conn: Conn) -> Any:
        readings.append(db_now(pool) + timedelta(seconds=3))
        return readings[-1]

    with capture_logs() as logs:
        _job(pool, clock=clock).run_once()

    started, completed = logs[0], logs[-1]
    assert (started["event"], started["log_level"], completed["event"]) == ("cycle started", "info", "cycle completed")
    assert started["AsOf"] == readings[0].isoformat()
    assert len(readings) == 1  # AsOf is read once per cycle
    (expired,) = purchase_events(pool, "Expired")
    assert started["RunId"] == completed["RunId"] == expired["headers"]["correlation-id"]
