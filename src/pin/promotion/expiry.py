"""The worker expire-promotions (seed 002, UC-PRM-003): due Active purchases become Expired, one batch per transaction.

Its statements are in ``expiry.sql``: the claim of each pass, the batch write, the backlog, the next deadline. How
it claims, writes a batch in one statement and isolates a poison purchase: docs/design/claims.md,
docs/design/one-statement-writes.md, docs/design/poison-items.md.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, LiteralString

from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from pin import faults
from pin.cancellation import Cause
from pin.db import Conn, database_now, limits, load_queries
from pin.jobs import bookkeeping
from pin.jobs.cycle import Cycle, CycleCounts, CycleHarness, JobDefinition
from pin.observability.tracing import current_traceparent, tracer
from pin.outbox.writer import RELAY_POLICY, MessageContext, OutboxPolicy
from pin.promotion import metrics, repository
from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.promotion.domain import PromotionPurchase, PurchaseStatus, VersionConflictError
from pin.settings import CYCLE_BUDGET_MAX_SECONDS, JOB_BATCH_SIZE
from pin.unit_of_work import UnitOfWork

JOB_NAME = "expire-promotions"

# ------------------------------------------------------------------------------------ the job and its limits


@dataclass(frozen=True)
class ExpirePromotionsConfig:
    """Settings of one worker instance."""

    # Purchases claimed per cycle (seed 002 BatchSize); a full batch makes the runner loop at once.
    batch_size: int = JOB_BATCH_SIZE
    # The server ends a batch transaction stuck this long (a hung process), releasing its row locks for the
    # other instances (long transactions are the first failure mode: docs/design/claims.md); 0 disables.
    transaction_timeout_seconds: int = 60
    # Seed 002 "Max duration" (< 30 s per cycle): past this the cycle writes nothing more, commits what it wrote,
    # and the rest waits for the next tick; no statement runs longer either (docs/design/claims.md).
    cycle_budget_seconds: float = CYCLE_BUDGET_MAX_SECONDS
    # This instance's name in jobs.cycle.
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


@dataclass(frozen=True, kw_only=True)
class ExpireResult(CycleCounts):
    """The counters of one cycle (seed 002, step 6): ExpiredCount, SkippedLocked, DurationMs, and the shared ones."""

    expired_count: int = 0

    def as_dict(self) -> Mapping[str, int]:
        """The result as seed 002 names it."""
        return {
            "ExpiredCount": self.expired_count,
            "SkippedLocked": self.skipped_locked,
            "DurationMs": self.duration_ms,
        }


# ---------------------------------------------------------------------------------------- its statements

_QUERIES = load_queries(__package__, "expiry.sql")

# The claim of either pass (poison: False, the first), locked in a materialized CTE (the planner cannot run it twice
# or lock more than the limit); the lock is held until the batch commits. A cycle claims in two passes, in its one
# transaction: the purchases that are not poison first, then the poison ones with the room left in the batch, so
# that a poison purchase is tried on every cycle (seed 002, A2: "Poison — на следующий цикл") but never holds up
# the head of the queue. The first walks ix_purchase_active_ends_at in order, the failure check a primary-key probe
# per row (the pass is a parameter: each execution is planned on it), the second the same way. Neither sorts the
# backlog.
#
# SkippedLocked is counted in the same statement, so on the same snapshot: the due rows (same predicate) that
# sort before the last claimed row (or all due rows when the batch was not full) and were not claimed. Those
# are exactly the rows SKIP LOCKED passed over: locked by another instance or by an in-flight cancel. (A row
# that another instance expired and committed between our snapshot and our lock attempt also counts: it too
# was "taken by someone else".) The scan is bounded by the last claimed EndsAt and by the backlog cap.
CLAIM_SQL: LiteralString = repository.with_purchase_shape(_QUERIES["purchase_claim_due"])
# The backlog (seed 002: Active with EndsAt < now, poison purchases included), bounded by the caller. The poison
# ones are also counted on their own (promotion_expire_poison_items).
BACKLOG_SQL: LiteralString = _QUERIES["purchases_due"]
# The next deadline: a poison purchase waits for the next tick of the interval, it never wakes the worker early.
NEXT_DEADLINE_SQL: LiteralString = _QUERIES["purchase_next_deadline"]
# While a poison purchase still waits its turn: its failure row is worth keeping.
STILL_ACTIVE_SQL: LiteralString = _QUERIES["purchase_still_active"]
# Due, a predicate on promotion.purchase AS p (binds %(as_of)s): pin status's.
PURCHASE_IS_DUE: LiteralString = _QUERIES["purchase_is_due"]


@dataclass(frozen=True)
class Claim:
    """What one claim locked: due purchases oldest first, and how many due rows were skipped as locked."""

    purchases: list[PromotionPurchase]
    skipped_locked: int


def purchase_claim_due(conn: Conn, *, job: str, as_of: datetime, batch_size: int, poison: bool = False) -> Claim:
    """Lock up to ``batch_size`` due Active purchases with their targets, skipping rows locked elsewhere.

    ``poison`` chooses the pass: False claims the purchases without a failure record of ``job``, True the poison
    ones.
    """
    if batch_size <= 0:
        return Claim([], 0)
    params = {
        "job": job, "as_of": as_of, "batch_size": batch_size, "poison": poison, "skipped_cap": bookkeeping.BACKLOG_CAP,
    }  # fmt: skip
    # Tuples in binary: no dict per row, and uuids and times load from their binary form (cheaper than parsing text).
    with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        rows = cur.execute(CLAIM_SQL, params).fetchall()
    skipped = rows[0][0] if rows else 0
    assert isinstance(skipped, int)
    return Claim([repository.purchase_from_values(row[1:]) for row in rows if row[1] is not None], skipped)


DEFINITION = JobDefinition(
    JOB_NAME,
    metrics.JOB_METRICS,
    ExpireResult,
    BACKLOG_SQL,
    NEXT_DEADLINE_SQL,
    STILL_ACTIVE_SQL,
    item_field="PurchaseId",
    item_attribute="pin.purchase_id",
    error_field="exception",
    traceback_on_cycle_failure=False,  # the runner logs it once
)


# ---------------------------------------------------------------------------------------------- the cycle


class ExpirePromotionsJob:
    """One instance of expire-promotions; ``run_once()`` is one cycle, the JobRunner loops it."""

    name = JOB_NAME

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        config: ExpirePromotionsConfig | None = None,
        *,
        clock: Callable[[Conn], datetime] = database_now,
        stop: threading.Event | None = None,
        outbox: OutboxPolicy = RELAY_POLICY,
    ) -> None:
        self._pool = pool
        self._config = config or ExpirePromotionsConfig()
        self._outbox = outbox  # the process's outbox policy (the composition root's), for every batch's rows
        self._clock = clock  # AsOf; the database clock every instance shares (SPEC section 4)
        # set by SIGTERM: the statement in flight is cancelled and the batch rolled back whole
        self._cycles = CycleHarness(
            DEFINITION, pool, instance=self._config.instance, budget_seconds=self._config.cycle_budget_seconds,
            batch_size=self._config.batch_size, stop=stop,
        )  # fmt: skip

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest EndsAt of an Active purchase that is not poison, on the database clock."""
        return self._cycles.seconds_until_next_due()

    def run_once(self) -> ExpireResult:
        """One cycle: one batch in one transaction, the fresh purchases claimed first, then the poison ones with the
        room left, each pass one statement. An infrastructure failure is logged, counted and raised (the batch
        rolled back). A stop request or the end of the cycle's budget cancels the statement in flight: the batch
        rolls back whole (the watch ends before the unit of work rolls back), nothing of it is kept, and the cycle
        ends."""
        with self._cycles.cycle(tracer()) as cycle:
            context = MessageContext(str(cycle.run_id))  # the job run id is the correlation id of every event it writes
            cycle.in_flight = {"RolledBack": "the batch", "Count": 0}
            with (
                UnitOfWork(self._pool, context, outbox=self._outbox, traceparent_provider=current_traceparent) as uow,
                cycle.watch(uow.conn),
                self._limits(uow.conn, cycle),
            ):
                cycle.begin(self._clock(uow.conn))
                assert cycle.as_of is not None
                claimed: list[PromotionPurchase] = []
                for poison in cycle.passes():  # the poison ones wait when the budget is spent first
                    if cycle.has_room():
                        claim = purchase_claim_due(
                            uow.conn, job=JOB_NAME, as_of=cycle.as_of, batch_size=cycle.room(), poison=poison
                        )
                        claimed.extend(claim.purchases)
                        cycle.in_flight["Count"] = len(claimed)
                        cycle.claimed(len(claim.purchases), poison=poison)
                        cycle.skip(unnamed=claim.skipped_locked)
                cycle.selected(len(claimed), SkippedLocked=cycle.skipped_unnamed, PoisonCount=cycle.retried_count)
                deferred: list[PromotionPurchase] = []  # claimed, not written: the budget ran out first
                expired = self._expire_all(uow, claimed, cycle=cycle, deferred=deferred)
                bookkeeping.item_failure_clear(uow.conn, JOB_NAME, (t.purchase.id for t in expired))
                uow.commit()  # one change per batch: every transition and its outbox row, or nothing
            cycle.budget_exhausted = cycle.budget_exhausted or bool(deferred)
            cycle.add(expired_count=len(expired))
            # seed 002's log table: "promotion expired (PurchaseId, TenantId, PackageKind)", one line a purchase, its
            # ids the texts its event's payload already holds
            cycle.info_each("promotion expired", [_expired_fields(t) for t in expired])
            metrics.ITEMS.labels(outcome="expired").inc(len(expired))
        return cycle.result()

    def _limits(self, conn: Conn, cycle: Cycle[ExpireResult]) -> AbstractContextManager[None]:
        """The batch transaction's limits: idle at most the transaction timeout, and no statement longer than
        that or the cycle's budget left, whichever is shorter (the server's bound; the cycle's watch cancels the
        statement in flight when the budget is spent)."""
        timeout = self._config.transaction_timeout_seconds  # 0: none
        budget = cycle.budget_left_ms() / 1000
        return limits(conn, idle_in_transaction=timeout, statement_timeout=min(budget, timeout or budget))

    def _expire_all(
        self,
        uow: UnitOfWork,
        purchases: list[PromotionPurchase],
        *,
        cycle: Cycle[ExpireResult],
        deferred: list[PromotionPurchase],
    ) -> list[_Transition]:
        """Expire the claimed purchases; returns the transitions written, in claim order. Poison ones are excluded (A2);
        those a conflicting write found no longer Active are skipped (A1: taken by someone else), those the budget left
        no time to write to ``deferred``.

        The domain decides every transition and builds its event first (a purchase it refuses is a poison
        item). The decided transitions and their outbox rows are then written by one guarded set-based statement
        inside a savepoint. Only if that statement fails for a reason about the items (a row the database refuses:
        pin.faults) is the savepoint rolled back and each purchase written in a savepoint of its own, which isolates
        the poison one; a contended or infrastructure failure rolls the whole batch back instead (seed 002, A4).
        The events of those written are recorded in the unit of work, whose commit writes them. Either way all of
        it commits with the batch.
        """
        decided: list[_Transition] = []
        for purchase in purchases:
            transition = self._decide(uow, purchase, cycle=cycle)
            if transition is not None:
                decided.append(transition)
        return self._write_all(uow, decided, cycle, deferred)

    def _decide(
        self, uow: UnitOfWork, purchase: PromotionPurchase, *, cycle: Cycle[ExpireResult]
    ) -> _Transition | None:
        """The domain's transition of one purchase and its events' payloads; None (recorded as poison) when it
        fails."""
        with cycle.item_span(purchase.id, purchase.tenant_id) as span:
            try:
                expected_version = purchase.version
                assert cycle.as_of is not None
                purchase.expire(cycle.as_of)
                # built here, so that a purchase whose event cannot be built is a poison item too (the payload
                # straight from the aggregate, without building and dumping the model: 200 per cycle)
                events = [(_CONTRACT.payload_of(e.purchase), e.occurred_at) for e in purchase.events]
            except Exception as exc:  # noqa: BLE001 - any failure of one purchase's domain work makes it poison (A2)
                cycle.item_failed(uow.conn, purchase.id, exc, span=span)
                return None
        return _Transition(purchase, expected_version, events)

    def _write_all(
        self,
        uow: UnitOfWork,
        decided: list[_Transition],
        cycle: Cycle[ExpireResult],
        deferred: list[PromotionPurchase],
    ) -> list[_Transition]:
        """Write the decided transitions and their outbox rows: one set-based statement, or one purchase at a time
        if it fails (until the cycle's budget is spent: the rest are ``deferred`` to the next cycle)."""
        if not decided:
            return []
        for transition in decided:
            _record(uow, transition)
        try:
            with uow.conn.transaction():  # SAVEPOINT: the outer batch transaction is already open
                # the statement inserts the recorded events' rows of the purchases it changed
                changed = repository.purchase_expire_many(
                    uow.conn, [(t.purchase, t.expected_version) for t in decided], uow.take_outbox_rows()
                )
        except Exception as exc:
            if faults.fault_of(exc, uow.conn).transient:
                # the server's state or a race, not an item's data: the whole batch rolled back, retried next cycle (A4)
                raise
            cycle.warning(
                "batch write failed, writing item by item", Count=len(decided),
                exception=bookkeeping.describe_error(exc),
            )  # fmt: skip
            written = []
            for index, transition in enumerate(decided):
                if cycle.budget_spent():
                    cycle.stand_down()  # what was written commits: no cancel may reach the commit
                    deferred.extend(t.purchase for t in decided[index:])
                    break
                try:
                    if self._write_one(uow, transition, cycle):
                        written.append(transition)
                except Exception as exc:
                    if cycle.cancelled(exc) is not Cause.BUDGET:
                        raise
                    # the budget's cancel reached this purchase's write: its savepoint rolled back, the rest waits
                    cycle.stand_down()
                    deferred.extend(t.purchase for t in decided[index:])
                    break
            return written
        written = []
        for transition in decided:
            if transition.purchase.id in changed:
                written.append(transition)
            else:  # the guard did not match: the purchase changed since the claim read it
                self._conflicted(uow, transition.purchase, VersionConflictError(), cycle)
        return written

    def _write_one(self, uow: UnitOfWork, transition: _Transition, cycle: Cycle[ExpireResult]) -> bool:
        """The fallback: one purchase's guarded UPDATE and its events in its own savepoint; a poison one is rolled back
        alone. The events become outbox rows at the batch's commit."""
        try:
            with uow.conn.transaction():
                repository.purchase_update_status(
                    uow.conn, transition.purchase, expected_version=transition.expected_version
                )
                _record(uow, transition)
        except VersionConflictError as exc:
            self._conflicted(uow, transition.purchase, exc, cycle)
            return False
        except Exception as exc:
            if faults.fault_of(exc, uow.conn).transient:
                raise  # as for the batch write: the whole batch rolled back (A4)
            cycle.item_failed(uow.conn, transition.purchase.id, exc)
            return False
        return True

    def _conflicted(
        self, uow: UnitOfWork, purchase: PromotionPurchase, exc: Exception, cycle: Cycle[ExpireResult]
    ) -> None:
        """A version conflict on write (seed 002, A1): read the purchase again; no longer Active, leave it alone.

        Only a purchase that is still Active (at another version than the claim read: a state this worker cannot
        explain, since it held the row lock) is poison.
        """
        current = repository.purchase_get(uow.conn, purchase.id, purchase.tenant_id)
        if current is not None and current.status is PurchaseStatus.ACTIVE:
            cycle.item_failed(uow.conn, purchase.id, exc)
            return
        # changed under us (its write conflicted): taken by someone else, like a locked one
        cycle.item_skipped(purchase.id, Status=None if current is None else current.status.value)


_CONTRACT = PromotionPurchaseChangedKafkaEvent


def _expired_fields(transition: _Transition) -> dict[str, object]:
    """The fields of a written transition's "promotion expired" line, from its (last) event's payload."""
    payload = transition.events[-1][0]
    return {"PurchaseId": payload["PurchaseId"], "TenantId": payload["TenantId"], "PackageKind": payload["PackageKind"]}


def _record(uow: UnitOfWork, transition: _Transition) -> None:
    """Record a transition's events in the unit of work (keyed by the PurchaseId, as the statement's guard reads)."""
    for payload, occurred_at in transition.events:
        uow.record(_CONTRACT, payload["PurchaseId"], payload, occurred_at)


@dataclass(frozen=True)
class _Transition:
    """A purchase the domain expired (not written yet), the version it was read at, and its events' payloads."""

    purchase: PromotionPurchase
    expected_version: int
    events: list[tuple[dict[str, Any], datetime]]
