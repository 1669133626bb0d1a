"""The cycle every polling job runs: run id, AsOf, span, the two passes, the per-item span, the poison-aware
counters, the seeds' log lines, metrics, poison and cycle records.

A job supplies a :class:`JobDefinition` and owns the loop of its cycle, top-down::

    with harness.cycle(tracer()) as cycle:
        for poison in cycle.passes():
            while cycle.has_room():
                ...  # claim, write, count with cycle.claimed / cycle.add
    return cycle.result()

See docs/design/claims.md and docs/design/poison-items.md. Whose fault a failure is, is
:func:`pin.faults.fault_of`'s answer.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import structlog
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode, Tracer
from prometheus_client import Counter, Gauge, Histogram
from psycopg_pool import ConnectionPool

from pin.cancellation import Canceller, Cause, Watch
from pin.db import Conn, database_now
from pin.faults import Fault, fault_of
from pin.jobs import bookkeeping
from pin.observability.logging import log_each
from pin.observability.tracing import current_traceparent, spans_exported
from pin.settings import JOB_BATCH_SIZE

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class JobMetrics:
    """The series of one job, under the names its seed gives them."""

    cycle_duration: Histogram
    skip_locked: Counter
    # every failed attempt of a poison item and every failed cycle
    errors: Counter
    backlog: Gauge
    poison: Gauge
    last_success: Gauge
    # cycles that completed (liveness), for a job whose seed names one; None: not counted
    runs: Counter | None = None
    # cycles that stopped claiming because their time budget was spent; None: not counted
    budget_exhausted: Counter | None = None


@dataclass(frozen=True, kw_only=True)
class CycleCounts:
    """What every job's cycle counts, poison-aware: the base of each job's result (docs/design/poison-items.md)."""

    duration_ms: int = 0
    skipped_locked: int = 0  # due items another transaction held, or found changed under us
    failed_count: int = 0  # poison items rolled back this cycle
    claimed_count: int = 0  # items claimed (written, failed, skipped or left for the next cycle)
    retried_count: int = 0  # of those, poison items claimed by the second pass (tried again)
    batch_size: int = JOB_BATCH_SIZE
    budget_exhausted: bool = False  # the cycle stopped claiming: its time budget was spent

    @property
    def is_full(self) -> bool:
        """The first pass alone claimed BatchSize items: more due items are probably waiting.

        Claims of poison items do not count: a batch they fill must not make the runner loop at once, or a
        handful of poison items would be retried back to back instead of once per cycle. A cycle over its budget is
        not full either: the rest waits for the next tick (seeds 000 and 002, "Max duration").
        """
        return not self.budget_exhausted and self.claimed_count - self.retried_count >= self.batch_size

    def as_dict(self) -> Mapping[str, int]:
        """The result as the job's seed names it."""
        raise NotImplementedError


C = TypeVar("C", bound=CycleCounts)


@dataclass(frozen=True)
class JobDefinition(Generic[C]):
    """What the cycle skeleton knows of one job; every statement binds ``%(job)s``."""

    # the job's name in logs, jobs.cycle and jobs.item_failure
    name: str
    metrics: JobMetrics
    # the counters of one cycle: the shared ones and the job's own (each an int, 0 at the start)
    result: type[C]
    # the due items (``SELECT 1 ... WHERE <due at %(as_of)s>``), poison ones included: the backlog gauge
    due_sql: str
    # the earliest deadline (column ``at``) of an item that is not poison
    next_deadline_sql: str
    # a predicate over ``f.item_id``, true while a poison item still waits (its failure record is kept)
    still_waiting_sql: str
    # the field naming the item in "item failed" (seed 000: AppointmentId, seed 002: PurchaseId)
    item_field: str
    # the attribute naming the item on its span (pin.appointment_id, pin.purchase_id)
    item_attribute: str
    # the field carrying the failure's type and first line in "item failed" and "cycle failed"
    error_field: str = "error"
    # whether "cycle failed" carries the traceback (the runner's "job cycle failed" always does)
    traceback_on_cycle_failure: bool = True
    # items commit one by one: a failed cycle keeps the counts of those committed (else a failure keeps nothing)
    commits_each_item: bool = False


class CycleResult(Protocol):
    """The counters a cycle returns (what the runner and the cycle's record read)."""

    # the first pass alone claimed BatchSize items: more work is probably waiting, the runner loops at once
    @property
    def is_full(self) -> bool: ...

    @property
    def skipped_locked(self) -> int: ...

    @property
    def failed_count(self) -> int: ...

    @property
    def duration_ms(self) -> int: ...

    # the cycle stopped claiming when its time budget was spent: the rest waits for the next tick
    @property
    def budget_exhausted(self) -> bool: ...

    def as_dict(self) -> Mapping[str, int]: ...


class InfrastructureError(Exception):
    """The database could not be reached or the connection broke; the cycle ends and the next one retries."""


def infrastructure_error(conn: Conn, exc: Exception) -> InfrastructureError:
    """The cycle-ending error for ``exc``, the database's fault and not the item's (pin.faults)."""
    if conn.broken or conn.closed:
        return InfrastructureError("the database connection was lost")
    return InfrastructureError(bookkeeping.describe_error(exc))


class Cycle(Generic[C]):
    """One cycle in progress: its run id, AsOf, its counters, and what it keeps if it fails."""

    def __init__(
        self,
        definition: JobDefinition[C],
        *,
        budget_seconds: float = float("inf"),
        batch_size: int = JOB_BATCH_SIZE,
        canceller: Canceller | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.definition = definition
        self.batch_size = batch_size  # the most items the cycle claims
        # seed 000/002 "Max duration": past this, the cycle claims nothing more and commits what it finished
        self.budget_seconds = budget_seconds
        self.run_id = uuid.uuid4()
        # the cycle's lines lead with job and RunId; the logger is resolved once per cycle, not once per line (a
        # job logs a line per item)
        self._log = log.bind(job=definition.name, RunId=str(self.run_id))
        self.started = time.monotonic()
        self.as_of: datetime | None = None
        # the job's own counters (its result's fields beyond CycleCounts'), of what it committed so far
        self.own: dict[str, int] = {}
        self._result: C | None = None  # the result, once the cycle ended
        self._stop = stop  # a stop request: no more claims (the canceller cancels the statement in flight)
        # what is in flight now (the fields naming the item or the batch), for the line a cancel of its own logs
        self.in_flight: dict[str, object] = {}
        self._canceller = canceller if canceller is not None else Canceller()
        self._watches: list[Watch] = []  # the watches open, and those that sent a cancel or ended past the deadline
        self.tracer: Tracer | None = None  # the cycle span's (set by CycleHarness.cycle)
        # the shared counters (has_room, claimed, skip, item_failed)
        self.claimed_count = 0
        self.retried_count = 0
        self.failed: list[uuid.UUID] = []  # the items that failed (poison) in this cycle
        self.skipped: set[uuid.UUID] = set()  # the items skipped as held or changed, by id
        self.skipped_unnamed = 0  # and those a claim only counted
        self.budget_exhausted = False
        # "cycle started", held until the batch shows the cycle is not idle (begin, selected)
        self._start_line: dict[str, object] | None = None
        self.idle = False  # the batch was empty: the cycle's only line is a DEBUG "cycle completed"
        # one span per item only when spans leave the process; otherwise what the items write carries the cycle
        # span's traceparent (the SDK records it either way), taken once per cycle
        self.item_spans = False
        self.traceparent: str | None = None

    def elapsed_ms(self) -> int:
        """Milliseconds since the cycle started."""
        return int((time.monotonic() - self.started) * 1000)

    def budget_spent(self) -> bool:
        """Whether the cycle's time budget is spent (checked before each claim)."""
        return time.monotonic() - self.started >= self.budget_seconds

    def budget_left_ms(self) -> int:
        """Milliseconds of the budget left, at least 1 (a statement timeout of 0 would disable it)."""
        return max(1, int((self.budget_seconds - (time.monotonic() - self.started)) * 1000))

    @contextmanager
    def watch(self, conn: Conn) -> Iterator[Watch]:
        """Watch ``conn`` while the cycle works on it: a stop request, or the end of the budget, cancels its
        statement in flight (pin.cancellation); the harness then tells that cancel from a failure. End the block
        before rolling back: nothing after it is cancelled."""
        deadline = self.started + self.budget_seconds if self.budget_seconds != float("inf") else None
        with self._canceller.watch(conn, deadline=deadline) as watch:
            self._watches.append(watch)
            try:
                yield watch
            finally:
                if watch.cause is None and not watch.past_deadline():
                    self._watches.remove(watch)  # it cancelled nothing: forgotten

    def cancelled(self, exc: BaseException) -> Cause | None:
        """Why ``exc`` happened, if it was a cancel the cycle asked for itself (a stop, its budget)."""
        return next((cause for w in self._watches if (cause := w.cancelled(exc)) is not None), None)

    def stand_down(self) -> None:
        """No more cancels in this cycle: it commits what it finished (its budget is spent)."""
        for watch in self._watches:
            watch.end()

    def passes(self) -> Iterator[bool]:
        """The cycle's two passes: False, the fresh items, then True, the poison ones with the room left (each
        once per cycle, after everything else: docs/design/poison-items.md); none after the budget was spent."""
        self.item_spans = self.tracer is not None and spans_exported(self.tracer)
        self.traceparent = current_traceparent()
        for poison in (False, True):
            if self.budget_exhausted:
                return
            yield poison

    def has_room(self) -> bool:
        """Whether the cycle may claim more: fewer than BatchSize claimed, no stop requested, and its budget not
        spent (then it is ``budget_exhausted``: what was finished is committed, the rest waits for the next tick)."""
        if self.claimed_count >= self.batch_size or (self._stop is not None and self._stop.is_set()):
            return False
        if self.budget_spent():
            self.budget_exhausted = True
            return False
        return True

    def room(self) -> int:
        """How many more items the cycle may claim."""
        return self.batch_size - self.claimed_count

    def add(self, **own: int) -> None:
        """Count what the job committed, in its own counters (its result's fields)."""
        for name, count in own.items():
            self.own[name] = self.own.get(name, 0) + count

    def claimed(self, count: int, *, poison: bool) -> None:
        """``count`` items were claimed, by the poison pass or not."""
        self.claimed_count += count
        if poison:
            self.retried_count += count

    def skip(self, item_ids: Iterable[uuid.UUID] = (), *, unnamed: int = 0) -> None:
        """Items skipped as held by another transaction or changed under us: by id (counted once), or a count."""
        self.skipped.update(item_ids)
        self.skipped_unnamed += unnamed

    def item_skipped(self, item_id: uuid.UUID, **fields: object) -> None:
        """A claimed item found changed or held under us: rolled back, never overwritten, counted as skipped and
        logged at WARNING; the next cycle reads it again (docs/design/poison-items.md)."""
        self.skipped.add(item_id)
        self._log.warning("item skipped: changed concurrently", **{self.definition.item_field: str(item_id)}, **fields)

    def item_span(self, item_id: uuid.UUID, tenant_id: uuid.UUID | None) -> AbstractContextManager[Span]:
        """The current span of one item (``<job> item``), when spans leave the process; else no span."""
        if not self.item_spans or self.tracer is None:
            return nullcontext(INVALID_SPAN)
        attributes = {
            "pin.run_id": str(self.run_id),
            self.definition.item_attribute: str(item_id),
            "pin.tenant_id": str(tenant_id),
        }
        return self.tracer.start_as_current_span(f"{self.definition.name} item", attributes=attributes)

    def result(self) -> C:
        """The cycle's result: its shared counters and the job's own, so far (fixed once the cycle ended)."""
        if self._result is not None:
            return self._result
        shared: dict[str, Any] = {
            "duration_ms": self.elapsed_ms(),
            "skipped_locked": len(self.skipped) + self.skipped_unnamed,
            "failed_count": len(self.failed),
            "claimed_count": self.claimed_count,
            "retried_count": self.retried_count,
            "batch_size": self.batch_size,
            "budget_exhausted": self.budget_exhausted,
        }
        return cast(Callable[..., C], self.definition.result)(**shared, **self.own)

    def end(self) -> C:
        """The cycle ended: its result, fixed."""
        self._result = self.result()
        return self._result

    def begin(self, as_of: datetime) -> None:
        """AsOf was read: "cycle started" (seed 000: runId, AsOf) is logged once the batch has something in it
        (:meth:`selected`): an idle cycle is one DEBUG line, "cycle completed", not three INFO lines a minute."""
        self.as_of = as_of
        self._start_line = {"AsOf": as_of.isoformat()}

    def selected(self, count: int, **fields: int) -> None:
        """The batch was selected: "cycle started" and "batch selected" when it holds anything (items, skipped or
        poison ones); an empty one logs nothing here and makes the cycle idle."""
        if count == 0 and not any(fields.values()):
            self.idle = True
            return
        self.announce()
        self.info("batch selected", Count=count, **fields)

    def announce(self) -> None:
        """Log "cycle started" if it has not been (a cycle that turned out not to be idle after all)."""
        if self._start_line is not None:
            self.info("cycle started", **self._start_line)
            self._start_line = None

    def debug(self, event: str, **fields: object) -> None:
        """A DEBUG line of this cycle (job and RunId first)."""
        self._log.debug(event, **fields)

    def info(self, event: str, **fields: object) -> None:
        """An INFO line of this cycle (job and RunId first)."""
        self._log.info(event, **fields)

    def info_each(self, event: str, items: Sequence[Mapping[str, object]]) -> None:
        """One INFO line of this cycle per item (a seed's line per item), each as :meth:`info` writes it, written
        together (:func:`~pin.observability.logging.log_each`)."""
        log_each(self._log, event, items)

    def warning(self, event: str, **fields: object) -> None:
        """A WARNING line of this cycle (job and RunId first)."""
        self._log.warning(event, **fields)

    def item_failed(
        self, conn: Conn, item_id: uuid.UUID, exc: Exception, *, commit: bool = False, span: Span | None = None
    ) -> None:
        """A poison item: count the attempt, record it in jobs.item_failure (``commit``: alone, and a failure to
        record it ends the cycle), mark its span, log it at ERROR."""
        definition = self.definition
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, bookkeeping.describe_error(exc)))
        definition.metrics.errors.inc()  # every failed attempt: a systematic poison item keeps the errors alert firing
        try:
            attempts = bookkeeping.item_failure_record(conn, definition.name, item_id, exc)
            if commit:
                conn.commit()
        except Exception as record_exc:
            if not commit:
                raise
            raise InfrastructureError(bookkeeping.describe_error(record_exc)) from record_exc
        self.failed.append(item_id)
        fields: dict[str, object] = {
            definition.item_field: str(item_id),
            definition.error_field: bookkeeping.describe_error(exc),
        }
        self._log.error("item failed", **fields, Attempts=attempts, exc_info=exc)


class CycleHarness(Generic[C]):
    """What runs around each cycle of one job instance: the cycle span, its connection, the records after it."""

    def __init__(
        self,
        definition: JobDefinition[C],
        pool: ConnectionPool[Conn],
        *,
        instance: str,
        connection_wait_seconds: float | None = None,
        budget_seconds: float = float("inf"),
        batch_size: int = JOB_BATCH_SIZE,
        stop: threading.Event | None = None,
    ) -> None:
        self.definition = definition
        self._batch_size = batch_size  # each cycle's BatchSize
        # a stop request (SIGTERM, Ctrl-C) and each cycle's budget reach the statement in flight
        self._canceller = Canceller(stop)
        self._stop = stop
        self._pool = pool
        self._instance = instance
        self._connection_wait = connection_wait_seconds  # None: the pool's own timeout
        self._budget = budget_seconds  # each cycle's time budget

    def connection(self) -> AbstractContextManager[Conn]:
        """A pooled connection for the job's own steps."""
        if self._connection_wait is None:
            return self._pool.connection()
        return self._pool.connection(timeout=self._connection_wait)

    @contextmanager
    def cycle(self, tracer: Tracer) -> Iterator[Cycle[C]]:
        """One cycle, the job's loop inside the cycle span; then its result is fixed (:meth:`Cycle.result`) and
        recorded. A failure is logged, counted, recorded and raised; a cancel the cycle asked for itself (a stop, its
        budget) ends it without one."""
        cycle = Cycle(
            self.definition, budget_seconds=self._budget, batch_size=self._batch_size, canceller=self._canceller,
            stop=self._stop,
        )  # fmt: skip
        cycle.tracer = tracer
        name = self.definition.name
        with tracer.start_as_current_span(f"{name} cycle", attributes={"pin.run_id": str(cycle.run_id)}):
            try:
                yield cycle
            except Exception as exc:
                cause = cycle.cancelled(exc)
                if cause is None:
                    self._failed(cycle, exc)
                    raise
                self._cancelled(cycle, cause)
        self._completed(cycle, cycle.end())

    def _cancelled(self, cycle: Cycle[C], cause: Cause) -> None:
        """A cancel the cycle asked for itself ended it: a stop request, or its budget spent. Not a failure: what
        was in flight rolled back whole (its locks with it), what was committed is kept, the rest waits for the next
        cycle; one line says what was rolled back."""
        rolled_back = cycle.in_flight or {"RolledBack": "nothing"}
        if cause is Cause.STOP:
            cycle.warning(
                "cycle stopped: the statement in flight was cancelled and its work rolled back", **rolled_back
            )
        else:
            cycle.budget_exhausted = True
            cycle.warning(
                "cycle budget spent: the statement in flight was cancelled and its work rolled back",
                BudgetSeconds=cycle.budget_seconds, **rolled_back,
            )  # fmt: skip

    def seconds_until_next_due(self, params: Mapping[str, object] | None = None) -> float | None:
        """Seconds until the earliest deadline of an item that is not poison, on the database clock (``params``:
        the job's own parameters of its deadline query, beside the job's name)."""
        with self.connection() as conn:
            return bookkeeping.seconds_until(
                conn, self.definition.next_deadline_sql, {"job": self.definition.name, **(params or {})}
            )

    def _completed(self, cycle: Cycle[C], result: C) -> None:
        metrics = self.definition.metrics
        if metrics.runs is not None:
            metrics.runs.inc()
        metrics.cycle_duration.observe(result.duration_ms / 1000)
        metrics.skip_locked.inc(result.skipped_locked)
        metrics.last_success.set(time.time())
        counters = {**result.as_dict(), "FailedCount": result.failed_count}
        # seed 000's line: the counts, DurationMs and SkippedLocked
        fields = {**result.as_dict(), "SkippedLocked": result.skipped_locked, "FailedCount": result.failed_count}
        if result.budget_exhausted:
            # it committed what it finished and claimed nothing more; the rest waits for the next tick
            if metrics.budget_exhausted is not None:
                metrics.budget_exhausted.inc()
            cycle.warning("cycle budget exhausted", BudgetSeconds=cycle.budget_seconds, **fields)
            counters["BudgetExhausted"] = 1
        if cycle.idle and not result.budget_exhausted and not result.failed_count:
            cycle.debug("cycle completed", **fields)
        else:
            cycle.announce()
            cycle.info("cycle completed", **fields)
        self._after_cycle(cycle, cycle.as_of, counters, succeeded=True)

    def _failed(self, cycle: Cycle[C], exc: Exception) -> None:
        definition = self.definition
        definition.metrics.errors.inc()
        partial = cycle.result() if definition.commits_each_item else None
        fields = dict(partial.as_dict()) if partial is not None else {"DurationMs": cycle.elapsed_ms()}
        log.error(
            "cycle failed", job=definition.name, RunId=str(cycle.run_id), **fields,
            **{definition.error_field: bookkeeping.describe_error(exc)},
            # a database away is no bug: its line is enough (the runner says it waits)
            exc_info=definition.traceback_on_cycle_failure and fault_of(exc) is not Fault.INFRASTRUCTURE,
        )  # fmt: skip
        if partial is None:  # nothing of the cycle was kept, not even its AsOf
            self._after_cycle(cycle, None, fields, succeeded=False)
        else:
            self._after_cycle(cycle, cycle.as_of, {**fields, "FailedCount": partial.failed_count}, succeeded=False)

    def _after_cycle(
        self, cycle: Cycle[C], as_of: datetime | None, counters: Mapping[str, int], *, succeeded: bool
    ) -> None:
        """Backlog and poison gauges, poison pruning and the jobs.cycle record, in a short transaction (best effort)."""
        definition, metrics = self.definition, self.definition.metrics
        try:
            with self.connection() as conn:
                now = database_now(conn)
                metrics.backlog.set(
                    bookkeeping.backlog_count(conn, definition.due_sql, {"job": definition.name, "as_of": now})
                )
                bookkeeping.item_failure_prune(conn, definition.name, definition.still_waiting_sql)
                metrics.poison.set(bookkeeping.poison_count(conn, definition.name))
                bookkeeping.cycle_record(
                    conn,
                    job=definition.name,
                    instance=self._instance,
                    run_id=cycle.run_id,
                    as_of=as_of or now,
                    duration_ms=counters.get("DurationMs", 0),
                    counters=counters,
                    succeeded=succeeded,
                )
        except Exception as exc:  # noqa: BLE001 - best effort: the next cycle records again
            if fault_of(exc) is Fault.INFRASTRUCTURE:
                cycle.warning("cycle bookkeeping failed", error=bookkeeping.describe_error(exc))
            else:
                cycle.warning("cycle bookkeeping failed", exc_info=True)
