"""A consumer instance's membership of its group, recorded in the database (``messaging.consumer_member``).

The embedded broker answers DescribeGroups with no members and state Unknown, so the broker cannot say that a group
is wedged (members, and no assignment); each instance says it here instead, and `pin status` and the console read
it: which partitions it holds (as librdkafka's rebalance callbacks gave them), its lanes and what they hold in retry.
The loop calls :meth:`Membership.beat` once per poll: it costs a clock comparison (and a comparison of the set of
partitions), and a statement only once per heartbeat interval or after a rebalance callback changed the assignment
(never per message). What the lanes hold is written with it, as of then: it moves with the heartbeat, not with
every retry. A failure to write is logged and tried again at the next beat: it never stops the consumer.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.db import Conn, load_queries
from pin.messaging.consumer.lanes import Lane, held_in_lanes

_QUERIES = load_queries(__package__)
MEMBER_BEAT = _QUERIES["member_beat"]
MEMBER_LEAVE = _QUERIES["member_leave"]
MEMBERS_PRUNE = _QUERIES["members_prune"]

# A row whose heartbeat is older than this many heartbeat intervals is not a member (a killed instance).
STALE_AFTER_BEATS = 3


# How many instances of each group this process made: the second and later are told apart by a suffix.
_MADE: dict[str, itertools.count[int]] = {}
_MADE_LOCK = threading.Lock()


def member_id(group: str | None = None) -> str:
    """This instance in its group's rows: host:pid (no PII); a second instance of ``group`` in the same process
    (tests run several) is host:pid#2, and so on, so that each keeps a row of its own."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    if group is None:
        return base
    with _MADE_LOCK:
        made = next(_MADE.setdefault(group, itertools.count(1)))
    return base if made == 1 else f"{base}#{made}"


Partition = tuple[str, int]


class Membership:
    """One instance's row: upserted on the heartbeat interval and when its assignment changed."""

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
        self.member = member or member_id(group)
        self._pool = pool
        self._interval = interval
        self._db_timeout = db_timeout
        self._log = log
        self._clock = clock
        # the assignment last written (None: not yet, or the write failed)
        self._written: frozenset[Partition] | None = None
        self._next = 0.0

    def beat(self, assigned: frozenset[Partition], lanes: Sequence[Lane] = ()) -> None:
        """Write the row, with what ``lanes`` hold now, if the interval passed or the assignment changed since the
        last write; else nothing."""
        now = self._clock()
        if now < self._next and (assigned is self._written or assigned == self._written):
            return
        self._next = now + self._interval
        first = self._written is None
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn, conn.transaction():
                if first:
                    conn.execute(MEMBERS_PRUNE, {"group": self.group})
                conn.execute(MEMBER_BEAT, self._params(assigned, lanes))
        except (psycopg.Error, PoolTimeout) as exc:
            self._written = None
            self._log.warning("group membership not recorded", error_type=type(exc).__name__)
            return
        self._written = assigned

    def leave(self) -> None:
        """The instance stopped: its row goes (best effort; a row left behind goes stale)."""
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                conn.execute(MEMBER_LEAVE, {"group": self.group, "member": self.member})
        except (psycopg.Error, PoolTimeout) as exc:
            self._log.warning("group membership not removed", error_type=type(exc).__name__)

    def _params(self, assigned: frozenset[Partition], lanes: Sequence[Lane]) -> dict[str, object]:
        held, held_total = held_in_lanes(list(lanes))
        return {
            "group": self.group,
            "member": self.member,
            "partitions": len(assigned),
            "assignment": Jsonb(assignment_document(assigned)),
            "lanes": len(lanes) or 1,
            "lanes_held": Jsonb(held),
            "lanes_held_total": held_total,
            "stale_after_seconds": STALE_AFTER_BEATS * self._interval,
        }


def assignment_document(assigned: frozenset[Partition]) -> dict[str, list[int]]:
    """The partitions an instance holds as its row records them: each topic's partition numbers, in order (the same
    set gives the same document, which the upsert compares to tell a new assignment)."""
    document: dict[str, list[int]] = {}
    for topic, partition in sorted(assigned):
        document.setdefault(topic, []).append(partition)
    return document
