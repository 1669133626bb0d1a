"""The worker expire-promotions (seed 002, UC-PRM-003): Active purchases past EndsAt become Expired.

One cycle = one transaction (seed 002, step 4: the batch's transitions and their events are one change):

1. AsOf is read once from the database clock (injectable in tests); a run id correlates logs, spans and events.
2. Claim: up to BatchSize Active purchases with ``EndsAt <= AsOf``, EndsAt asc, with their targets, locked
   ``FOR NO KEY UPDATE SKIP LOCKED`` (rows of another instance or of an in-flight cancel are skipped, A1/A3).
3. Each purchase expires inside a SAVEPOINT: a poison purchase (a domain guard or a database error) rolls back
   to it, is logged at ERROR, counted and recorded in ``jobs.item_failure`` so that it backs off instead of
   sitting at the head of the order; the rest of the batch goes on (A2).
4. One commit writes every transition and every outbox row. A failure at commit (or anywhere before it)
   rolls the whole batch back and releases the locks; the next cycle takes the same candidates (A4, AC7).

Business idempotency comes from the status predicate (INV-6): an Expired purchase is never claimed again.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog
from psycopg_pool import ConnectionPool

from pin.db import database_now
from pin.jobs import bookkeeping
from pin.observability.tracing import current_traceparent, tracer
from pin.outbox.writer import MessageContext
from pin.promotion import metrics, repository
from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.promotion.domain import PromotionPurchase
from pin.unit_of_work import Conn, UnitOfWork

log = structlog.get_logger(__name__)

JOB_NAME = "expire-promotions"


@dataclass(frozen=True)
class ExpirePromotionsConfig:
    """Settings of one worker instance."""

    # Purchases claimed per cycle (seed 002: 200); a full batch makes the runner loop at once.
    batch_size: int = 200
    # First back-off of a poison purchase, doubling per failure up to an hour; the interval means "next cycle".
    poison_retry_seconds: float = 60.0
    # The server ends a batch transaction stuck this long (a hung process), releasing its row locks for the
    # other instances (research/skiplocked.md: long transactions are the first failure mode); 0 disables.
    transaction_timeout_seconds: int = 60
    # This instance's name in jobs.cycle.
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


@dataclass(frozen=True)
class ExpireResult:
    """The counters of one cycle (seed 002, step 6): ExpiredCount, SkippedLocked, DurationMs."""

    expired_count: int
    skipped_locked: int
    duration_ms: int
    failed_count: int = 0
    claimed_count: int = 0
    batch_size: int = 200

    @property
    def is_full(self) -> bool:
        """The claim hit BatchSize: more due purchases are probably waiting."""
        return self.claimed_count >= self.batch_size

    def as_dict(self) -> Mapping[str, int]:
        """The result as seed 002 names it."""
        return {
            "ExpiredCount": self.expired_count,
            "SkippedLocked": self.skipped_locked,
            "DurationMs": self.duration_ms,
        }


class ExpirePromotionsJob:
    """One instance of expire-promotions; ``run_once()`` is one cycle, the JobRunner loops it."""

    name = JOB_NAME

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        config: ExpirePromotionsConfig | None = None,
        *,
        clock: Callable[[Conn], datetime] = database_now,
    ) -> None:
        self._pool = pool
        self._config = config or ExpirePromotionsConfig()
        self._clock = clock  # AsOf; the database clock every instance shares (SPEC section 4)

    def run_once(self) -> ExpireResult:
        """One cycle; an infrastructure failure is logged, counted and raised (the batch rolled back)."""
        run_id = uuid.uuid4()
        started = time.monotonic()
        with tracer().start_as_current_span("expire-promotions cycle", attributes={"pin.run_id": str(run_id)}):
            try:
                as_of, result, expired = self._expire_batch(run_id, started)
            except Exception as exc:
                metrics.ERRORS.inc()
                duration_ms = _elapsed_ms(started)
                # no traceback here: the runner logs it once
                log.error(
                    "cycle failed", job=JOB_NAME, RunId=str(run_id), DurationMs=duration_ms,
                    exception=bookkeeping.describe_error(exc),
                )  # fmt: skip
                self._after_cycle(run_id, None, {"DurationMs": duration_ms}, succeeded=False)
                raise
        for purchase in expired:
            log.info(
                "promotion expired", job=JOB_NAME, RunId=str(run_id), PurchaseId=str(purchase.id),
                TenantId=str(purchase.tenant_id), PackageKind=purchase.package_kind,
            )  # fmt: skip
        self._observe(result)
        counters = {**result.as_dict(), "FailedCount": result.failed_count}
        log.info("cycle completed", job=JOB_NAME, RunId=str(run_id), **counters)
        self._after_cycle(run_id, as_of, counters, succeeded=True)
        return result

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest EndsAt of an Active purchase (or a poison retry), on the database clock."""
        with self._pool.connection() as conn:
            return bookkeeping.seconds_until(conn, repository.NEXT_DEADLINE_SQL, {"job": JOB_NAME})

    def _expire_batch(
        self, run_id: uuid.UUID, started: float
    ) -> tuple[datetime, ExpireResult, list[PromotionPurchase]]:
        context = MessageContext(str(run_id))  # the job run id is the correlation id of every event it writes
        with UnitOfWork(self._pool, context, traceparent_provider=current_traceparent) as uow:
            self._limit_transaction(uow.conn)
            as_of = self._clock(uow.conn)
            log.info("cycle started", job=JOB_NAME, RunId=str(run_id), AsOf=as_of.isoformat())
            claim = repository.purchase_claim_due(
                uow.conn, job=JOB_NAME, as_of=as_of, batch_size=self._config.batch_size
            )
            log.info(
                "batch selected", job=JOB_NAME, RunId=str(run_id), Count=len(claim.purchases),
                SkippedLocked=claim.skipped_locked,
            )  # fmt: skip
            expired = [p for p in claim.purchases if self._expire_one(uow, p, as_of, run_id)]
            bookkeeping.item_failure_clear(uow.conn, JOB_NAME, (p.id for p in expired))
            uow.commit()  # one change per batch: every transition and its outbox row, or nothing
        result = ExpireResult(
            expired_count=len(expired),
            skipped_locked=claim.skipped_locked,
            duration_ms=_elapsed_ms(started),
            failed_count=len(claim.purchases) - len(expired),
            claimed_count=len(claim.purchases),
            batch_size=self._config.batch_size,
        )
        return as_of, result, expired

    def _limit_transaction(self, conn: Conn) -> None:
        timeout = f"{self._config.transaction_timeout_seconds}s"
        conn.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))
        conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, true)", (timeout,))

    def _expire_one(self, uow: UnitOfWork, purchase: PromotionPurchase, as_of: datetime, run_id: uuid.UUID) -> bool:
        """Expire one purchase inside a savepoint; a poison one is rolled back, logged and recorded (A2)."""
        attributes = {
            "pin.run_id": str(run_id),
            "pin.purchase_id": str(purchase.id),
            "pin.tenant_id": str(purchase.tenant_id),
        }
        with tracer().start_as_current_span("expire-promotions item", attributes=attributes):
            try:
                with uow.conn.transaction():  # SAVEPOINT: the outer batch transaction is already open
                    expected_version = purchase.version
                    purchase.expire(as_of)
                    repository.purchase_update_status(uow.conn, purchase, expected_version=expected_version)
                    # built here, so that a purchase whose event cannot be built is a poison item too
                    events = [
                        (PromotionPurchaseChangedKafkaEvent.of(e.purchase), e.occurred_at) for e in purchase.events
                    ]
            except Exception as exc:
                if uow.conn.broken or uow.conn.closed:
                    raise  # the connection is gone: an infrastructure failure of the whole batch, not a poison item
                self._poisoned(uow, purchase, exc, run_id)
                return False
        for event, occurred_at in events:
            uow.record(event, occurred_at)
        return True

    def _poisoned(self, uow: UnitOfWork, purchase: PromotionPurchase, exc: Exception, run_id: uuid.UUID) -> None:
        metrics.ERRORS.inc()
        attempts = bookkeeping.item_failure_record(
            uow.conn, JOB_NAME, purchase.id, exc, base=timedelta(seconds=self._config.poison_retry_seconds)
        )
        log.error(
            "item failed", job=JOB_NAME, RunId=str(run_id), PurchaseId=str(purchase.id),
            exception=bookkeeping.describe_error(exc), Attempts=attempts, exc_info=exc,
        )  # fmt: skip

    def _observe(self, result: ExpireResult) -> None:
        metrics.RUNS.inc()
        metrics.CYCLE_DURATION.observe(result.duration_ms / 1000)
        metrics.ITEMS.labels(outcome="expired").inc(result.expired_count)
        metrics.SKIP_LOCKED.inc(result.skipped_locked)
        metrics.LAST_SUCCESS.set(time.time())

    def _after_cycle(
        self, run_id: uuid.UUID, as_of: datetime | None, counters: Mapping[str, int], *, succeeded: bool
    ) -> None:
        """Backlog gauge, the jobs.cycle record and pruning of stale poison records (their items were cancelled),
        in a short transaction of its own, so the batch never holds those rows' locks (best effort)."""
        try:
            with self._pool.connection() as conn:
                now = database_now(conn)
                backlog = bookkeeping.backlog_count(conn, repository.BACKLOG_SQL, {"job": JOB_NAME, "as_of": now})
                metrics.BACKLOG.set(backlog)
                bookkeeping.item_failure_prune(conn, JOB_NAME, repository.STILL_ACTIVE_SQL)
                bookkeeping.cycle_record(
                    conn,
                    job=JOB_NAME,
                    instance=self._config.instance,
                    run_id=run_id,
                    as_of=as_of or now,
                    duration_ms=counters.get("DurationMs", 0),
                    counters=counters,
                    succeeded=succeeded,
                )
        except Exception:
            log.warning("cycle bookkeeping failed", job=JOB_NAME, RunId=str(run_id), exc_info=True)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
