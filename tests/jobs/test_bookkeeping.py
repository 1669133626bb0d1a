"""The shared job bookkeeping against a real PostgreSQL: poison items and their pass, cycles, backlog, deadlines."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now
from pin.jobs import bookkeeping

pytestmark = pytest.mark.integration

JOB = "test-job"


@pytest.fixture
def items(pool: ConnectionPool[Conn]) -> list[uuid.UUID]:
    """A throwaway job table of 5 due items."""
    ids = [uuid.uuid4() for _ in range(5)]
    with pool.connection() as conn:
        conn.execute("CREATE TABLE public.test_item (id uuid PRIMARY KEY, due_at timestamptz NOT NULL)")
        for position, item_id in enumerate(ids):
            conn.execute(
                "INSERT INTO public.test_item VALUES (%s, clock_timestamp() - %s)",
                (item_id, timedelta(minutes=10 - position)),
            )
    return ids


def _claimable(conn: Conn, *, poison: bool = False) -> list[uuid.UUID]:
    """The items a claim's pass sees: those without a failure record, or (``poison``) only those with one."""
    # the predicate each job's claim of a pass writes (expiry.sql)
    which = (
        "" if poison else "NOT "
    ) + "EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = i.id)"
    rows = conn.execute(
        f"SELECT i.id FROM public.test_item AS i WHERE i.due_at <= %(as_of)s AND {which} ORDER BY i.due_at",
        {"job": JOB, "as_of": database_now(conn)},
    ).fetchall()
    return [row["id"] for row in rows]  # type: ignore[misc]


def test_a_failed_item_counts_its_attempts_moves_to_the_poison_pass_and_is_cleared_on_success(
    pool: ConnectionPool[Conn], items: list[uuid.UUID]
) -> None:
    poison = items[0]
    with pool.connection() as conn:
        attempts = [
            bookkeeping.item_failure_record(conn, JOB, poison, ValueError(f"bad {n}\nsecond line")) for n in range(3)
        ]
        row = conn.execute("SELECT attempts, last_error FROM jobs.item_failure").fetchone()
        assert attempts == [1, 2, 3]
        assert row == {"attempts": 3, "last_error": "ValueError: bad 2"}  # type and first line only
        assert bookkeeping.poison_count(conn, JOB) == 1
        assert _claimable(conn) == items[1:]  # the first pass: the rest is not held up behind it
        assert _claimable(conn, poison=True) == [poison]  # the second pass: still tried, every cycle

        assert bookkeeping.item_failure_clear(conn, JOB, [poison]) == 1
        assert _claimable(conn) == items
        assert bookkeeping.poison_count(conn, JOB) == 0


def test_failures_are_per_job_and_pruned_when_the_item_no_longer_waits(
    pool: ConnectionPool[Conn], items: list[uuid.UUID]
) -> None:
    with pool.connection() as conn:
        bookkeeping.item_failure_record(conn, "other-job", items[0], RuntimeError("x"))
        assert _claimable(conn) == items  # another job's failure does not make it poison here
        assert bookkeeping.poison_count(conn, JOB) == 0
        bookkeeping.item_failure_record(conn, JOB, items[1], RuntimeError("x"))
        conn.execute("DELETE FROM public.test_item WHERE id = %s", (items[1],))

        pruned = bookkeeping.item_failure_prune(
            conn, JOB, "EXISTS (SELECT 1 FROM public.test_item AS i WHERE i.id = f.item_id)"
        )

        assert pruned == 1
        remaining = conn.execute("SELECT job FROM jobs.item_failure").fetchall()
        assert remaining == [{"job": "other-job"}]


def test_backlog_count_is_bounded(pool: ConnectionPool[Conn], items: list[uuid.UUID]) -> None:
    with pool.connection() as conn:
        assert bookkeeping.backlog_count(conn, "SELECT 1 FROM public.test_item") == 5
        assert bookkeeping.backlog_count(conn, "SELECT 1 FROM generate_series(1, 20000)") == bookkeeping.BACKLOG_CAP


def test_seconds_until_measures_on_the_database_clock(pool: ConnectionPool[Conn]) -> None:
    with pool.connection() as conn:
        soon = bookkeeping.seconds_until(conn, "SELECT clock_timestamp() + interval '30 seconds' AS at")
        none = bookkeeping.seconds_until(conn, "SELECT NULL::timestamptz AS at")
        empty = bookkeeping.seconds_until(conn, "SELECT clock_timestamp() AS at WHERE false")
    assert soon is not None
    assert 29 < soon <= 30
    assert none is None
    assert empty is None


def test_cycle_record_keeps_the_last_cycle_per_instance(pool: ConnectionPool[Conn]) -> None:
    with pool.connection() as conn:
        now = database_now(conn)
        for run, ok in ((uuid.uuid4(), True), (uuid.uuid4(), False)):
            bookkeeping.cycle_record(
                conn, job=JOB, instance="host:1", run_id=run, as_of=now, duration_ms=7, counters={"A": 1}, succeeded=ok
            )
        bookkeeping.cycle_record(
            conn, job=JOB, instance="host:2", run_id=uuid.uuid4(), as_of=now, duration_ms=1, counters={}, succeeded=True
        )
        rows = conn.execute("SELECT instance, succeeded, counters FROM jobs.cycle ORDER BY instance").fetchall()
    assert rows == [
        {"instance": "host:1", "succeeded": False, "counters": {"A": 1}},
        {"instance": "host:2", "succeeded": True, "counters": {}},
    ]
