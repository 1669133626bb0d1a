"""The worker appointment-timeout (seed 000): due Pending appointments become Expired, one per transaction.

Its statements are in ``expiry.sql``: the claim, the count of a cycle's batch, the backlog, the next deadline. How
it claims, why one item per transaction, and what a poison item is: docs/design/claims.md,
docs/design/poison-items.md, docs/design/one-statement-writes.md.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, LiteralString, cast

import structlog
from psycopg_pool import ConnectionPool

from pin import faults
from pin.calendar import metrics, service
from pin.calendar.domain import SlotOutcome
from pin.calendar.rows import APPOINTMENT_NAMES, EVENT_NAMES, REMINDER_NAMES, SLOT_NAMES, columns
from pin.calendar.service import ExpiryResult, ExpiryStatus
from pin.db import Conn, database_now, kept_cursor, limits, load_queries
from pin.faults import Fault
from pin.jobs import bookkeeping
from pin.jobs.cycle import Cycle, CycleCounts, CycleHarness, JobDefinition, infrastructure_error
from pin.observability.tracing import current_traceparent, tracer
from pin.outbox.writer import RELAY_POLICY, MessageContext, OutboxPolicy
from pin.settings import CYCLE_BUDGET_MAX_SECONDS, JOB_BATCH_SIZE
from pin.unit_of_work import UnitOfWork

log = structlog.get_logger(__name__)

JOB_NAME = "appointment-timeout"

# ------------------------------------------------------------------------------------ the job and its limits


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
    cycle_budget_seconds: float = CYCLE_BUDGET_MAX_SECONDS
    # This instance's name in jobs.cycle.
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # The claim floor (docs/design/claims.md, "The claim floor"): a cycle's fresh pass, its count and the next
    # deadline start at the floor instead of the head of the partial index; at least this often a cycle starts at
    # the head again (a full walk), which finds any Pending appointment below the floor.
    claim_floor_reset_seconds: float = 60.0
    # How far behind the last claimed deadline the floor stays: bookings whose transaction commits up to this much
    # after the deadlines being claimed are found by the next cycle, not only by the next full walk.
    claim_floor_margin_seconds: float = 5.0


@dataclass(frozen=True, kw_only=True)
class TimeoutResult(CycleCounts):
    """The counters of one cycle (seed 000, "Результат"): the shared ones and what it expired."""

    expired_count: int = 0
    slots_released_count: int = 0
    slots_expired_count: int = 0

    def as_dict(self) -> Mapping[str, int]:
        """The result as seed 000 names it."""
        return {
            "ExpiredCount": self.expired_count,
            "SlotsReleasedCount": self.slots_released_count,
            "SlotsExpiredCount": self.slots_expired_count,
            "SkippedLockedCount": self.skipped_locked,
            "DurationMs": self.duration_ms,
        }


# ---------------------------------------------------------------------------------------- its statements

_QUERIES = load_queries(__package__, "expiry.sql")


def _prefixed(names: tuple[str, ...], alias: str) -> str:
    """The columns of a locked part under its alias, each named with the alias as its prefix (``s.id AS s_id``)."""
    return ", ".join(f"{alias}.{name} AS {alias}_{name}" for name in names)


def _statement(name: str) -> LiteralString:
    """A statement of expiry.sql with the tables' column lists filled in (rows.py: the one place they are written)."""
    return _QUERIES[name].format(
        appointment_columns=columns(APPOINTMENT_NAMES, "a"),
        slot_columns=columns(SLOT_NAMES, "s"),
        event_columns=columns(EVENT_NAMES, "e"),
        reminder_columns=columns(REMINDER_NAMES, "r"),
        slot_columns_prefixed=_prefixed(SLOT_NAMES, "s"),
        event_columns_prefixed=_prefixed(EVENT_NAMES, "e"),
    )


# The due appointments, poison ones included: the backlog gauge.
DUE_SQL: LiteralString = _statement("appointments_due")
# The earliest PendingExpiresAt of a Pending appointment that is not poison (a poison one never wakes the worker).
NEXT_DEADLINE_SQL: LiteralString = _statement("appointment_next_deadline")
# A poison appointment's failure record is kept while the appointment still waits (is Pending).
STILL_PENDING_SQL: LiteralString = _statement("appointment_still_pending")

DEFINITION = JobDefinition(
    JOB_NAME,
    metrics.JOB_METRICS,
    TimeoutResult,
    DUE_SQL,
    NEXT_DEADLINE_SQL,
    STILL_PENDING_SQL,
    item_field="AppointmentId",
    item_attribute="pin.appointment_id",
    error_field="error",
    traceback_on_cycle_failure=True,
    commits_each_item=True,
)

# The claim, of either pass, its cluster locked by the same statement or (lock_cluster false: the fallback when a
# lock of the cluster timed out) the claim alone. It stays under psycopg's 4,096 characters, or it would be parsed
# again on every execute.
CLAIM_SQL: LiteralString = _statement("appointment_claim")
# How many appointments a cycle may claim: the due ones from the claim floor on and the poison ones, up to count_limit.
DUE_COUNT_SQL: LiteralString = _statement("appointments_due_count")
# Due, a predicate on calendar.appointment AS a (binds %(as_of)s): pin status's.
APPOINTMENT_IS_DUE: LiteralString = _statement("appointment_is_due")


@dataclass(frozen=True)
class ClaimedItem:
    """What one claim returned: the locked appointment (None when nothing was free) and the rows it passed over."""

    appointment_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    pending_expires_at: datetime | None
    has_failure: bool
    passed_over: list[uuid.UUID]
    # the earliest PendingExpiresAt of the rows passed over (None: none was): the claim floor stays at or below it
    passed_over_from: datetime | None = None
    # with the cluster locked by the claim: the whole row, in the order repository.cluster_from_locked_row reads
    row: tuple[Any, ...] | None = None

    @property
    def cursor(self) -> tuple[datetime, uuid.UUID] | None:
        """The claimed row's position in the index: where the cycle's next claim starts."""
        if self.pending_expires_at is None or self.appointment_id is None:
            return None
        return self.pending_expires_at, self.appointment_id


# Where the claimed appointment's id, tenant and deadline are in a claim's row.
_ID, _TENANT, _DEADLINE = (APPOINTMENT_NAMES.index(name) for name in ("id", "tenant_id", "pending_expires_at"))


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
    params = {
        "as_of": as_of, "after_at": after_at, "after_id": after_id, "job": JOB_NAME, "lock_cluster": lock_cluster,
        "poison": poison, "failed": failed or [], "passed_over_cap": bookkeeping.BACKLOG_CAP,
    }  # fmt: skip
    # A tuple in binary: no dict of some 50 columns per item, and uuids and times load from their binary form.
    row = kept_cursor(conn, binary=True).execute(CLAIM_SQL, params).fetchone()
    assert row is not None  # the statement returns one row, claimed or not
    return ClaimedItem(
        row[_ID],
        row[_TENANT],
        row[_DEADLINE],
        poison,
        list(row[-1]),
        passed_over_from=row[-2],
        row=row if lock_cluster else None,
    )


def claim_due(
    uow: UnitOfWork,
    *,
    as_of: datetime,
    after: tuple[datetime, uuid.UUID] | None,
    poison: bool,
    failed: list[uuid.UUID],
) -> ClaimedItem:
    """The next due appointment after ``after`` that nobody holds, with its whole cluster locked by the same
    statement (the pass and ``failed`` as :func:`appointment_claim_next` takes them).

    When a row of that cluster was held past the lock timeout (or deadlocked), the statement failed as a whole: the
    claim again, alone, in a new transaction; :func:`service.expire_claimed` then locks the cluster statement by
    statement, where the held row is a ConflictError (the item is known, skipped and counted).
    """
    try:
        return appointment_claim_next(uow.conn, as_of=as_of, after=after, poison=poison, failed=failed)
    except Exception as exc:
        if faults.fault_of(exc, uow.conn) is not Fault.CONTENDED:
            raise
    uow.rollback()
    return appointment_claim_next(uow.conn, as_of=as_of, after=after, lock_cluster=False, poison=poison, failed=failed)


# ------------------------------------------------------------------------------------------ the claim floor


_NO_ID = uuid.UUID(int=0)  # the smallest id: (floor, _NO_ID) is the position just before every row at the floor


@dataclass
class ClaimFloor:
    """The lowest PendingExpiresAt at which a fresh pass may still find a due Pending appointment: where the claim,
    the count and the next deadline start reading the partial index, instead of at its head.

    Why: every appointment that left Pending keeps its entry in ix_appointments_pending_expires_at until vacuum
    removes it, and under a held xmin horizon vacuum removes none, so a read from the head steps over every
    appointment ended since the horizon was taken. The floor lives in this instance's memory and only moves from
    what this instance's own claims saw (docs/design/claims.md, "The claim floor", has the argument that it skips
    nothing):

    - After a cycle it is the deadline of the last appointment its fresh pass claimed, less the margin; lower when
      a claim passed over a row held by another transaction (which may roll back: the earliest such deadline) or
      an item was rolled back as contended (its deadline). A cycle that claimed nothing leaves it where it was, and
      so does a cycle that failed.
    - A failed (poison) item has a failure record: the poison pass, which starts at the head, owns it.
    - What only a later commit can put below the floor (a booking whose transaction commits after its own deadline
      has passed) is found by the next full walk: a cycle starts at the head again once the last one that did is
      ``reset_seconds`` old, and the next deadline is then read from the head too.
    """

    reset_seconds: float
    margin: timedelta
    value: datetime | None = None  # None: start at the head
    full_walk_at: float = float("-inf")  # time.monotonic() of the last cycle that started at the head
    now: Callable[[], float] = time.monotonic  # when the last full walk was (a test's own clock)
    _start: datetime | None = None  # this cycle's start
    _low: datetime | None = None  # the lowest deadline this cycle may have left a due Pending appointment at

    def reset_due(self) -> bool:
        """Whether the next cycle starts at the head."""
        return self.value is None or self.now() - self.full_walk_at >= self.reset_seconds

    def next_deadline_floor(self) -> datetime | None:
        """Where the next-deadline query starts: the floor, or the head when the next cycle walks from it."""
        return None if self.reset_due() else self.value

    def begin(self) -> datetime | None:
        """This cycle's start: the floor, or None (the head) when a full walk is due."""
        if self.reset_due():
            self.value, self.full_walk_at = None, self.now()
        self._start, self._low = self.value, None
        return self._start

    def start_position(self) -> tuple[datetime, uuid.UUID] | None:
        """Where a fresh pass's first claim starts: just before every row at the floor (None: at the head)."""
        return None if self._start is None else (self._start, _NO_ID)

    def keep_at_most(self, at: datetime | None) -> None:
        """A due appointment may still be Pending at ``at`` (None: nothing new): keep the next floor at or below."""
        if at is not None and (self._low is None or at < self._low):
            self._low = at

    def finish(self, last_claimed: datetime | None) -> None:
        """The cycle ended; ``last_claimed``: the deadline of the last appointment its fresh pass claimed."""
        if last_claimed is None:
            self.value = self._start  # it saw nothing new (a row it passed over is at or after its start)
            return
        self.keep_at_most(last_claimed - self.margin)
        assert self._low is not None
        # never below where it started: what is below was below the floor before, covered by the same argument
        self.value = self._low if self._start is None else max(self._start, self._low)


# ---------------------------------------------------------------------------------------------- the cycle


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
        outbox: OutboxPolicy = RELAY_POLICY,
    ) -> None:
        self._pool = pool
        self._config = config or AppointmentTimeoutConfig()
        self._outbox = outbox  # the process's outbox policy (the composition root's), for every item's rows
        self._clock = clock  # AsOf: the database clock every instance shares (docs/design/claims.md)
        # set by SIGTERM: the statement in flight is cancelled, its item rolled back, and the cycle ends
        self._floor = ClaimFloor(
            self._config.claim_floor_reset_seconds, timedelta(seconds=self._config.claim_floor_margin_seconds)
        )
        self._cycles = CycleHarness(
            DEFINITION, pool, instance=self._config.instance,
            connection_wait_seconds=self._config.connection_wait_seconds,
            budget_seconds=self._config.cycle_budget_seconds, batch_size=self._config.batch_size, stop=stop,
        )  # fmt: skip

    @property
    def claim_floor(self) -> ClaimFloor:
        """This instance's claim floor."""
        return self._floor

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest PendingExpiresAt of a Pending appointment that is not poison, DB clock."""
        return self._cycles.seconds_until_next_due({"floor": self._floor.next_deadline_floor()})

    def run_once(self) -> TimeoutResult:
        """One cycle: count the due appointments, then claim and expire one per transaction, the fresh ones from the
        claim floor on, then the poison ones from the head, until none is free, BatchSize is reached, the budget is
        spent or a stop is requested. An infrastructure failure is logged, counted and raised (the current item
        rolled back); a stop or the budget's end cancels the statement in flight and ends the cycle."""
        floor = self._floor.begin()
        last_fresh: datetime | None = None  # the deadline of the last appointment the fresh pass claimed
        with self._cycles.cycle(tracer()) as cycle, self._cycle_connection() as conn:
            with cycle.watch(conn):
                cycle.begin(self._clock(conn))
                params = {"as_of": cycle.as_of, "count_limit": self._config.batch_size, "floor": floor, "job": JOB_NAME}
                count = conn.execute(DUE_COUNT_SQL, params)
                selected = int(cast(dict[str, Any], count.fetchone())["n"])  # a bounded scan of the partial index
                conn.commit()
            cycle.selected(selected)
            for poison in cycle.passes() if selected > 0 else ():  # an empty batch: no claim transaction at all
                # the fresh pass starts at the claim floor, the poison one at the head (few rows: docs/design/claims.md)
                after = None if poison else self._floor.start_position()
                while cycle.has_room():
                    claim = self._expire_next(conn, cycle, after, poison)
                    if claim.appointment_id is None:
                        break
                    after = claim.cursor
                    if not poison:
                        last_fresh = claim.pending_expires_at
            # only a cycle that ended without an error moves the floor (an error leaves it where it was)
            self._floor.finish(last_fresh)
        return cycle.result()

    @contextmanager
    def _cycle_connection(self) -> Iterator[Conn]:
        """One pooled connection for the whole cycle: AsOf, the count, then every item's transaction.

        Its session's lock_timeout is the item lock timeout and its statement_timeout at most the cycle's budget,
        until the connection goes back to the pool (:func:`pin.db.limits`).
        """
        config = self._config
        with self._cycles.connection() as conn, limits(
            conn, lock_timeout=config.item_lock_timeout_seconds, statement_timeout=config.cycle_budget_seconds,
            session=True,
        ):  # fmt: skip
            yield conn

    def _expire_next(
        self, conn: Conn, cycle: Cycle[TimeoutResult], after: tuple[datetime, uuid.UUID] | None, poison: bool
    ) -> ClaimedItem:
        """One item in one transaction: the claim after ``after``, then its item; what it claimed (no appointment
        when none was free).

        A stop request or the end of the cycle's budget cancels the statement in flight: the item rolls back whole
        (the watch ends before the unit of work rolls back) and the harness ends the cycle."""
        assert cycle.as_of is not None
        context = MessageContext(str(cycle.run_id), cycle.traceparent)
        provider = current_traceparent if cycle.item_spans else None  # the item span's, when there is one
        cycle.in_flight = {"RolledBack": "the claim"}
        with (
            UnitOfWork(self._pool, context, outbox=self._outbox, traceparent_provider=provider, connection=conn) as uow,
            cycle.watch(conn),
        ):
            try:
                claim = claim_due(uow, as_of=cycle.as_of, after=after, poison=poison, failed=cycle.failed)
            except Exception as exc:
                raise infrastructure_error(conn, exc) from exc  # a claim is about no item yet
            cycle.skip(claim.passed_over)
            if not poison:
                self._floor.keep_at_most(claim.passed_over_from)  # held by others, who may roll back
            if claim.appointment_id is None:
                # End the read-only transaction with COMMIT: psycopg answers a ROLLBACK with DEALLOCATE ALL, and
                # a cycle that ends with an empty claim would re-plan every statement of the next one.
                conn.commit()
                return claim
            appointment_id = claim.appointment_id
            cycle.in_flight = {"RolledBack": "the item", "AppointmentId": str(appointment_id)}
            cycle.claimed(1, poison=claim.has_failure)
            with cycle.item_span(appointment_id, claim.tenant_id) as span:
                try:
                    expiry = service.expire_claimed(uow, claim, cycle.as_of, job=JOB_NAME)
                except Exception as exc:
                    fault = faults.fault_of(exc, conn)
                    if fault is Fault.INFRASTRUCTURE:
                        raise infrastructure_error(conn, exc) from exc
                    if fault is Fault.CONTENDED:
                        # Changed or held under us (guarded UPDATE matched nothing, lock timeout, deadlock): rolled
                        # back, never overwritten; the next cycle re-reads it (docs/design/poison-items.md), so the
                        # floor stays at or below it.
                        if not poison:
                            self._floor.keep_at_most(claim.pending_expires_at)
                        cycle.item_skipped(appointment_id)
                        return claim
                    uow.rollback()  # the whole item, before its failure is recorded in a transaction of its own
                    cycle.item_failed(conn, appointment_id, exc, commit=True, span=span)
                    return claim
        cycle.in_flight = {}
        if expiry.status is ExpiryStatus.EXPIRED:
            self._expired(cycle, expiry)
        return claim

    def _expired(self, cycle: Cycle[TimeoutResult], expiry: ExpiryResult) -> None:
        assert expiry.cluster is not None
        assert expiry.slot_outcome is not None
        appointment = expiry.cluster.appointment
        outcome = expiry.slot_outcome
        if outcome is SlotOutcome.RELEASED:
            cycle.add(expired_count=1, slots_released_count=1)
        else:
            cycle.add(expired_count=1, slots_expired_count=1)
        metrics.ITEMS_BY_OUTCOME[outcome].inc()
        cycle.info(
            "appointment expired", AppointmentId=str(appointment.id), SlotId=str(appointment.slot_id),
            CalendarEventId=str(appointment.calendar_event_id), TenantId=str(appointment.tenant_id),
            SlotOutcome=outcome.value,
        )  # fmt: skip
