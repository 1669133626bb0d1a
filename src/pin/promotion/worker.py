"""The worker expire-promotions (seed 002, UC-PRM-003): due Active purchases become Expired, one batch per transaction.

How it claims, writes a batch in one statement and isolates a poison purchase: docs/design/claims.md,
docs/design/one-statement-writes.md, docs/design/poison-items.md.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg_pool import ConnectionPool

from pin import faults
from pin.cancellation import Cause
from pin.db import Conn, database_now
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


DEFINITION = JobDefinition(
    JOB_NAME,
    metrics.JOB_METRICS,
    repository.BACKLOG_SQL,
    repository.NEXT_DEADLINE_SQL,
    repository.STILL_ACTIVE_SQL,
    item_field="PurchaseId",
    item_attribute="pin.purchase_id",
    error_field="exception",
    traceback_on_cycle_failure=False,  # the runner logs it once
)


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

    def run_once(self) -> ExpireResult:
        """One cycle; an infrastructure failure is logged, counted and raised (the batch rolled back)."""
        return self._cycles.run(tracer(), self._expire_batch)

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest EndsAt of an Active purchase that is not poison, on the database clock."""
        return self._cycles.seconds_until_next_due()

    def _expire_batch(self, cycle: Cycle) -> ExpireResult:
        """One batch in one transaction. A stop request or the end of the cycle's budget cancels the statement in
        flight: the batch rolls back whole (the watch ends before the unit of work rolls back), nothing of it is
        kept, and the harness ends the cycle."""
        context = MessageContext(str(cycle.run_id))  # the job run id is the correlation id of every event it writes
        cycle.kept = lambda: cycle.counts(ExpireResult, expired_count=0)
        cycle.in_flight = {"RolledBack": "the batch", "Count": 0}
        with (
            UnitOfWork(self._pool, context, outbox=self._outbox, traceparent_provider=current_traceparent) as uow,
            cycle.watch(uow.conn),
        ):
            self._limit_transaction(uow.conn, cycle)
            cycle.begin(self._clock(uow.conn))
            as_of = cycle.as_of
            assert as_of is not None
            claimed: list[PromotionPurchase] = []

            def claim(poison: bool, room: int) -> bool:
                found = repository.purchase_claim_due(
                    uow.conn, job=JOB_NAME, as_of=as_of, batch_size=room, poison=poison
                )
                claimed.extend(found.purchases)
                cycle.in_flight["Count"] = len(claimed)
                cycle.claimed(len(found.purchases), poison=poison)
                cycle.skip(unnamed=found.skipped_locked)
                return False  # one statement per pass: it took every free due row it had room for

            cycle.two_passes(claim)  # the poison ones wait when the budget is spent first
            cycle.selected(len(claimed), SkippedLocked=cycle.skipped_unnamed, PoisonCount=cycle.retried_count)
            deferred: list[PromotionPurchase] = []  # claimed, not written: the budget ran out first
            expired = self._expire_all(uow, claimed, cycle=cycle, deferred=deferred)
            bookkeeping.item_failure_clear(uow.conn, JOB_NAME, (p.id for p in expired))
            uow.commit()  # one change per batch: every transition and its outbox row, or nothing
        cycle.budget_exhausted = cycle.budget_exhausted or bool(deferred)
        result = cycle.counts(ExpireResult, expired_count=len(expired))
        for purchase in expired:  # seed 002's log table: "promotion expired (PurchaseId, TenantId, PackageKind)"
            cycle.info(
                "promotion expired", PurchaseId=str(purchase.id), TenantId=str(purchase.tenant_id),
                PackageKind=purchase.package_kind,
            )  # fmt: skip
        metrics.ITEMS.labels(outcome="expired").inc(result.expired_count)
        return result

    def _limit_transaction(self, conn: Conn, cycle: Cycle) -> None:
        """The batch transaction's limits: idle at most the transaction timeout, and no statement longer than
        that or the cycle's budget left, whichever is shorter (the server's bound; the cycle's watch cancels the
        statement in flight when the budget is spent)."""
        timeout = self._config.transaction_timeout_seconds
        conn.execute(repository.BATCH_TRANSACTION_LIMIT, (f"{timeout}s",))
        budget_ms = cycle.budget_left_ms()
        bookkeeping.statement_timeout_cap(conn, min(budget_ms, timeout * 1000 or budget_ms), local=True)

    def _expire_all(
        self,
        uow: UnitOfWork,
        purchases: list[PromotionPurchase],
        *,
        cycle: Cycle,
        deferred: list[PromotionPurchase],
    ) -> list[PromotionPurchase]:
        """Expire the claimed purchases; returns those expired, in claim order. Poison ones are excluded (A2);
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
        return [t.purchase for t in self._write_all(uow, decided, cycle, deferred)]

    def _decide(self, uow: UnitOfWork, purchase: PromotionPurchase, *, cycle: Cycle) -> _Transition | None:
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
        cycle: Cycle,
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

    def _write_one(self, uow: UnitOfWork, transition: _Transition, cycle: Cycle) -> bool:
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

    def _conflicted(self, uow: UnitOfWork, purchase: PromotionPurchase, exc: Exception, cycle: Cycle) -> None:
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
