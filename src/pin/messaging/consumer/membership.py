"""A consumer instance's membership of its group, recorded in the database (``messaging.consumer_member``).

The embedded broker answers DescribeGroups with no members and state Unknown, so the broker cannot say that a group
is wedged (members, and no assignment); each instance says it here instead, and `pin status` reads it. The loop
calls :meth:`Membership.beat` once per poll: it costs a clock comparison, and a statement only once per heartbeat
interval or after a rebalance callback changed the assignment (never per message). A failure to write is logged and
tried again at the next beat: it never stops the consumer.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.db import Conn, load_queries

_QUERIES = load_queries(__package__)
MEMBER_BEAT = _QUERIES["member_beat"]
MEMBER_LEAVE = _QUERIES["member_leave"]
MEMBERS_PRUNE = _QUERIES["members_prune"]

# A row whose heartbeat is older than this many heartbeat intervals is not a member (a killed instance).
STALE_AFTER_BEATS = 3


def member_id() -> str:
    """This instance in its group's rows: host:pid (no PII)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Membership:
    """One instance's row: upserted on the heartbeat interval and when its partition count changed."""

    def __init__(
        self,
        *,
        group: str,
        pool: ConnectionPool[Conn],
        interval: float,
        db_timeout: float,
        log: Any,
        member: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group = group
        self.member = member or member_id()
        self._pool = pool
        self._interval = interval
        self._db_timeout = db_timeout
        self._log = log
        self._clock = clock
        self._written: int | None = None  # the partition count last written (None: not yet, or the write failed)
        self._next = 0.0

    def beat(self, partitions: int) -> None:
        """Write the row if the interval passed or the count changed since the last write; else nothing."""
        now = self._clock()
        if partitions == self._written and now < self._next:
            return
        self._next = now + self._interval
        first = self._written is None
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn, conn.transaction():
                if first:
                    conn.execute(MEMBERS_PRUNE, {"group": self.group})
                conn.execute(MEMBER_BEAT, self._params(partitions))
        except (psycopg.Error, PoolTimeout) as exc:
            self._written = None
            self._log.warning("group membership not recorded", error_type=type(exc).__name__)
            return
        self._written = partitions

    def leave(self) -> None:
        """The instance stopped: its row goes (best effort; a row left behind goes stale)."""
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                conn.execute(MEMBER_LEAVE, {"group": self.group, "member": self.member})
        except (psycopg.Error, PoolTimeout) as exc:
            self._log.warning("group membership not removed", error_type=type(exc).__name__)

    def _params(self, partitions: int) -> dict[str, object]:
        return {
            "group": self.group,
            "member": self.member,
            "partitions": partitions,
            "stale_after_seconds": STALE_AFTER_BEATS * self._interval,
        }
