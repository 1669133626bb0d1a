"""Bookkeeping SQL every polling job shares: poison items, cycle records, bounded backlog counts, next deadlines.

Nothing here commits: the caller decides the transaction. Poison items and the two claim passes:
docs/design/poison-items.md; a claim of the first pass has ``AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f
WHERE f.job = %(job)s AND f.item_id = <its item>)``, of the second ``AND EXISTS (...)`` (each job's expiry.sql).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime

from pin.db import Conn, load_queries

_QUERIES = load_queries(__package__)
ITEM_FAILURE_RECORD = _QUERIES["item_failure_record"]
ITEM_FAILURE_CLEAR = _QUERIES["item_failure_clear"]
CYCLE_RECORD = _QUERIES["cycle_record"]
_ITEM_FAILURES_OF_JOB = _QUERIES["item_failures_of_job"]

# Backlog gauges count at most this many rows (a bounded index scan, never a table count; alert threshold 100).
BACKLOG_CAP = 10_001


def item_failure_record(conn: Conn, job: str, item_id: uuid.UUID, error: BaseException) -> int:
    """Record one more failed attempt of an item (database clock); returns its attempts so far."""
    row = conn.execute(
        ITEM_FAILURE_RECORD,
        {"job": job, "item_id": item_id, "error": describe_error(error)},
    ).fetchone()
    assert row is not None
    attempts = row["attempts"]
    assert isinstance(attempts, int)
    return attempts


def poison_count(conn: Conn, job: str) -> int:
    """How many poison items the job has now (its rows of ``jobs.item_failure``), counting at most BACKLOG_CAP."""
    return backlog_count(conn, _ITEM_FAILURES_OF_JOB, {"job": job})


def item_failure_clear(conn: Conn, job: str, item_ids: Iterable[uuid.UUID]) -> int:
    """Forget the failures of items that finally succeeded; returns how many rows went."""
    ids = list(item_ids)
    if not ids:
        return 0
    cursor = conn.execute(ITEM_FAILURE_CLEAR, (job, ids))
    return cursor.rowcount


def item_failure_prune(conn: Conn, job: str, still_pending_sql: str) -> int:
    """Delete the failures of items that are no longer waiting (cancelled, or finished another way).

    ``still_pending_sql`` is a predicate over ``f.item_id`` that is true while the item still waits, e.g.
    ``EXISTS (SELECT 1 FROM promotion.purchase p WHERE p.id = f.item_id AND p.status = 'Active')``.
    """
    cursor = conn.execute(_QUERIES["item_failure_prune"].format(still_pending=still_pending_sql), {"job": job})
    return cursor.rowcount


def seconds_until(conn: Conn, deadline_sql: str, params: Mapping[str, object] | None = None) -> float | None:
    """Seconds from the database clock to the deadline a query returns (column ``at``); None when there is none.

    The pattern behind every job's ``seconds_until_next_due()``: one cheap indexed query (``ORDER BY <deadline>
    LIMIT 1`` over the job's partial index) measured against ``clock_timestamp()`` on the server, so the sleep is
    a duration on the one shared clock (SPEC section 4), not a comparison with this machine's clock.
    """
    row = conn.execute(_QUERIES["seconds_until"].format(deadline=deadline_sql), params or {}).fetchone()
    if row is None or row["seconds"] is None:
        return None
    seconds = row["seconds"]
    assert isinstance(seconds, float)
    return seconds


def backlog_count(conn: Conn, due_sql: str, params: Mapping[str, object] | None = None) -> int:
    """How many rows ``due_sql`` (a SELECT over the job's partial index) returns, counting at most BACKLOG_CAP."""
    row = conn.execute(_QUERIES["backlog_count"].format(due=due_sql, cap=BACKLOG_CAP), params or {}).fetchone()
    assert row is not None
    count = row["n"]
    assert isinstance(count, int)
    return count


def cycle_record(
    conn: Conn,
    *,
    job: str,
    instance: str,
    run_id: uuid.UUID,
    as_of: datetime,
    duration_ms: int,
    counters: Mapping[str, int],
    succeeded: bool,
) -> None:
    """Upsert the last cycle of this job instance into ``jobs.cycle`` (for `pin status` and liveness)."""
    conn.execute(
        CYCLE_RECORD,
        (job, instance, run_id, as_of, duration_ms, json.dumps(dict(counters)), succeeded),
    )


def describe_error(error: BaseException) -> str:
    """What is stored about a failure: the exception type and its first line, bounded (ids only, never PII)."""
    first_line = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first_line}"[:500]
