"""The River-shaped loop every polling job runs in.

A job exposes ``run_once()`` (one cycle, returning its counters) and ``seconds_until_next_due()`` (a cheap
indexed query on the database clock). The runner loops with a stop event: cycles never overlap (one thread,
sequential), a full batch loops at once (backlog), otherwise it sleeps until the next tick or the next
deadline, whichever is sooner, with jitter. A tick that falls inside a long cycle is skipped, not queued.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)


class CycleResult(Protocol):
    """What a cycle reports; ``is_full`` means the batch limit was hit and more work is probably waiting."""

    @property
    def is_full(self) -> bool: ...

    def as_dict(self) -> Mapping[str, int]: ...


class PollingJob(Protocol):
    """A job the runner can drive."""

    name: str

    def run_once(self) -> CycleResult: ...

    def seconds_until_next_due(self) -> float | None: ...


@dataclass(frozen=True)
class RunnerConfig:
    """How the loop paces itself."""

    # Seconds between ticks when there is no nearer deadline (seed 000: 60 s; seed 002: 1 to 5 min).
    interval_seconds: float = 60.0
    # Random fraction of the sleep added or removed, so instances do not poll in lockstep.
    jitter_fraction: float = 0.1
    # Wake this long after a deadline, so the item is strictly due (PendingExpiresAt < AsOf) when we look.
    deadline_slack_seconds: float = 0.05
    # Never sleep less than this between cycles that found nothing (guards against a busy loop).
    min_sleep_seconds: float = 0.02
    # After a failed cycle (infrastructure error), wait this long before the next try, doubling to the interval.
    error_backoff_seconds: float = 1.0


class JobRunner:
    """Runs one job until the stop event is set."""

    def __init__(self, job: PollingJob, config: RunnerConfig, stop: threading.Event) -> None:
        self._job = job
        self._config = config
        self._stop = stop

    def run(self) -> None:
        """Loop until stopped; a failing cycle is logged and retried by a later cycle."""
        failures = 0
        next_tick = time.monotonic()
        while not self._stop.is_set():
            try:
                result = self._job.run_once()
            except Exception:
                failures += 1
                log.exception("job cycle failed", job=self._job.name, consecutive_failures=failures)
                self._stop.wait(self._backoff(failures))
                continue
            failures = 0
            if result.is_full:
                continue  # backlog: the next cycle starts at once (River PR #663)
            next_tick = self._next_tick(next_tick)
            self._stop.wait(self._sleep_seconds(next_tick))

    def _backoff(self, failures: int) -> float:
        return float(min(self._config.interval_seconds, self._config.error_backoff_seconds * 2 ** (failures - 1)))

    def _next_tick(self, previous_tick: float) -> float:
        """The next tick of the fixed schedule; ticks that passed during the cycle are skipped."""
        interval = self._config.interval_seconds
        now = time.monotonic()
        missed = max(0, int((now - previous_tick) // interval))
        return previous_tick + (missed + 1) * interval

    def _sleep_seconds(self, next_tick: float) -> float:
        until_tick = max(0.0, next_tick - time.monotonic())
        jitter = until_tick * self._config.jitter_fraction * (2 * random.random() - 1)  # noqa: S311
        sleep = until_tick + jitter
        try:
            until_due = self._job.seconds_until_next_due()
        except Exception:
            log.warning("next-deadline query failed", job=self._job.name, exc_info=True)
            until_due = None
        if until_due is not None:
            sleep = min(sleep, max(0.0, until_due) + self._config.deadline_slack_seconds)
        return max(self._config.min_sleep_seconds, sleep)
