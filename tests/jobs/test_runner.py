"""The JobRunner loop with a scripted job (pure pacing logic; the jobs themselves are tested on PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import errors as e
from structlog.testing import capture_logs

from pin.jobs import runner
from pin.jobs.runner import JobRunner, RunnerConfig

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class _Result:
    is_full: bool = False
    budget_exhausted: bool = False

    def as_dict(self) -> Mapping[str, int]:
        return {}


class _ScriptedJob:
    """Records when each cycle ran; ``until_due`` answers the next-deadline question."""

    name = "scripted"

    def __init__(
        self,
        stop: threading.Event,
        *,
        results: list[_Result | Exception] | None = None,
        until_due: Callable[[], float | None] = lambda: None,
        max_cycles: int = 1000,
    ) -> None:
        self.stop = stop
        self.results = results or []
        self.until_due = until_due
        self.max_cycles = max_cycles
        self.cycles: list[float] = []
        self.due_queries = 0

    def run_once(self) -> _Result:
        self.cycles.append(time.monotonic())
        if len(self.cycles) >= self.max_cycles:
            self.stop.set()
        outcome = self.results.pop(0) if self.results else _Result()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def seconds_until_next_due(self) -> float | None:
        self.due_queries += 1
        return self.until_due()


def _run(job: _ScriptedJob, config: RunnerConfig, *, stop_after: float) -> threading.Thread:
    thread = threading.Thread(target=JobRunner(job, config, job.stop).run)
    thread.start()
    threading.Timer(stop_after, job.stop.set).start()
    return thread


def test_a_full_batch_loops_at_once_then_the_runner_sleeps_to_the_tick() -> None:
    stop = threading.Event()
    job = _ScriptedJob(stop, results=[_Result(is_full=True), _Result(is_full=True), _Result()])
    thread = _run(job, RunnerConfig(interval_seconds=30, jitter_fraction=0), stop_after=0.5)
    thread.join(5)

    assert len(job.cycles) == 3  # two full batches back to back, then one not full, then a 30 s doze
    assert job.cycles[2] - job.cycles[0] < 2.0  # far below the 30 s interval (loose: CI machines are busy)


def test_a_near_deadline_wakes_the_runner_before_the_tick() -> None:
    stop = threading.Event()
    started = time.monotonic()
    job = _ScriptedJob(stop, until_due=lambda: max(0.001, 0.3 - (time.monotonic() - started)), max_cycles=2)
    thread = _run(job, RunnerConfig(interval_seconds=60, deadline_slack_seconds=0.01), stop_after=5)
    thread.join(6)

    assert len(job.cycles) == 2
    assert 0.25 < job.cycles[1] - started < 2.0  # at the deadline, not at the 60 s tick


def test_a_deadline_born_while_dozing_is_seen_at_the_next_poll() -> None:
    stop = threading.Event()
    started = time.monotonic()

    def until_due() -> float | None:  # nothing for 0.5 s, then a deadline 0.2 s after that appears
        return None if time.monotonic() - started < 0.5 else 0.7 - (time.monotonic() - started)

    job = _ScriptedJob(stop, until_due=until_due, max_cycles=2)
    thread = _run(job, RunnerConfig(interval_seconds=60, due_poll_seconds=0.2, jitter_fraction=0), stop_after=5)
    thread.join(6)

    assert len(job.cycles) == 2
    assert 0.65 < job.cycles[1] - started < 2.0  # seen at a poll, not at the 60 s tick


def test_an_overdue_item_the_cycle_could_not_take_is_retried_per_poll_not_spun_on() -> None:
    stop = threading.Event()
    job = _ScriptedJob(stop, until_due=lambda: -5.0)  # due, yet locked elsewhere
    thread = _run(job, RunnerConfig(interval_seconds=60, due_poll_seconds=0.2), stop_after=1.0)
    thread.join(5)

    assert 2 <= len(job.cycles) <= 8  # about one cycle per poll interval (5), not hundreds


def test_a_cycle_over_its_budget_waits_for_the_next_tick_even_with_items_overdue() -> None:
    """Seed 000 "Max duration": over budget, the tick is skipped and the rest waits for the next one (the overdue
    rest does not wake the runner per poll, as an item locked elsewhere would)."""
    stop = threading.Event()
    exhausted = _Result(budget_exhausted=True)  # never full: the jobs' results say so (is_full is False then)
    job = _ScriptedJob(stop, results=[exhausted, exhausted], until_due=lambda: -5.0)
    config = RunnerConfig(interval_seconds=0.8, due_poll_seconds=0.1, jitter_fraction=0)
    thread = _run(job, config, stop_after=1.2)
    thread.join(5)

    assert job.due_queries == 0  # the doze did not look at the deadlines
    assert len(job.cycles) == 2  # the exhausted one, then one at the next tick (0.8 s), not one per poll
    assert 0.7 < job.cycles[1] - job.cycles[0] < 1.1


@pytest.mark.parametrize("draw", [0.0, 0.999])
def test_the_default_jitter_brings_a_tick_early_never_late(draw: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 000's SLO (expired by its deadline + the interval + one cycle) holds with the default jitter: at either
    extreme of its random draw, the tick after a cycle over its budget (which no deadline wakes) comes at most 10 %
    early and never after the tick."""
    monkeypatch.setattr(runner.random, "random", lambda: draw)
    stop = threading.Event()
    exhausted = _Result(budget_exhausted=True)
    job = _ScriptedJob(stop, results=[exhausted, exhausted], max_cycles=2)
    interval = 2.0
    thread = _run(job, RunnerConfig(interval_seconds=interval, due_poll_seconds=0.05), stop_after=5)
    thread.join(6)

    assert RunnerConfig().jitter_fraction == 0.1
    assert len(job.cycles) == 2
    gap = job.cycles[1] - job.cycles[0]
    assert interval * (1 - 0.1) - 0.05 < gap < interval + 0.1  # the old +-10 % came up to 0.2 s late here


def test_a_failing_cycle_backs_off_and_the_loop_goes_on() -> None:
    stop = threading.Event()
    job = _ScriptedJob(stop, results=[RuntimeError("database down"), _Result()], max_cycles=2)
    thread = _run(job, RunnerConfig(interval_seconds=60, error_backoff_seconds=0.2), stop_after=5)
    thread.join(6)

    assert len(job.cycles) == 2
    assert 0.19 < job.cycles[1] - job.cycles[0] < 2.0  # the backoff, not the 60 s interval


@pytest.mark.parametrize(
    ("error", "event", "sqlstate"),
    [
        (psycopg.OperationalError("connection refused"), "database unreachable; waiting", None),
        (e.QueryCanceled("canceling statement due to statement timeout"), "database error; waiting", "57014"),
        (e.DiskFull("could not extend file"), "database error; waiting", "53100"),
        (RuntimeError("a bug"), "job cycle failed", None),
    ],
    ids=["unreachable", "statement-timeout", "disk-full", "bug"],
)
def test_a_failed_cycle_s_line_says_what_failed(error: Exception, event: str, sqlstate: str | None) -> None:
    stop = threading.Event()
    job = _ScriptedJob(stop, results=[error], max_cycles=1)
    with capture_logs() as logs:
        JobRunner(job, RunnerConfig(interval_seconds=60, error_backoff_seconds=0.01), stop).run()
    (line,) = [entry for entry in logs if entry["log_level"] in {"warning", "error"}]
    assert line["event"] == event
    assert line.get("sqlstate") == sqlstate


def test_stop_ends_a_doze_at_once() -> None:
    stop = threading.Event()
    job = _ScriptedJob(stop)
    thread = _run(job, RunnerConfig(interval_seconds=60), stop_after=0.2)
    started = time.monotonic()
    thread.join(5)

    assert not thread.is_alive()
    assert time.monotonic() - started < 3.0  # not the 60 s interval
    assert len(job.cycles) == 1


def test_ticks_missed_during_a_long_cycle_are_skipped_not_queued() -> None:
    now = time.monotonic()

    next_tick = runner.next_tick(now - 3.5, 1.0, now)  # the cycle took 3.5 intervals (of 1 s)

    assert now < next_tick <= now + 1.0
