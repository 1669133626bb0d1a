"""The worker appointment-timeout (seed 000): Pending appointments past PendingExpiresAt become Expired.

One cycle (``run_once``), driven by :class:`~pin.jobs.runner.JobRunner` (60 s ticks, no overlap, a full batch
loops at once, a wake-up for the next PendingExpiresAt):

1. AsOf is read once from the database clock, the one clock every instance shares (injectable in tests); a run
   id is the correlation id of every outbox row the cycle writes and the ``pin.run_id`` of its span.
2. Items are claimed **one per transaction**, up to BatchSize per cycle: ``Status = Pending AND
   PendingExpiresAt < AsOf`` over ix_appointments_pending_expires_at, oldest first, ``LIMIT 1 FOR NO KEY
   UPDATE SKIP LOCKED`` in a materialized CTE, each claim starting after the row the previous one took (a
   keyset cursor). The claims run in two passes: first the due appointments that are not poison, then, with
   the room left in the batch, the poison ones (each once per cycle, after every other due item: seed 000 "остаётся
   на следующий цикл", without holding up the head of the queue). The row lock taken by the claim is the lock the item
   is processed under: it lives until that item commits or rolls back (docs/design/claims.md,
   "lock-in-tx per item"). Other instances skip the row meanwhile; a confirm, decline or cancel of the agent or
   investor waits for the commit and then finds the appointment Expired. Rows they hold are skipped by the
   worker, never waited for.
3. In the same transaction the calendar's own use case :func:`pin.calendar.service.expire_appointment` locks the
   rest of the cluster (slot, event, reminders, in the calendar's lock order), re-reads it, runs the one
   cascade (``AppointmentCluster.expire``), saves with guarded UPDATEs (a row that changed under us raises a
   conflict and is rolled back, never overwritten) and records the two events; the unit of work writes them
   to the outbox and commits (seed 000: per item, INV-APT-6).
4. A poison item (an unexpected cascade state) is rolled back, logged at ERROR (AppointmentId, exception),
   counted in errors_total and recorded in ``jobs.item_failure``, which puts it in the second pass of every
   later cycle: one failure per cycle while it stays broken, so the seed's errors alert fires. An infrastructure
   error (the database gone) rolls the current item back and ends the cycle; the runner retries.
5. A stop request (SIGTERM) is checked between items: the current item commits or rolls back whole first.

SkippedLockedCount is the number of distinct due appointments this cycle's claims passed over because
another transaction held them: each claim counts, on its own snapshot, the due rows between the cycle's cursor
and the row it locked (all due rows after the cursor, when it locked none) that it did not get. Those rows
were locked by another instance or by an in-flight operation (or were expired by another instance between that
snapshot and the lock attempt: also "taken by someone else"). A cluster whose slot or event stayed locked past
the item's lock timeout is counted there too.
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
from typing import Any, LiteralString, cast

import psycopg
import structlog
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.calendar import metrics, repository
from pin.calendar.domain import ConflictError, DomainError, SlotOutcome
from pin.calendar.service import ExpiryResult, ExpiryStatus, expire_appointment, expire_locked_cluster
from pin.db import database_now
from pin.jobs import bookkeeping
from pin.jobs.cycle import Cycle, JobCycles, JobDefinition
from pin.observability.tracing import current_traceparent, spans_exported, tracer
from pin.outbox.writer import MessageContext
from pin.unit_of_work import Conn, UnitOfWork

log = structlog.get_logger(__name__)

JOB_NAME = "appointment-timeout"

# ---------------------------------------------------------------------------------------------------- SQL

_DUE: LiteralString = """a.status = 'Pending' AND a.pending_expires_at < %(as_of)s"""
# Keyset cursor of the cycle: strictly after the last row this cycle claimed (the first claim starts at the head).
# Each claim so starts where the previous one stopped, instead of walking again over the index entries of the
# rows this cycle just expired (dead until vacuum: docs/design/claims.md); a row passed over
# as locked is not retried in this cycle but by the next one.
_AFTER_CURSOR: LiteralString = """(a.pending_expires_at, a.id) > (
    coalesce(%(after_at)s::timestamptz, '-infinity'),
    coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000'))"""


# The claim of one item (seed 000, "Что читаем"): the oldest due Pending appointment after the cycle's cursor that
# nobody holds, locked FOR NO KEY UPDATE SKIP LOCKED in a materialized CTE
# (the planner cannot run it twice or lock more than the limit; FOR NO KEY UPDATE leaves the foreign-key checks
# of other transactions, FOR KEY SHARE, unblocked). ``passed_over`` is computed on the same snapshot: the due
# rows between the cursor and the claimed row (all after the cursor when none was claimed) that the claim did
# not get, i.e. that SKIP LOCKED passed over.
#
# The claim also locks the rest of the claimed appointment's cluster in the same statement (one round trip for
# claim and locks), in the calendar's lock order (appointment, slot, event, reminders: repository.cluster_lock_ctes)
# and returns every column the cascade needs. Those locks wait (the claim itself never does), at most the
# session's lock_timeout, which the cycle sets on its connection. When one of them times out (or deadlocks), the
# statement fails as a whole: the item is then retried once with the claim alone (lock_cluster=False) and the cluster
# locked statement by statement, which reports the lock timeout for that appointment (skipped, counted).
#
# The first pass of a cycle claims only appointments that are not poison (no jobs.item_failure row), the second
# only poison ones, leaving out those that already failed in this cycle (``failed``). The first walks the partial
# index in PendingExpiresAt order, the failure check a primary-key probe per row; the second may as well start
# from the few jobs.item_failure rows. Neither sorts the backlog (EXPLAIN with 20,000 due rows in the tests).
def _claim_sql(*, lock_cluster: bool, poison: bool) -> str:
    claimed_columns = (
        ", ".join(f"a.{name}" for name in repository.APPOINTMENT_COLUMN_NAMES)
        if lock_cluster
        else "a.id, a.tenant_id, a.pending_expires_at"
    )
    locks = f",{repository.cluster_lock_ctes('claimed')}" if lock_cluster else ""
    columns = repository.CLUSTER_LOCKED_COLUMNS if lock_cluster else "c.id, c.tenant_id, c.pending_expires_at"
    joins = "\n  LEFT JOIN slot_locked AS s ON true\n  LEFT JOIN event_locked AS e ON true" if lock_cluster else ""
    # passed_over: the bound on the first index column keeps it an index range scan, not a scan of the backlog.
    # The text is sent with its whitespace collapsed: psycopg parses a query of more than 4,096 characters again on
    # every execute (MAX_CACHED_STATEMENT_LENGTH), and the claim with its locks is about that long.
    which = (
        f"{bookkeeping.has_failure('a')} AND a.id <> ALL(%(failed)s::uuid[])"
        if poison
        else f"NOT {bookkeeping.has_failure('a')}"
    )
    sql = f"""
WITH claimed AS MATERIALIZED (
    SELECT {claimed_columns}
      FROM calendar.appointment AS a
     WHERE {_DUE} AND {_AFTER_CURSOR} AND {which}
     ORDER BY a.pending_expires_at, a.id
     LIMIT 1
       FOR NO KEY UPDATE OF a SKIP LOCKED
),
passed_over AS MATERIALIZED (
    SELECT a.id
      FROM calendar.appointment AS a
     WHERE {_DUE} AND {_AFTER_CURSOR} AND {which}
       AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = a.id)
       AND a.pending_expires_at <= coalesce((SELECT c.pending_expires_at FROM claimed AS c), %(as_of)s)
       AND (NOT EXISTS (SELECT 1 FROM claimed)
            OR (a.pending_expires_at, a.id) < (SELECT c.pending_expires_at, c.id FROM claimed AS c))
     ORDER BY a.pending_expires_at, a.id
     LIMIT {bookkeeping.BACKLOG_CAP}
){locks}
SELECT {columns},
       (SELECT coalesce(array_agg(p.id), '{{}}'::uuid[]) FROM passed_over AS p) AS passed_over
  FROM (SELECT) AS one
  LEFT JOIN claimed AS c ON true{joins}
"""
    return " ".join(sql.split())


# (lock_cluster, poison) -> the statement
_CLAIMS = {
    (lock, poison): _claim_sql(lock_cluster=lock, poison=poison) for lock in (True, False) for poison in (False, True)
}

# The item lock timeout of the cycle's connection: set once per cycle for the session (every item transaction
# of the cycle runs on that connection), reset before the connection goes back to the pool.
_SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %(lock_timeout)s, false)"
_RESET_LOCK_TIMEOUT = "RESET lock_timeout"

# Due now, over the partial index: the cycle's "batch selected" count (bounded by BatchSize) and the backlog gauge
# (seed 000: every Pending appointment past PendingExpiresAt not processed yet, poison ones included).
DUE_SQL = f"SELECT 1 FROM calendar.appointment AS a WHERE {_DUE}"

# The next moment something falls due: the earliest PendingExpiresAt (one step down the partial index) of an
# appointment that is not poison; a poison one waits for the next tick of the interval, never wakes the worker
# early. Measured against clock_timestamp() by bookkeeping.seconds_until.
NEXT_DEADLINE_SQL = f"""
SELECT a.pending_expires_at AS at FROM calendar.appointment AS a
 WHERE a.status = 'Pending' AND NOT {bookkeeping.has_failure("a")}
 ORDER BY a.pending_expires_at, a.id LIMIT 1
"""

# A poison appointment's failure row is kept while the appointment still waits (is Pending).
STILL_PENDING_SQL = "EXISTS (SELECT 1 FROM calendar.appointment AS a WHERE a.id = f.item_id AND a.status = 'Pending')"


@dataclass(frozen=True)
class ClaimedItem:
    """What one claim returned: the locked appointment (None when nothing was free) and the rows it passed over."""

    appointment_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    pending_expires_at: datetime | None
    has_failure: bool
    passed_over: list[uuid.UUID]
    row: dict[str, Any] | None = None  # with the cluster locked by the claim: every column of it

    @property
    def cursor(self) -> tuple[datetime, uuid.UUID] | None:
        """The claimed row's position in the index: where the cycle's next claim starts."""
        if self.pending_expires_at is None or self.appointment_id is None:
            return None
        return self.pending_expires_at, self.appointment_id


def appointment_claim_next(
    conn: Conn,
    *,
    as_of: datetime,
    after: tuple[datetime, uuid.UUID] | None,
    lock_cluster: bool = True,
    poison: bool = False,
    failed: list[uuid.UUID] | None = None,
) -> ClaimedItem:
    """Lock the next due Pending appointment (after ``after``) that nobody else holds, in the caller's transaction.

    ``poison`` chooses the pass: False claims only appointments without a failure record, True only poison ones
    (except ``failed``, those that failed in this cycle already). With ``lock_cluster`` its slot, event and
    reminders are locked by the same statement (waits bounded by the session's lock_timeout: LockNotAvailable
    when one was held longer) and ``row`` holds the whole cluster.
    """
    after_at, after_id = after or (None, None)
    params: dict[str, object] = {"as_of": as_of, "after_at": after_at, "after_id": after_id, "job": JOB_NAME}
    if poison:
        params["failed"] = failed or []
    row = cast(dict[str, Any], conn.execute(_CLAIMS[lock_cluster, poison], params).fetchone())
    return ClaimedItem(
        row["id"],
        row["tenant_id"],
        row["pending_expires_at"],
        poison,
        list(row["passed_over"]),
        row if lock_cluster else None,
    )


# ----------------------------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class AppointmentTimeoutConfig:
    """Settings of one worker instance."""

    # Appointments claimed per cycle (seed 000: AppointmentTimeoutOptions.BatchSize = 200); a full batch loops.
    batch_size: int = 200
    # The longest an item waits for its slot, event or reminder rows (held by an in-flight operation): then it is
    # rolled back and skipped, so a stuck lock can neither hang the cycle nor delay a graceful stop.
    item_lock_timeout_seconds: float = 3.0
    # The longest the worker's own steps (AsOf, counts, next deadline, bookkeeping) wait for a pooled connection:
    # with the database gone, each fails after this long instead of the pool's 30 s, so a stop request is
    # honoured within a few seconds.
    connection_wait_seconds: float = 2.0
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
    batch_size: int = 200
    retried_count: int = 0  # of those, poison items claimed by the second pass (tried again)

    @property
    def skipped_locked(self) -> int:
        """SkippedLockedCount, under the name every job's result has."""
        return self.skipped_locked_count

    @property
    def is_full(self) -> bool:
        """The first pass alone claimed BatchSize items: more due appointments are probably waiting.

        Claims of poison items do not count: a batch they fill must not make the runner loop at once, or a
        handful of poison items would be retried back to back instead of once per cycle.
        """
        return self.claimed_count - self.retried_count >= self.batch_size

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
    name=JOB_NAME,
    metrics=metrics.JOB_METRICS,
    due_sql=DUE_SQL,
    next_deadline_sql=NEXT_DEADLINE_SQL,
    still_waiting_sql=STILL_PENDING_SQL,
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

        Its session's lock_timeout is the item lock timeout, set here once and reset before the connection goes
        back to the pool (a connection that cannot be reset is closed: the pool then discards it).
        """
        timeout_ms = max(1, int(self._config.item_lock_timeout_seconds * 1000))
        with self._cycles.connection() as conn:
            conn.execute(_SET_LOCK_TIMEOUT, {"lock_timeout": f"{timeout_ms}ms"})
            try:
                yield conn
            finally:
                _reset_session(conn)

    def _expire_due(self, conn: Conn, cycle: Cycle, tally: _Tally) -> None:
        """Claim and expire one item per transaction until none is free, BatchSize is reached, or a stop.

        Two passes over the due appointments, oldest first: those that are not poison, then the poison ones with
        the room left (each once per cycle, after everything else: docs/design/poison-items.md).
        """
        assert cycle.as_of is not None
        batch_size = self._config.batch_size
        selected = _count(conn, DUE_SQL, {"job": JOB_NAME, "as_of": cycle.as_of}, limit=batch_size)
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
                claim = appointment_claim_next(
                    conn, as_of=as_of, after=tally.cursor, lock_cluster=lock_cluster,
                    poison=tally.poison_pass, failed=tally.failed,
                )  # fmt: skip
            except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected) as exc:
                _raise_if_infrastructure(conn)  # about the item only while the connection is healthy
                if not lock_cluster:
                    raise InfrastructureError(bookkeeping.describe_error(exc)) from exc
                raise _ClusterLockFailedError from exc
            except Exception as exc:
                raise InfrastructureError(bookkeeping.describe_error(exc)) from exc
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
                except ConflictError:
                    # Changed or held under us (guarded UPDATE matched nothing, lock timeout, deadlock): rolled back,
                    # never overwritten; the next cycle re-reads it (docs/design/poison-items.md).
                    _raise_if_infrastructure(conn)
                    tally.skipped.add(appointment_id)
                    cycle.warning("item skipped: changed concurrently", AppointmentId=str(appointment_id))
                    return True
                except Exception as exc:  # noqa: BLE001 - poison fails in any way; infrastructure is re-raised
                    _raise_if_infrastructure(conn, exc)
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

    def _expire_claimed(self, uow: UnitOfWork, claim: ClaimedItem, as_of: datetime) -> ExpiryResult | None:
        """The calendar's expiry use case on the claimed row, then commit; None when there was nothing to do."""
        assert claim.appointment_id is not None
        if claim.row is not None:  # the claim locked the cluster: the cascade's writes and outbox in one statement
            cluster = repository.cluster_from_locked_row(claim.row)
            expiry = expire_locked_cluster(uow, cluster, as_of, one_statement=True)
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
        metrics.ITEMS.labels(slot_outcome=outcome.value).inc()
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


def _reset_session(conn: Conn) -> None:
    """End any open transaction and reset the cycle's lock_timeout; close the connection when that fails."""
    if conn.closed or conn.broken:
        return
    try:
        if conn.info.transaction_status is not TransactionStatus.IDLE:
            conn.rollback()
        conn.execute(_RESET_LOCK_TIMEOUT)
        conn.commit()
    except psycopg.Error:
        log.warning("could not reset the cycle's connection; closing it", job=JOB_NAME, exc_info=True)
        conn.close()


def _raise_if_infrastructure(conn: Conn, exc: Exception | None = None) -> None:
    """Re-raise as InfrastructureError when the connection is gone or the error is not about this item.

    A domain error is about the item (poison, or a conflict). A driver error on a healthy connection that is not
    operational (a check violation, bad data) is about the item too. An OperationalError or a broken connection is
    about the database: the cycle ends and the next one retries.
    """
    if conn.broken or conn.closed:
        raise InfrastructureError("the database connection was lost") from exc
    if exc is not None and not isinstance(exc, DomainError) and isinstance(exc, psycopg.OperationalError | PoolTimeout):
        raise InfrastructureError(bookkeeping.describe_error(exc)) from exc


def _count(conn: Conn, query: str, params: Mapping[str, object], *, limit: int) -> int:
    """How many rows ``query`` returns, counting at most ``limit`` (a bounded scan of the partial index)."""
    sql = f"SELECT count(*) AS n FROM ({query} LIMIT %(count_limit)s) AS due"
    row = cast(dict[str, Any], conn.execute(sql, {**params, "count_limit": limit}).fetchone())
    return int(row["n"])
