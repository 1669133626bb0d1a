"""The worker appointment-timeout (seed 000): due Pending appointments become Expired, one per transaction.

How it claims, why one item per transaction, and what a poison item is: docs/design/claims.md,
docs/design/poison-items.md, docs/design/one-statement-writes.md.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import psycopg
import structlog
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from pin import faults
from pin.calendar import claims, metrics, repository
from pin.calendar.claims import JOB_NAME
from pin.calendar.domain import SlotOutcome
from pin.calendar.service import ExpiryResult, ExpiryStatus, expire_appointment, expire_locked_cluster
from pin.db import Conn, database_now
from pin.faults import Fault
from pin.jobs import bookkeeping
from pin.jobs.cycle import Cycle, JobCycles, JobDefinition
from pin.observability.tracing import current_traceparent, spans_exported, tracer
from pin.outbox.writer import MessageContext
from pin.settings import JOB_BATCH_SIZE
from pin.unit_of_work import UnitOfWork

log = structlog.get_logger(__name__)

# ----------------------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class AppointmentTimeoutConfig:
    """Settings of one worker instance."""

    # Appointments claimed per cycle (seed 000: AppointmentTimeoutOptions.BatchSize); a full batch loops.
    batch_size: int = JOB_BATCH_SIZE
    # The longest an item waits for its slot, event or reminder rows (held by an in-flight operation): then it is
    # rolled back and skipped, so a stuck lock can neither hang the cycle nor delay a graceful stop.
    item_lock_timeout_seconds: float = 3.0
    # The longest the worker's own steps (AsOf, counts, next deadline, bookkeeping) wait for a pooled connection:
    # with the database gone, each fails after this long instead of the pool's 30 s, so a stop request is
    # honoured within a few seconds.
    connection_wait_seconds: float = 2.0
    # Seed 000 "Max duration" (< 30 s per cycle): past this the cycle claims nothing more and the rest waits for
    # the next tick; no statement of the cycle runs longer either (docs/design/claims.md, "The cycle's budget").
    cycle_budget_seconds: float = 30.0
    # This instance's name in jobs.cycle.
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


@dataclass(frozen=True)
class TimeoutResult:
    """The counters of one cycle (seed 000, "Результат")."""

    expired_count: int = 0
    slots_released_count: int = 0
    slots_expired_count: int = 0
    skipped_locked_count: int = 0
    duration_ms: int = 0
    failed_count: int = 0  # poison items rolled back this cycle
    claimed_count: int = 0  # items claimed (expired, failed or found changed)
    batch_size: int = JOB_BATCH_SIZE
    retried_count: int = 0  # of those, poison items claimed by the second pass (tried again)
    budget_exhausted: bool = False  # the cycle stopped claiming: its time budget was spent

    @property
    def skipped_locked(self) -> int:
        """SkippedLockedCount, under the name every job's result has."""
        return self.skipped_locked_count

    @property
    def is_full(self) -> bool:
        """The first pass alone claimed BatchSize items: more due appointments are probably waiting.

        Claims of poison items do not count: a batch they fill must not make the runner loop at once, or a
        handful of poison items would be retried back to back instead of once per cycle. A cycle over its budget is
        not full either: the rest waits for the next tick (seed 000, "Max duration").
        """
        return not self.budget_exhausted and self.claimed_count - self.retried_count >= self.batch_size

    def as_dict(self) -> Mapping[str, int]:
        """The result as seed 000 names it."""
        return {
            "ExpiredCount": self.expired_count,
            "SlotsReleasedCount": self.slots_released_count,
            "SlotsExpiredCount": self.slots_expired_count,
            "SkippedLockedCount": self.skipped_locked_count,
            "DurationMs": self.duration_ms,
        }


@dataclass
class _Tally:
    """What a cycle has done so far (kept when an infrastructure error ends it early)."""

    expired: int = 0
    released: int = 0
    slots_expired: int = 0
    failed: list[uuid.UUID] = field(default_factory=list)  # the items that failed (poison) in this cycle
    attempted: list[uuid.UUID] = field(default_factory=list)
    cursor: tuple[datetime, uuid.UUID] | None = None  # the last claimed row: the next claim starts after it
    skipped: set[uuid.UUID] = field(default_factory=set)
    poison_pass: bool = False  # the second pass: poison items only
    retried: int = 0  # items the second pass claimed
    budget_exhausted: bool = False

    def result(self, duration_ms: int, batch_size: int) -> TimeoutResult:
        return TimeoutResult(
            expired_count=self.expired,
            slots_released_count=self.released,
            slots_expired_count=self.slots_expired,
            skipped_locked_count=len(self.skipped),
            duration_ms=duration_ms,
            failed_count=len(self.failed),
            claimed_count=len(self.attempted),
            batch_size=batch_size,
            retried_count=self.retried,
            budget_exhausted=self.budget_exhausted,
        )


@dataclass(frozen=True)
class _Items:
    """What every item of a cycle shares."""

    cycle: Cycle
    spans: bool  # one span per item (spans leave the process)
    traceparent: str | None  # the cycle span's, for the outbox rows when there is no item span

    @property
    def as_of(self) -> datetime:
        """The cycle's AsOf."""
        assert self.cycle.as_of is not None
        return self.cycle.as_of


class InfrastructureError(Exception):
    """The database could not be reached or the connection broke; the cycle ends and the next one retries."""


DEFINITION = JobDefinition(
    JOB_NAME,
    metrics.JOB_METRICS,
    claims.DUE_SQL,
    claims.NEXT_DEADLINE_SQL,
    claims.STILL_PENDING_SQL,
    item_field="AppointmentId",
    error_field="error",
    traceback_on_cycle_failure=True,
)


class AppointmentTimeoutJob:
    """One instance of appointment-timeout; ``run_once()`` is one cycle, the JobRunner loops it."""

    name = JOB_NAME

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        config: AppointmentTimeoutConfig | None = None,
        *,
        clock: Callable[[Conn], datetime] = database_now,
        stop: threading.Event | None = None,
    ) -> None:
        self._pool = pool
        self._config = config or AppointmentTimeoutConfig()
        self._clock = clock  # AsOf: the database clock every instance shares (docs/design/claims.md)
        self._stop = stop or threading.Event()  # set by SIGTERM: finish the current item, then end the cycle
        self._cycles = JobCycles(
            DEFINITION, pool, instance=self._config.instance,
            connection_wait_seconds=self._config.connection_wait_seconds,
            budget_seconds=self._config.cycle_budget_seconds,
        )  # fmt: skip

    def run_once(self) -> TimeoutResult:
        """One cycle; an infrastructure failure is logged, counted and raised (the current item rolled back)."""
        return self._cycles.run(tracer(), self._cycle)

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest PendingExpiresAt of a Pending appointment that is not poison, DB clock."""
        return self._cycles.seconds_until_next_due()

    def _cycle(self, cycle: Cycle) -> TimeoutResult:
        tally = _Tally()
        batch_size = self._config.batch_size
        cycle.partial = lambda: tally.result(cycle.elapsed_ms(), batch_size)  # items commit one by one
        with self._cycle_connection() as conn:
            cycle.begin(self._clock(conn))
            self._expire_due(conn, cycle, tally)
        return tally.result(cycle.elapsed_ms(), batch_size)

    @contextmanager
    def _cycle_connection(self) -> Iterator[Conn]:
        """One pooled connection for the whole cycle: AsOf, the count, then every item's transaction.

        Its session's lock_timeout is the item lock timeout and its statement_timeout at most the cycle's budget,
        set here once and reset before the connection goes back to the pool (a connection that cannot be reset is
        closed: the pool then discards it).
        """
        timeout_ms = max(1, int(self._config.item_lock_timeout_seconds * 1000))
        with self._cycles.connection() as conn:
            conn.execute(claims.LOCK_TIMEOUT_SET, {"lock_timeout": f"{timeout_ms}ms"})
            budget_ms = int(self._config.cycle_budget_seconds * 1000)
            previous = bookkeeping.statement_timeout_cap(conn, budget_ms, local=False)
            try:
                yield conn
            finally:
                _reset_session(conn, previous)

    def _expire_due(self, conn: Conn, cycle: Cycle, tally: _Tally) -> None:
        """Claim and expire one item per transaction until none is free, BatchSize is reached, or a stop.

        Two passes over the due appointments, oldest first: those that are not poison, then the poison ones with
        the room left (each once per cycle, after everything else: docs/design/poison-items.md).
        """
        assert cycle.as_of is not None
        batch_size = self._config.batch_size
        count = conn.execute(claims.DUE_COUNT_SQL, {"as_of": cycle.as_of, "count_limit": batch_size}).fetchone()
        selected = int(cast(dict[str, Any], count)["n"])  # a bounded scan of the partial index
        conn.commit()  # the session's lock_timeout with it
        cycle.info("batch selected", Count=selected)
        if selected == 0:
            return  # empty batch: a no-op, no claim transaction at all
        # One span per item only when spans leave the process; otherwise the outbox rows carry the cycle span's
        # traceparent (the SDK records it either way), taken once here instead of once per item.
        items = _Items(cycle, spans=spans_exported(tracer()), traceparent=current_traceparent())
        for poison_pass in (False, True):
            tally.poison_pass, tally.cursor = poison_pass, None
            while len(tally.attempted) < batch_size and not self._stop.is_set():
                if cycle.budget_spent():  # claim nothing more: what was finished is committed, the rest waits
                    tally.budget_exhausted = True
                    return
                try:
                    more = self._expire_next(conn, items, tally, lock_cluster=True)
                except _ClusterLockFailedError:
                    # A row of the claimed cluster was held past the lock timeout (or a deadlock): the statement
                    # that claimed and locked failed as a whole. The item again, claim alone and the cluster
                    # locked statement by statement: the appointment is then known, skipped and counted.
                    more = self._expire_next(conn, items, tally, lock_cluster=False)
                if not more:
                    break

    def _expire_next(self, conn: Conn, items: _Items, tally: _Tally, *, lock_cluster: bool) -> bool:
        """One item in one transaction; False when no due appointment was free to claim."""
        failure: Exception | None = None
        expiry: ExpiryResult | None = None
        cycle = items.cycle
        run_id, as_of = cycle.run_id, items.as_of
        context = MessageContext(str(run_id), items.traceparent)
        provider = current_traceparent if items.spans else None  # the item span's, when there is one
        with UnitOfWork(self._pool, context, traceparent_provider=provider, connection=conn) as uow:
            try:
                claim = claims.appointment_claim_next(
                    conn, as_of=as_of, after=tally.cursor, lock_cluster=lock_cluster,
                    poison=tally.poison_pass, failed=tally.failed,
                )  # fmt: skip
            except Exception as exc:
                # A claim is about no item yet: only a contended lock of the cluster is worth a second try
                if lock_cluster and faults.classify(exc, conn) is Fault.CONTENDED:
                    raise _ClusterLockFailedError from exc
                raise _infrastructure_error(conn, exc) from exc
            tally.skipped.update(claim.passed_over)
            if claim.appointment_id is None:
                # End the read-only transaction with COMMIT: psycopg answers a ROLLBACK with DEALLOCATE ALL, and
                # a cycle that ends with an empty claim would re-plan every statement of the next one.
                conn.commit()
                return False
            appointment_id = claim.appointment_id
            tally.attempted.append(appointment_id)
            tally.retried += int(claim.has_failure)
            tally.cursor = claim.cursor
            span_scope: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)
            if items.spans:
                attributes = {
                    "pin.run_id": str(run_id),
                    "pin.appointment_id": str(appointment_id),
                    "pin.tenant_id": str(claim.tenant_id),
                }
                span_scope = tracer().start_as_current_span("appointment-timeout item", attributes=attributes)
            with span_scope as span:
                try:
                    expiry = self._expire_claimed(uow, claim, as_of)
                except Exception as exc:
                    fault = faults.classify(exc, conn)
                    if fault is Fault.INFRASTRUCTURE:
                        raise _infrastructure_error(conn, exc) from exc
                    if fault is Fault.CONTENDED:
                        # Changed or held under us (guarded UPDATE matched nothing, lock timeout, deadlock): rolled
                        # back, never overwritten; the next cycle re-reads it (docs/design/poison-items.md).
                        tally.skipped.add(appointment_id)
                        cycle.warning("item skipped: changed concurrently", AppointmentId=str(appointment_id))
                        return True
                    uow.rollback()  # the whole item, before its failure is recorded in a transaction of its own
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, bookkeeping.describe_error(exc)))
                    failure = exc
        if failure is not None:
            _poisoned(cycle, conn, appointment_id, failure)
            tally.failed.append(appointment_id)
        elif expiry is not None:
            self._expired(cycle, expiry, tally)
        return True

    def _expire_claimed(self, uow: UnitOfWork, claim: claims.ClaimedItem, as_of: datetime) -> ExpiryResult | None:
        """The calendar's expiry use case on the claimed row, then commit; None when there was nothing to do."""
        assert claim.appointment_id is not None
        if claim.row is not None:  # the claim locked the cluster: the cascade's writes and outbox in one statement
            cluster = repository.cluster_from_locked_row(claim.row)
            expiry = expire_locked_cluster(uow, cluster, as_of)
        else:
            expiry = expire_appointment(uow, claim.appointment_id, as_of)
        if expiry.status is not ExpiryStatus.EXPIRED:
            return None  # re-read under the lock: no longer Pending or not due (idempotent by state)
        if claim.has_failure:
            bookkeeping.item_failure_clear(uow.conn, JOB_NAME, [claim.appointment_id])  # a former poison item healed
        with repository.translated_errors():
            uow.commit()  # the transition, the cascade and the two outbox rows, atomically (INV-APT-6)
        return expiry

    def _expired(self, cycle: Cycle, expiry: ExpiryResult, tally: _Tally) -> None:
        assert expiry.cluster is not None
        assert expiry.slot_outcome is not None
        appointment = expiry.cluster.appointment
        outcome = expiry.slot_outcome
        tally.expired += 1
        if outcome is SlotOutcome.RELEASED:
            tally.released += 1
        else:
            tally.slots_expired += 1
        metrics.ITEMS_BY_OUTCOME[outcome].inc()
        cycle.info(
            "appointment expired", AppointmentId=str(appointment.id), SlotId=str(appointment.slot_id),
            CalendarEventId=str(appointment.calendar_event_id), TenantId=str(appointment.tenant_id),
            SlotOutcome=outcome.value,
        )  # fmt: skip


def _poisoned(cycle: Cycle, conn: Conn, appointment_id: uuid.UUID, exc: Exception) -> None:
    """Log, count and record a poison item, in a short transaction of its own after the item's rollback."""
    try:
        cycle.item_failed(conn, appointment_id, exc, commit=True)
    except Exception as record_exc:
        raise InfrastructureError(bookkeeping.describe_error(record_exc)) from record_exc


class _ClusterLockFailedError(Exception):
    """The claim's lock of the cluster timed out or deadlocked (the item's transaction is rolled back)."""


def _reset_session(conn: Conn, statement_timeout: str) -> None:
    """End any open transaction, reset the cycle's lock_timeout and put ``statement_timeout`` back; close the
    connection when that fails."""
    if conn.closed or conn.broken:
        return
    try:
        if conn.info.transaction_status is not TransactionStatus.IDLE:
            conn.rollback()
        conn.execute(claims.LOCK_TIMEOUT_RESET)
        conn.execute(claims.STATEMENT_TIMEOUT_RESTORE, {"statement_timeout": statement_timeout})
        conn.commit()
    except psycopg.Error:
        log.warning("could not reset the cycle's connection; closing it", job=JOB_NAME, exc_info=True)
        conn.close()


def _infrastructure_error(conn: Conn, exc: Exception) -> InfrastructureError:
    """The cycle-ending error for ``exc``: the database's fault, not the item's (pin.faults)."""
    if conn.broken or conn.closed:
        return InfrastructureError("the database connection was lost")
    return InfrastructureError(bookkeeping.describe_error(exc))
