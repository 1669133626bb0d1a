"""Pauses for the whole cluster (``operations.pause``): an operator pauses a worker job or a consumer group, every
instance of it reads the flag within :data:`PAUSE_READ_SECONDS` and stops taking work until it is resumed.

Pausing and resuming record an audit row in the same transaction. A pause already in force keeps its first author
(a second pause is recorded, and changes nothing); resuming what is not paused changes nothing either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import psycopg
from prometheus_client import Gauge
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.db import Conn, load_queries
from pin.operations import audit

_QUERIES = load_queries(__package__)

JOB = "job"
GROUP = "group"
KINDS = (JOB, GROUP)
# How often every instance reads its pause flag: a pause holds cluster-wide within this many seconds (and a bit).
PAUSE_READ_SECONDS = 2.0

# 1 while paused, per kind: the alert rules join them on the label their own metrics carry (unless ... == 1)
PAUSED = {
    JOB: Gauge(
        "pin_worker_paused",
        "1 while an operator has paused this worker job for the whole cluster (operations.pause), else 0; the "
        "worker alerts do not fire while it is 1.",
        ["worker"],
    ),
    GROUP: Gauge(
        "pin_consumer_paused",
        "1 while an operator has paused this consumer group for the whole cluster (operations.pause), else 0; the "
        "consumer alerts do not fire while it is 1.",
        ["group"],
    ),
}


@dataclass(frozen=True)
class Pause:
    """One pause in force: what, by whom, why, since when, and its audit record."""

    kind: str
    name: str
    actor: str
    reason: str
    since: datetime
    audit_id: int


def pause(conn: Conn, *, kind: str, name: str, actor: str, reason: str) -> bool:
    """Pause ``kind`` ``name`` (recorded); True when it was not paused before."""
    record = audit.record(conn, actor=actor, action=f"{kind}.pause", target={kind: name}, reason=reason)
    params = {"kind": kind, "name": name, "actor": record.actor, "reason": record.reason, "audit_id": record.id}
    return conn.execute(_QUERIES["pause_set"], params).fetchone() is not None


def resume(conn: Conn, *, kind: str, name: str, actor: str, reason: str) -> bool:
    """Resume ``kind`` ``name`` (recorded); True when it was paused."""
    audit.record(conn, actor=actor, action=f"{kind}.resume", target={kind: name}, reason=reason)
    return conn.execute(_QUERIES["pause_clear"], {"kind": kind, "name": name}).fetchone() is not None


def pauses(conn: Conn) -> list[Pause]:
    """Every pause in force, the oldest first."""
    return [
        Pause(
            str(r["kind"]),
            str(r["name"]),
            str(r["actor"]),
            str(r["reason"]),
            _time(r["since"]),
            int(str(r["audit_id"])),
        )
        for r in conn.execute(_QUERIES["pause_list"]).fetchall()
    ]


def is_paused(conn: Conn, *, kind: str, name: str) -> bool:
    """Whether ``kind`` ``name`` is paused now."""
    row = conn.execute(_QUERIES["pause_held"], {"kind": kind, "name": name}).fetchone()
    return bool(row and row["paused"])


def _time(value: object) -> datetime:
    assert isinstance(value, datetime)
    return value


class PauseFlag:
    """Whether one job or group is paused, read from the database at most every ``every`` seconds (a failed read
    keeps the last answer: a database outage neither pauses nor resumes anything); exported (:data:`PAUSED`)."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        *,
        kind: str,
        name: str,
        every: float = PAUSE_READ_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._kind = kind
        self._name = name
        self._every = every
        self._clock = clock
        self._next_read = 0.0
        self._paused = False
        self._gauge = PAUSED[kind].labels(name)
        self._gauge.set(0)

    def __call__(self) -> bool:
        """Paused now (as of the last read)."""
        now = self._clock()
        if now >= self._next_read:
            self._next_read = now + self._every
            try:
                with self._pool.connection(timeout=self._every) as conn:
                    self._paused = is_paused(conn, kind=self._kind, name=self._name)
            except (psycopg.Error, PoolTimeout):
                pass  # the last answer holds until the database answers again
            self._gauge.set(1 if self._paused else 0)
        return self._paused
