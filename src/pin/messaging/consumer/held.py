"""The messages a consumer holds in retry, recorded in ``messaging.held_message`` for operators (and a console).

A row per held message: where it was read, its key and MessageId, the last failure (its fault, type and first line,
scrubbed of row values: never a payload), the attempts, since when and until when. Written once per failed attempt
(an upsert that backs off with the retries, so the write rate is bounded by the back-off; not while the database
cannot be reached at all, when the record would only wait for it too), deleted in the
transaction that applies the message (with its effect), after it is dead-lettered, and when this instance gives its
partition up. `pin dlq park` marks a row with its audit record: the holder finds the mark at the message's next
attempt (the release in its transaction, or the upsert after a failure) and dead-letters it. A failure to write is
logged and never stops the consumer: the record is for people, the retry does not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.db import Conn, load_queries
from pin.faults import Fault, database_unreachable
from pin.messaging.consumer.received import Received
from pin.observability.logging import scrub_text

# held_failed, held_release, held_forget, held_forget_partitions, held_prune
_QUERIES = load_queries(__package__)

# The longest error text a row keeps.
_MAX_ERROR = 300


def first_line(exc: BaseException) -> str:
    """The error's first line, bounded, without NUL, row values masked (a driver's DETAIL lines are dropped)."""
    lines = str(exc).replace("\x00", " ").strip().splitlines()
    return scrub_text(lines[0].strip() if lines else "")[:_MAX_ERROR] or type(exc).__name__


@dataclass(frozen=True)
class Park:
    """An operator's park mark found on a held message: its audit record, and the failure it was held with."""

    audit_id: int
    error_type: str
    error: str


class ParkRequested(Exception):  # noqa: N818 - not a failure: the operator's decision, raised to end the attempt
    """Raised in a held message's retry transaction when its row carries a park mark (rolls the attempt back)."""

    def __init__(self, park: Park) -> None:
        super().__init__(f"parked by an operator (audit {park.audit_id})")
        self.park = park


class ParkedByOperator(Exception):  # noqa: N818 - the dead letter's error type: says what happened to the message
    """A held message an operator moved to the dead letters (`pin dlq park`): its dead letter's error."""

    def __init__(self, park: Park) -> None:
        super().__init__(f"parked by an operator (audit {park.audit_id}); last failure {park.error_type}: {park.error}")
        self.park = park


class HeldRecords:
    """One consumer instance's rows of ``messaging.held_message``."""

    def __init__(self, *, group: str, member: str, pool: ConnectionPool[Conn], db_timeout: float, log: Any) -> None:
        self.group = group
        self.member = member
        self._pool = pool
        self._db_timeout = db_timeout
        self._log = log
        # the partitions this instance has written a row of (a revoke or a stop deletes only there)
        self._partitions: set[tuple[str, int]] = set()

    def failed(
        self,
        message: Received,
        *,
        message_id: object | None,
        fault: Fault,
        exc: BaseException,
        attempts: int,
        retry_in: float,
    ) -> Park | None:
        """Record that ``message`` failed its attempt and is held; the park mark on its row, if an operator set one."""
        if database_unreachable(exc):
            return None  # the record would wait for the same database: the retry goes on without it
        params = {
            **self._where(message), "key": message.key, "message_id": message_id, "member": self.member,
            "fault": fault.value, "error_type": type(exc).__name__, "error": first_line(exc), "attempts": attempts,
            "retry_in": retry_in,
        }  # fmt: skip
        self._partitions.add(message.partition_key)
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                row = conn.execute(_QUERIES["held_failed"], params).fetchone()
        except (psycopg.Error, PoolTimeout) as exc_write:
            self._not_recorded("held message not recorded", message, exc_write)
            return None
        audit_id = row["park_audit_id"] if row else None
        if audit_id is None:
            return None
        return Park(int(str(audit_id)), type(exc).__name__, first_line(exc))

    def release(self, conn: Conn, message: Received) -> None:
        """In the message's retry transaction: its row goes with the effect; :class:`ParkRequested` when parked."""
        row = conn.execute(_QUERIES["held_release"], self._where(message)).fetchone()
        if row is not None and row["park_audit_id"] is not None:
            raise ParkRequested(Park(int(str(row["park_audit_id"])), str(row["error_type"]), str(row["error"])))

    def forget(self, message: Received) -> None:
        """``message`` is no longer held (dead-lettered): its row goes (best effort; a row left is pruned later)."""
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                conn.execute(_QUERIES["held_forget"], self._where(message))
        except (psycopg.Error, PoolTimeout) as exc:
            self._not_recorded("held message not removed", message, exc)

    def forget_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """This instance gives ``partitions`` up: its unparked rows of them go (best effort)."""
        keys = sorted(self._partitions.intersection(partitions))
        if not keys:
            return
        self._partitions.difference_update(keys)
        params = {
            "group": self.group, "member": self.member, "topics": [k[0] for k in keys],
            "partitions": [k[1] for k in keys],
        }  # fmt: skip
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                conn.execute(_QUERIES["held_forget_partitions"], params)
        except (psycopg.Error, PoolTimeout) as exc:
            self._log.warning("held messages not removed", error_type=type(exc).__name__, partitions=len(keys))

    def prune(self, conn: Conn) -> int:
        """Rows of messages the group has applied since (a holder killed, its successor applied them at once)."""
        return conn.execute(_QUERIES["held_prune"], {"group": self.group}).rowcount

    def _where(self, message: Received) -> dict[str, object]:
        return {"group": self.group, "topic": message.topic, "partition": message.partition, "offset": message.offset}

    def _not_recorded(self, event: str, message: Received, exc: BaseException) -> None:
        self._log.warning(
            event, topic=message.topic, partition=message.partition, offset=message.offset,
            error_type=type(exc).__name__,
        )  # fmt: skip
