"""Bookkeeping every polling job shares: poison items, cycle records, bounded backlog counts, next deadlines.

Generic over a job name and an item id (a uuid), so that appointment-timeout and expire-promotions use the
same code. Nothing here commits: every function runs in the caller's transaction, so the caller decides the
consistency boundary (expire-promotions records a poison item inside its batch transaction, after rolling back
to the item's savepoint; a per-item job records it in a short transaction of its own after the rollback).

Poison items (research/skiplocked.md, "poison rows"; oban #1498): an item whose processing failed is written to
``jobs.item_failure`` with ``next_attempt_at = now + backoff`` (exponential, capped). The claim query excludes it
until then with :func:`not_backing_off`, *inside* the locking subquery, so it never occupies the head of the
order while due items behind it wait. A success clears the row (:func:`item_failure_clear`).

Usage in a claim (``p`` is the alias of the job's table; the statement must bind ``%(job)s`` and ``%(as_of)s``)::

    WHERE p.status = 'Active' AND p.ends_at <= %(as_of)s AND {not_backing_off("p")}
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

import psycopg

Conn = psycopg.Connection[dict[str, object]]

# Backlog gauges count at most this many rows (a bounded index scan, never a table count; alert threshold 100).
BACKLOG_CAP = 10_001
# The longest a poison item is left alone between attempts.
MAX_BACKOFF = timedelta(hours=1)


def not_backing_off(alias: str, id_column: str = "id", as_of: str = "%(as_of)s") -> str:
    """SQL predicate: the item ``alias.id_column`` has no failure whose next attempt is after ``as_of``.

    The statement must bind ``%(job)s`` (the job name) and, with the default ``as_of``, ``%(as_of)s`` (the
    cycle's AsOf); pass ``as_of="clock_timestamp()"`` outside a cycle.
    """
    return (
        "NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f"
        f" WHERE f.job = %(job)s AND f.item_id = {alias}.{id_column} AND f.next_attempt_at > {as_of})"
    )


def backoff_delay(attempts: int, base: timedelta, cap: timedelta = MAX_BACKOFF) -> timedelta:
    """The wait after the ``attempts``-th consecutive failure: base, 2 x base, 4 x base, ... at most ``cap``."""
    exponent = min(max(attempts, 1) - 1, 30)  # 2**30 x any sane base is far beyond the cap
    delay: timedelta = base * (2**exponent)
    return min(cap, delay)


def item_failure_record(conn: Conn, job: str, item_id: uuid.UUID, error: BaseException, *, base: timedelta) -> int:
    """Record one more failure of an item (database clock) and push its next attempt back; returns the attempts."""
    row = conn.execute(
        """
        INSERT INTO jobs.item_failure AS f (job, item_id, attempts, last_error, last_failed_at, next_attempt_at)
        VALUES (%(job)s, %(item_id)s, 1, %(error)s, statement_timestamp(), statement_timestamp() + %(first)s)
        ON CONFLICT (job, item_id) DO UPDATE
           SET attempts = f.attempts + 1,
               last_error = excluded.last_error,
               -- one instant for both (clock_timestamp() twice differs by microseconds): delay is exact
               last_failed_at = statement_timestamp(),
               next_attempt_at = statement_timestamp()
                   + least(%(cap)s, %(first)s * power(2, least(f.attempts, 30)))
        RETURNING attempts
        """,
        {
            "job": job,
            "item_id": item_id,
            "error": describe_error(error),
            "first": backoff_delay(1, base),
            "cap": MAX_BACKOFF,
        },
    ).fetchone()
    assert row is not None
    attempts = row["attempts"]
    assert isinstance(attempts, int)
    return attempts


def item_failure_clear(conn: Conn, job: str, item_ids: Iterable[uuid.UUID]) -> int:
    """Forget the failures of items that finally succeeded; returns how many rows went."""
    ids = list(item_ids)
    if not ids:
        return 0
    cursor = conn.execute(
        "DELETE FROM jobs.item_failure WHERE job = %s AND item_id = ANY(%s)",
        (job, ids),
    )
    return cursor.rowcount


def item_failure_prune(conn: Conn, job: str, still_pending_sql: str) -> int:
    """Delete the failures of items that are no longer waiting (cancelled, or finished another way).

    ``still_pending_sql`` is a predicate over ``f.item_id`` that is true while the item still waits, e.g.
    ``EXISTS (SELECT 1 FROM promotion.purchase p WHERE p.id = f.item_id AND p.status = 'Active')``.
    """
    cursor = conn.execute(
        f"DELETE FROM jobs.item_failure AS f WHERE f.job = %(job)s AND NOT ({still_pending_sql})",
        {"job": job},
    )
    return cursor.rowcount


def seconds_until(conn: Conn, deadline_sql: str, params: Mapping[str, object] | None = None) -> float | None:
    """Seconds from the database clock to the deadline a query returns (column ``at``); None when there is none.

    The pattern behind every job's ``seconds_until_next_due()``: one cheap indexed query (``ORDER BY <deadline>
    LIMIT 1`` over the job's partial index) measured against ``clock_timestamp()`` on the server, so the sleep is
    a duration on the one shared clock (SPEC section 4), not a comparison with this machine's clock.
    """
    row = conn.execute(
        f"SELECT EXTRACT(EPOCH FROM (d.at - clock_timestamp()))::float8 AS seconds FROM ({deadline_sql}) AS d",
        params or {},
    ).fetchone()
    if row is None or row["seconds"] is None:
        return None
    seconds = row["seconds"]
    assert isinstance(seconds, float)
    return seconds


def backlog_count(conn: Conn, due_sql: str, params: Mapping[str, object] | None = None) -> int:
    """How many rows ``due_sql`` (a SELECT over the job's partial index) returns, counting at most BACKLOG_CAP."""
    row = conn.execute(
        f"SELECT count(*) AS n FROM ({due_sql} LIMIT {BACKLOG_CAP}) AS due",
        params or {},
    ).fetchone()
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
        """
        INSERT INTO jobs.cycle AS c (job, instance, run_id, as_of, duration_ms, counters, succeeded)
        VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)
        ON CONFLICT (job, instance) DO UPDATE
           SET run_id = excluded.run_id, as_of = excluded.as_of, finished_at = clock_timestamp(),
               duration_ms = excluded.duration_ms, counters = excluded.counters, succeeded = excluded.succeeded
        """,
        (job, instance, run_id, as_of, duration_ms, json.dumps(dict(counters)), succeeded),
    )


def describe_error(error: BaseException) -> str:
    """What is stored about a failure: the exception type and its first line, bounded (ids only, never PII)."""
    first_line = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first_line}"[:500]
