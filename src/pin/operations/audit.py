"""The audit trail of operator actions (``operations.audit``): who did what to which target, when, and why.

Append-only (a trigger refuses an update or a delete). `pin dlq park` records here; the console records its
replays, discards, pauses and resumes the same way. A target names identifiers only (group, topic, partition,
offset, key, a filter), never a payload; the reason is required.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from pin.db import Conn, load_queries

_QUERIES = load_queries(__package__)
AUDIT_RECORD = _QUERIES["audit_record"]
AUDIT_RECENT = _QUERIES["audit_recent"]

# The actions recorded so far (dotted: what, then the verb).
DLQ_PARK = "dlq.park"


class AuditError(ValueError):
    """An action that cannot be recorded as given (no reason, no actor): refused before anything is done."""


@dataclass(frozen=True)
class AuditRecord:
    """One recorded operator action."""

    id: int
    # the database clock's time of the action
    at: datetime
    actor: str
    action: str
    # identifiers only (group, topic, partition, offset, key, filter), and how many of what it touched
    target: Mapping[str, Any]
    counts: Mapping[str, Any]
    reason: str

    def as_json(self) -> dict[str, Any]:
        """The record as a JSON object (for `--json` outputs and the console)."""
        return {
            "id": self.id, "at": self.at.isoformat(), "actor": self.actor, "action": self.action,
            "target": dict(self.target), "counts": dict(self.counts), "reason": self.reason,
        }  # fmt: skip


def default_actor() -> str:
    """Who runs a command when it is not told: the OS user."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return "unknown"


def record(
    conn: Conn,
    *,
    actor: str,
    action: str,
    target: Mapping[str, Any],
    reason: str,
    counts: Mapping[str, Any] | None = None,
) -> AuditRecord:
    """Record one action in ``conn``'s transaction (so the action and its record commit together)."""
    if not reason.strip():
        raise AuditError("a reason is required")
    if not actor.strip():
        raise AuditError("an actor is required")
    who, why, what, how_many = actor.strip(), reason.strip(), dict(target), dict(counts or {})
    params = {"actor": who, "action": action, "target": Jsonb(what), "counts": Jsonb(how_many), "reason": why}
    row = conn.execute(AUDIT_RECORD, params).fetchone()
    assert row is not None
    return AuditRecord(
        id=int(str(row["id"])), at=_time(row["at"]), actor=who, action=action, target=what, counts=how_many,
        reason=why,
    )  # fmt: skip


def recent(conn: Conn, *, limit: int = 100, action: str | None = None) -> list[AuditRecord]:
    """The latest ``limit`` actions (of ``action`` only, when given), newest first."""
    rows = conn.execute(AUDIT_RECENT, {"limit": max(1, limit), "action": action}).fetchall()
    return [_record(row) for row in rows]


def _record(row: Mapping[str, object]) -> AuditRecord:
    return AuditRecord(
        id=int(str(row["id"])), at=_time(row["at"]), actor=str(row["actor"]), action=str(row["action"]),
        target=_object(row["target"]), counts=_object(row["counts"]), reason=str(row["reason"]),
    )  # fmt: skip


def _time(value: object) -> datetime:
    assert isinstance(value, datetime)
    return value


def _object(value: object) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}
