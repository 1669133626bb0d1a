"""The River-shaped loop every polling job runs in: no overlap, a full batch loops at once, otherwise a doze until
the next tick or the next deadline, re-asked every second (a cycle over its budget: until the next tick); a stop
ends a doze at once (docs/design/claims.md,
"No overlap, and the loop").
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from pin.backoff import exponential_backoff
from pin.faults import Fault, database_unreachable, driver_error, fault_of
from pin.jobs.cycle import CycleResult
from pin.observability import liveness
from pin.observability.logging import error_text
from pin.operations.pauses import PAUSE_READ_SECONDS
from pin.settings import JOB_INTERVAL_SECONDS

log = structlog.get_logger(__name__)


class PollingJob(Protocol):
    """A job the runner can drive."""

    name: str

    def run_once(self) -> CycleResult: ...

    def seconds_until_next_due(self) -> float | None: ...


@dataclass(frozen=True)
class RunnerConfig:
    """How the loop paces itself."""

    # Seconds between ticks when there is no nearer deadline (seed 000: 60 s; seed 002: 1 to 5 min).
    interval_seconds: float = JOB_INTERVAL_SECONDS
    # Up to this fraction of the sleep is taken off at random, so instances do not poll in lockstep: a tick may come
    # early, never late (seed 000's SLO: an item expires by its deadline + the interval + one cycle).
    jitter_fraction: float = 0.1
    # Wake this long after a deadline, so the item is strictly due (PendingExpiresAt < AsOf) when we look.
    deadline_slack_seconds: float = 0.05
    # Never sleep less than this between cycles that found nothing (guards against a busy loop).
    min_sleep_seconds: float = 0.02
    # After a failed cycle (infrastructure error), wait this long before the next try, doubling to the interval.
    error_backoff_seconds: float = 1.0
    # While dozing, re-ask the next deadline this often, so one created meanwhile still wakes us; 0 disables.
    due_poll_seconds: float = 1.0


def next_tick(previous_tick: float, interval: float, now: float) -> float:
    """The next tick of the fixed schedule after ``now``; ticks that passed during the cycle are skipped."""
    missed = max(0, int((now - previous_tick) // interval))
    return previous_tick + (missed + 1) * interval


class JobRunner:
    """Runs one job until the stop event is set."""

    def __init__(
        self,
        job: PollingJob,
        config: RunnerConfig,
        stop: threading.Event,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        self._job = job
        self._config = config
        self._stop = stop
        # an operator's pause of the job for the whole cluster (operations.pause): no cycle starts while it holds
        self._paused = paused
        # when the last cycle began (monotonic): an item that fell due after it was invisible to that cycle
        self._cycle_started = time.monotonic()

    def run(self) -> None:
        """Loop until stopped; a failing cycle is logged and retried by a later cycle."""
        log.info("worker started", job=self._job.name, interval_seconds=self._config.interval_seconds)
        # The liveness probe fails when the loop stops turning (a hung call): beats come per cycle and per doze poll.
        liveness.expect_beats_within(max(liveness.DEFAULT_MAX_SILENCE_SECONDS, 3 * self._config.interval_seconds))
        failures = 0
        tick = time.monotonic()
        while not self._stop.is_set():
            liveness.beat()
            if self._paused is not None and self._paused():
                self._stop.wait(min(PAUSE_READ_SECONDS, self._config.interval_seconds))
                continue
            self._cycle_started = time.monotonic()
            try:
                result = self._job.run_once()
            except Exception as exc:
                failures += 1
                delay = self._backoff(failures)
                if database_unreachable(exc):  # the database away: one line per attempt, as at start
                    log.warning(
                        "database unreachable; waiting", job=self._job.name, error=error_text(exc),
                        consecutive_failures=failures, retry_in_seconds=delay,
                    )  # fmt: skip
                elif fault_of(exc) is Fault.INFRASTRUCTURE:  # it answered with its own state: a timeout, a disk full
                    log.warning(
                        "database error; waiting", job=self._job.name, error=error_text(exc),
                        sqlstate=getattr(driver_error(exc), "sqlstate", None), consecutive_failures=failures,
                        retry_in_seconds=delay,
                    )  # fmt: skip
                else:
                    log.exception("job cycle failed", job=self._job.name, consecutive_failures=failures)
                self._stop.wait(delay)
                continue
            failures = 0
            if result.is_full:
                continue  # backlog: the next cycle starts at once (River PR #663)
            tick = next_tick(tick, self._config.interval_seconds, time.monotonic())
            if self._paused is not None and self._paused():
                continue  # paused during the cycle: the doze would outlast the pause's read
            # seed 000 "Max duration": over budget, the tick is skipped and the rest waits for the next one; the
            # deadlines of items already due do not wake it early (they are the rest)
            self._doze(tick, deadlines=not result.budget_exhausted)
        log.info("worker stopped", job=self._job.name)

    def _backoff(self, failures: int) -> float:
        return exponential_backoff(failures, base=self._config.error_backoff_seconds, cap=self._config.interval_seconds)

    def _doze(self, next_tick: float, *, deadlines: bool = True) -> None:
        """Sleep until the tick (jittered early, never late) or (``deadlines``) the next deadline, re-asked every
        poll interval."""
        config = self._config
        until_tick = max(0.0, next_tick - time.monotonic())
        wake_at = time.monotonic() + until_tick * (1 - config.jitter_fraction * random.random())  # noqa: S311
        while not self._stop.is_set():
            until_tick = wake_at - time.monotonic()
            if until_tick <= 0:
                return
            horizon = min(until_tick, config.due_poll_seconds) if config.due_poll_seconds > 0 else until_tick
            liveness.beat()
            if not deadlines:
                self._stop.wait(max(config.min_sleep_seconds, horizon))
                continue
            until_due = self._until_due()
            if until_due is not None and until_due <= 0:
                if -until_due < time.monotonic() - self._cycle_started:
                    # It fell due after the last cycle read AsOf: that cycle could not see it. Go now.
                    return
                # Due before the last cycle began yet not taken: another instance (or an in-flight
                # operation) holds it. Look again after one poll interval rather than spinning on it.
                self._stop.wait(max(config.min_sleep_seconds, horizon))
                return
            if until_due is not None and until_due + config.deadline_slack_seconds <= horizon:
                self._stop.wait(max(config.min_sleep_seconds, until_due + config.deadline_slack_seconds))
                return
            self._stop.wait(max(config.min_sleep_seconds, horizon))

    def _until_due(self) -> float | None:
        try:
            return self._job.seconds_until_next_due()
        except Exception as exc:
            if fault_of(exc) is Fault.INFRASTRUCTURE:  # the next cycle says which
                log.warning("next-deadline query failed", job=self._job.name, error=error_text(exc))
            else:
                log.warning("next-deadline query failed", job=self._job.name, exc_info=True)
            return None
