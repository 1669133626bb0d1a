"""The cycle every polling job runs: run id, AsOf, span, the seeds' log lines, metrics, poison and cycle records.

A job supplies a :class:`JobDefinition` and the body of its cycle (its claim and its per-item or per-batch
write); see docs/design/claims.md and docs/design/poison-items.md.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

import structlog
from opentelemetry.trace import Tracer
from prometheus_client import Counter, Gauge, Histogram
from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now
from pin.jobs import bookkeeping

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


@dataclass(frozen=True)
class JobDefinition:
    """What the cycle skeleton knows of one job; every statement binds ``%(job)s``."""

    # the job's name in logs, jobs.cycle and jobs.item_failure
    name: str
    metrics: JobMetrics
    # the due items (``SELECT 1 ... WHERE <due at %(as_of)s>``), poison ones included: the backlog gauge
    due_sql: str
    # the earliest deadline (column ``at``) of an item that is not poison
    next_deadline_sql: str
    # a predicate over ``f.item_id``, true while a poison item still waits (its failure record is kept)
    still_waiting_sql: str
    # the field naming the item in "item failed" (seed 000: AppointmentId, seed 002: PurchaseId)
    item_field: str
    # the field carrying the failure's type and first line in "item failed" and "cycle failed"
    error_field: str = "error"
    # whether "cycle failed" carries the traceback (the runner's "job cycle failed" always does)
    traceback_on_cycle_failure: bool = True


class CycleResult(Protocol):
    """The counters a cycle returns."""

    @property
    def is_full(self) -> bool: ...

    @property
    def skipped_locked(self) -> int: ...

    @property
    def failed_count(self) -> int: ...

    @property
    def duration_ms(self) -> int: ...

    @property
    def budget_exhausted(self) -> bool: ...

    def as_dict(self) -> Mapping[str, int]: ...


R = TypeVar("R", bound=CycleResult)


class Cycle:
    """One cycle in progress: its run id, AsOf, and what it keeps if it fails."""

    def __init__(self, definition: JobDefinition, *, budget_seconds: float = float("inf")) -> None:
        self.definition = definition
        # seed 000/002 "Max duration": past this, the cycle claims nothing more and commits what it finished
        self.budget_seconds = budget_seconds
        self.run_id = uuid.uuid4()
        # the cycle's lines lead with job and RunId; the logger is resolved once per cycle, not once per line (a
        # job logs a line per item)
        self._log = log.bind(job=definition.name, RunId=str(self.run_id))
        self.started = time.monotonic()
        self.as_of: datetime | None = None
        # the counters so far, for a job whose items commit one by one; None: a failure keeps nothing
        self.partial: Callable[[], CycleResult] | None = None

    def elapsed_ms(self) -> int:
        """Milliseconds since the cycle started."""
        return int((time.monotonic() - self.started) * 1000)

    def budget_spent(self) -> bool:
        """Whether the cycle's time budget is spent (checked before each claim)."""
        return time.monotonic() - self.started >= self.budget_seconds

    def budget_left_ms(self) -> int:
        """Milliseconds of the budget left, at least 1 (a statement timeout of 0 would disable it)."""
        return max(1, int((self.budget_seconds - (time.monotonic() - self.started)) * 1000))

    def begin(self, as_of: datetime) -> None:
        """AsOf was read: log "cycle started" (seed 000: runId, AsOf)."""
        self.as_of = as_of
        self.info("cycle started", AsOf=as_of.isoformat())

    def info(self, event: str, **fields: object) -> None:
        """An INFO line of this cycle (job and RunId first)."""
        self._log.info(event, **fields)

    def warning(self, event: str, **fields: object) -> None:
        """A WARNING line of this cycle (job and RunId first)."""
        self._log.warning(event, **fields)

    def item_failed(self, conn: Conn, item_id: uuid.UUID, exc: Exception, *, commit: bool = False) -> None:
        """A poison item: count the attempt, record it in jobs.item_failure (``commit``: alone), log it at ERROR."""
        definition = self.definition
        definition.metrics.errors.inc()  # every failed attempt: a systematic poison item keeps the errors alert firing
        attempts = bookkeeping.item_failure_record(conn, definition.name, item_id, exc)
        if commit:
            conn.commit()
        fields: dict[str, object] = {
            definition.item_field: str(item_id),
            definition.error_field: bookkeeping.describe_error(exc),
        }
        self._log.error("item failed", **fields, Attempts=attempts, exc_info=exc)


class JobCycles:
    """Runs the cycles of one job instance around the body the job supplies."""

    def __init__(
        self,
        definition: JobDefinition,
        pool: ConnectionPool[Conn],
        *,
        instance: str,
        connection_wait_seconds: float | None = None,
        budget_seconds: float = float("inf"),
    ) -> None:
        self.definition = definition
        self._pool = pool
        self._instance = instance
        self._connection_wait = connection_wait_seconds  # None: the pool's own timeout
        self._budget = budget_seconds  # each cycle's time budget

    def connection(self) -> AbstractContextManager[Conn]:
        """A pooled connection for the job's own steps."""
        if self._connection_wait is None:
            return self._pool.connection()
        return self._pool.connection(timeout=self._connection_wait)

    def run(self, tracer: Tracer, body: Callable[[Cycle], R]) -> R:
        """One cycle: the body inside the cycle span; a failure is logged, counted, recorded and raised."""
        cycle = Cycle(self.definition, budget_seconds=self._budget)
        name = self.definition.name
        with tracer.start_as_current_span(f"{name} cycle", attributes={"pin.run_id": str(cycle.run_id)}):
            try:
                result = body(cycle)
            except Exception as exc:
                self._failed(cycle, exc)
                raise
        self._completed(cycle, result)
        return result

    def seconds_until_next_due(self) -> float | None:
        """Seconds until the earliest deadline of an item that is not poison, on the database clock."""
        with self.connection() as conn:
            return bookkeeping.seconds_until(conn, self.definition.next_deadline_sql, {"job": self.definition.name})

    def _completed(self, cycle: Cycle, result: CycleResult) -> None:
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
        cycle.info("cycle completed", **fields)
        self._after_cycle(cycle, cycle.as_of, counters, succeeded=True)

    def _failed(self, cycle: Cycle, exc: Exception) -> None:
        definition = self.definition
        definition.metrics.errors.inc()
        partial = cycle.partial() if cycle.partial is not None else None
        fields = dict(partial.as_dict()) if partial is not None else {"DurationMs": cycle.elapsed_ms()}
        log.error(
            "cycle failed", job=definition.name, RunId=str(cycle.run_id), **fields,
            **{definition.error_field: bookkeeping.describe_error(exc)},
            exc_info=definition.traceback_on_cycle_failure,
        )  # fmt: skip
        if partial is None:  # nothing of the cycle was kept, not even its AsOf
            self._after_cycle(cycle, None, fields, succeeded=False)
        else:
            self._after_cycle(cycle, cycle.as_of, {**fields, "FailedCount": partial.failed_count}, succeeded=False)

    def _after_cycle(
        self, cycle: Cycle, as_of: datetime | None, counters: Mapping[str, int], *, succeeded: bool
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
        except Exception:  # noqa: BLE001 - best effort: the next cycle records again
            cycle.warning("cycle bookkeeping failed", exc_info=True)
