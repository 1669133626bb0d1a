"""The probes of a long-running role (worker, relay, consumer) on ``PIN_METRICS_PORT`` (docs/operations.md, "Probes").

Liveness: :func:`beat` once per turn of its loop; ``GET /healthz/liveness`` answers 503 once the loop is silent too
long. Readiness: the role registers a check per dependency (:func:`add_readiness_check`: its database, its broker);
``GET /readyz`` answers 503 while one of them fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pin.observability.logging import error_text

DEFAULT_MAX_SILENCE_SECONDS = 300.0


@dataclass(frozen=True)
class LivenessReport:
    """What the probe answers."""

    alive: bool
    status: str  # "starting", "alive" or "stalled"
    seconds_since_beat: float | None
    max_silence_seconds: float
    beats: int

    def as_dict(self) -> dict[str, object]:
        """The JSON body of the probe (camelCase like the API)."""
        age = None if self.seconds_since_beat is None else round(self.seconds_since_beat, 3)
        return {
            "status": self.status,
            "secondsSinceBeat": age,
            "maxSilenceSeconds": self.max_silence_seconds,
            "beats": self.beats,
        }


class Heartbeat:
    """Thread-safe record of a loop's last turn, on the monotonic clock (wall-clock jumps do not matter)."""

    def __init__(
        self, max_silence_seconds: float = DEFAULT_MAX_SILENCE_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._beats = 0
        self._max_silence = max_silence_seconds

    def beat(self) -> None:
        """The loop turned."""
        with self._lock:
            self._last = self._clock()
            self._beats += 1

    def expect_beats_within(self, seconds: float) -> None:
        """Allow this much silence between beats before the probe fails (longer than the longest sleep)."""
        if seconds <= 0:
            raise ValueError("the allowed silence must be positive")
        with self._lock:
            self._max_silence = seconds

    def report(self) -> LivenessReport:
        """The probe's verdict now."""
        with self._lock:
            last, beats, max_silence = self._last, self._beats, self._max_silence
        if last is None:
            return LivenessReport(True, "starting", None, max_silence, beats)
        age = self._clock() - last
        alive = age <= max_silence
        return LivenessReport(alive, "alive" if alive else "stalled", age, max_silence, beats)


# One heartbeat per process: a process runs one role.
_HEARTBEAT = Heartbeat()


def beat() -> None:
    """Record that this role's loop turned (call once per cycle or poll)."""
    _HEARTBEAT.beat()


def expect_beats_within(seconds: float) -> None:
    """Set the silence the probe tolerates, e.g. three intervals of a polling worker."""
    _HEARTBEAT.expect_beats_within(seconds)


def report() -> LivenessReport:
    """This process's liveness now."""
    return _HEARTBEAT.report()


def heartbeat() -> Heartbeat:
    """The process-wide heartbeat (for the metrics server and tests)."""
    return _HEARTBEAT


# A readiness check: returns when its dependency answers, raises (with why) when it does not.
ReadinessCheck = Callable[[], object]


@dataclass(frozen=True)
class ReadinessReport:
    """What the readiness probe answers: each dependency's verdict ("ok" or why not)."""

    ready: bool
    checks: dict[str, str]

    def as_dict(self) -> dict[str, object]:
        """The JSON body of the probe."""
        return {"status": "ready" if self.ready else "not-ready", "checks": self.checks}


class Readiness:
    """The dependencies a role needs to do its work, checked when the probe asks (each check bounds its own wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checks: dict[str, ReadinessCheck] = {}

    def add(self, name: str, check: ReadinessCheck) -> None:
        """Check ``name`` (``database``, ``broker``) on every probe."""
        with self._lock:
            self._checks[name] = check

    def report(self) -> ReadinessReport:
        """Run every check now; ready when all pass (a role with no check registered is ready)."""
        with self._lock:
            checks = dict(self._checks)
        verdicts: dict[str, str] = {}
        for name, check in checks.items():
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - any failure means the dependency is not there for this role
                verdicts[name] = f"unreachable: {error_text(exc)}"
            else:
                verdicts[name] = "ok"
        return ReadinessReport(all(verdict == "ok" for verdict in verdicts.values()), verdicts)


# One readiness per process, like the heartbeat.
_READINESS = Readiness()


def add_readiness_check(name: str, check: ReadinessCheck) -> None:
    """Make the readiness probe check ``name`` with ``check``."""
    _READINESS.add(name, check)


def readiness() -> Readiness:
    """The process-wide readiness (for the metrics server and tests)."""
    return _READINESS
