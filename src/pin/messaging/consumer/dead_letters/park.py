"""`pin dlq park`: an operator moves a held message to its group's dead letters, on the record.

A message that passed its contract and fails is retried without limit (pin.faults.TREATMENTS); when an operator
decides it will never apply, they park it: its row of ``messaging.held_message`` is marked with a new record of
``operations.audit`` (who, when, why, what), in one transaction. The consumer holding it finds the mark at the
message's next attempt and dead-letters it (error type ``ParkedByOperator``, naming the audit record), and its
partition (or key) goes on. The command waits a while for that to happen and says whether it did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg

from pin.db import ConnectionPolicy, connect, load_queries
from pin.observability.logging import error_text
from pin.operations import audit
from pin.settings import ConfigurationError, Settings

# held_to_park, held_park, held_parked_left
_QUERIES = load_queries(__package__)


class ParkError(RuntimeError):
    """Nothing to park as asked, or the database refused: one line for the operator."""


@dataclass(frozen=True)
class ParkTarget:
    """Which held message(s): a group's topic, and a partition and offset, or a key (with or without a partition)."""

    group: str
    topic: str
    # with offset: one message; with key: the held message of that key (in this partition only, when given)
    partition: int | None = None
    offset: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.offset is None) == (self.key is None):
            raise ConfigurationError("pin dlq park: name the message by --offset (with --partition) or by --key")
        if self.offset is not None and self.partition is None:
            raise ConfigurationError("pin dlq park: --offset needs --partition")

    def as_json(self) -> dict[str, Any]:
        """The audit record's target: identifiers only."""
        found = {"group": self.group, "topic": self.topic, "partition": self.partition, "offset": self.offset}
        return {name: value for name, value in {**found, "key": self.key}.items() if value is not None}


@dataclass(frozen=True)
class Parked:
    """What a park did: its audit record, the messages it marked, and how many are still held after the wait."""

    record: audit.AuditRecord
    messages: list[dict[str, Any]]
    still_held: int

    def as_json(self) -> dict[str, Any]:
        """The command's output line."""
        return {
            "auditId": self.record.id, "group": self.record.target["group"], "parked": len(self.messages),
            "deadLettered": len(self.messages) - self.still_held, "stillHeld": self.still_held,
            "messages": self.messages,
        }  # fmt: skip


def park(settings: Settings, target: ParkTarget, *, actor: str, reason: str, wait_seconds: float = 60.0) -> Parked:
    """Mark the held messages ``target`` names and record the action; then wait (at most ``wait_seconds``) for
    their holders to dead-letter them. :class:`ParkError` when none is held as named."""
    if not reason.strip():
        raise ConfigurationError("pin dlq park: --reason must say why")
    params = {
        "group": target.group, "topic": target.topic, "partition": target.partition, "offset": target.offset,
        "key": target.key.encode() if target.key is not None else None,
    }  # fmt: skip
    try:
        with _connect(settings) as conn:
            with conn.transaction():
                rows = conn.execute(_QUERIES["held_to_park"], params).fetchall()
                if not rows:
                    raise ParkError(f"pin dlq park: no message of {target.group} is held as named (applied already?)")
                record = audit.record(
                    conn, actor=actor, action=audit.DLQ_PARK, target=target.as_json(), reason=reason,
                    counts={"held": len(rows)},
                )  # fmt: skip
                conn.execute(
                    _QUERIES["held_park"],
                    {
                        "audit_id": record.id, "group": target.group, "topic": target.topic,
                        "partitions": [row["partition"] for row in rows], "offsets": [row["offset"] for row in rows],
                    },
                )  # fmt: skip
            left = _wait(conn, record.id, wait_seconds)
    except psycopg.Error as exc:
        raise ParkError(f"pin dlq park: {error_text(exc)}") from exc
    return Parked(record, [_summary(row) for row in rows], left)


def _wait(conn: psycopg.Connection[dict[str, object]], audit_id: int, wait_seconds: float) -> int:
    """How many of the park's messages are still held once none is, or after ``wait_seconds``."""
    deadline = time.monotonic() + wait_seconds
    while True:
        row = conn.execute(_QUERIES["held_parked_left"], {"audit_id": audit_id}).fetchone()
        conn.commit()
        left = int(str(row["held"])) if row else 0
        if left == 0 or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)


def _summary(row: dict[str, object]) -> dict[str, Any]:
    since = row["since"]
    return {
        "topic": row["topic"], "partition": row["partition"], "offset": row["offset"],
        "messageId": str(row["message_id"]) if row["message_id"] is not None else None, "member": row["member"],
        "fault": row["fault"], "errorType": row["error_type"], "attempts": row["attempts"],
        "heldSince": since.isoformat() if hasattr(since, "isoformat") else None,
    }  # fmt: skip


def _connect(settings: Settings) -> psycopg.Connection[dict[str, object]]:
    try:
        return connect(settings.database.require_url(), policy=ConnectionPolicy.from_settings(settings, "command"))
    except psycopg.Error as exc:
        raise ParkError(f"pin dlq park: cannot reach the database: {error_text(exc)}") from exc
