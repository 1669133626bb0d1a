"""The claim floor of appointment-timeout (docs/design/claims.md, "The claim floor").

Under a held xmin horizon no appointment that left Pending can be vacuumed away, so its entry stays in
ix_appointments_pending_expires_at: a claim that starts at the head steps over every one of them. The floor starts the
fresh pass where this instance last claimed; these tests count the index entries a claim reads (the index's own
statistics, flushed on demand, and EXPLAIN (ANALYZE, BUFFERS)), which no timing enters, and show that no due
appointment is ever skipped, those whose deadline is older than the floor included.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from pin.calendar import expiry
from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.db import Conn, database_now
from pin.jobs.bookkeeping import BACKLOG_CAP
from tests.calendar.worker.factory import db_now, seed_appointments, statuses
from tests.support import deep

INDEX = "ix_appointments_pending_expires_at"
# appointments expired under the held horizon: their dead entries stay at the head of the index
OLD = 1_000 if deep.DEEP else 300


class FakeMonotonic:
    """The floor's clock: moved by the test only."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make_job(pool: ConnectionPool[Conn], clock: FakeMonotonic, **config: Any) -> AppointmentTimeoutJob:
    job = AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(instance="test", **config))
    job.claim_floor.now = clock
    return job


@pytest.fixture
def held_xmin(database_url: str) -> Iterator[int]:
    """`BEGIN; SELECT txid_current();` held for the whole test: vacuum removes nothing younger."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT txid_current()").fetchone()
        assert row is not None
        yield int(row[0])
        conn.rollback()


def _claim_params(as_of: datetime, after: tuple[datetime, uuid.UUID] | None) -> dict[str, object]:
    after_at, after_id = after or (None, None)
    return {
        "as_of": as_of, "after_at": after_at, "after_id": after_id, "job": "appointment-timeout", "lock_cluster": True,
        "poison": False, "failed": [], "passed_over_cap": BACKLOG_CAP,
    }  # fmt: skip


def index_entries_read(database_url: str, sql: str, params: dict[str, object]) -> int:
    """How many entries of the claim index one run of ``sql`` read (pg_stat_user_indexes.idx_tup_read, flushed)."""
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        read = "SELECT idx_tup_read AS n FROM pg_stat_user_indexes WHERE indexrelname = %s"
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        before = conn.execute(read, (INDEX,)).fetchone()
        with conn.transaction(force_rollback=True):
            conn.execute(sql, params).fetchall()
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        after = conn.execute(read, (INDEX,)).fetchone()
    assert before is not None
    assert after is not None
    return int(after["n"]) - int(before["n"])


def index_buffers(database_url: str, sql: str, params: dict[str, object]) -> int:
    """Shared buffers the claim index's scans touched (EXPLAIN (ANALYZE, BUFFERS)), heap fetches included."""
    with psycopg.connect(database_url, row_factory=dict_row) as conn, conn.transaction(force_rollback=True):
        row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params).fetchone()
    assert row is not None
    plan = row["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def walk(node: dict[str, Any]) -> int:
        own = node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
        children = node.get("Plans", [])
        mine = own - sum(c.get("Shared Hit Blocks", 0) + c.get("Shared Read Blocks", 0) for c in children)
        total = mine if node.get("Index Name") == INDEX else 0
        return total + sum(walk(c) for c in children)

    return walk(plan[0]["Plan"])


def expire_all(job: AppointmentTimeoutJob) -> int:
    total = 0
    while (result := job.run_once()).claimed_count:
        total += result.expired_count
    return total


@pytest.mark.deep
def test_under_a_held_xmin_the_claim_reads_from_its_floor_not_from_the_dead_head(
    pool: ConnectionPool[Conn], database_url: str, held_xmin: int
) -> None:
    now = db_now(pool)
    # OLD due deadlines 100 ms apart, expired while the horizon is held: OLD dead index entries
    seed_appointments(pool, OLD, pending_expires_at=now - timedelta(minutes=10), spread=timedelta(milliseconds=100))
    clock = FakeMonotonic()
    job = make_job(pool, clock)
    assert expire_all(job) == OLD
    floor = job.claim_floor.value
    assert floor is not None  # the last claimed deadline less the 5 s margin
    fresh = seed_appointments(pool, 5, pending_expires_at=now - timedelta(minutes=1))
    as_of = db_now(pool)
    claim = expiry.CLAIM_SQL

    from_head = index_entries_read(database_url, claim, _claim_params(as_of, None))
    from_floor = index_entries_read(database_url, claim, _claim_params(as_of, (floor, uuid.UUID(int=0))))

    # from the head: the claim and its passed-over scan each step over the OLD dead entries; from the floor only
    # over the ~50 inside the margin (5 s of deadlines 100 ms apart)
    assert from_head >= OLD
    assert from_floor <= 2 * (50 + 5 + 2)
    buffers_head = index_buffers(database_url, claim, _claim_params(as_of, None))
    buffers_floor = index_buffers(database_url, claim, _claim_params(as_of, (floor, uuid.UUID(int=0))))
    # pages: the heap pages of the dead versions visited, index pages; at the small size (300 dead entries: a handful
    # of pages) the page counts are too few for a ratio, and the entries read above carry the proof
    assert buffers_head > (2 * buffers_floor if deep.DEEP else buffers_floor)
    # the count and the next deadline start at the floor too; the cycle expires the new ones
    next_deadline = index_entries_read(database_url, expiry.NEXT_DEADLINE_SQL, {"floor": floor, "job": "x"})
    assert next_deadline <= 50 + 5 + 2
    assert job.run_once().expired_count == 5
    assert statuses(pool, "appointment", [c.appointment_id for c in fresh]) == ["Expired"] * 5


def test_an_appointment_below_the_floor_is_expired_by_the_next_full_walk(pool: ConnectionPool[Conn]) -> None:
    now = db_now(pool)
    seed_appointments(pool, 10, pending_expires_at=now - timedelta(minutes=5), spread=timedelta(seconds=10))
    clock = FakeMonotonic()
    job = make_job(pool, clock, claim_floor_reset_seconds=60.0)
    assert expire_all(job) == 10
    floor = job.claim_floor.value
    assert floor is not None
    # a booking whose transaction committed long after its own deadline: below the floor
    (late,) = seed_appointments(pool, 1, pending_expires_at=floor - timedelta(minutes=10))
    assert job.run_once().expired_count == 0  # the floor is younger than its deadline: not read yet
    clock.t += 60.0  # the last full walk is reset_seconds old: the next deadline and the next cycle read the head
    assert job.seconds_until_next_due() is not None
    assert job.run_once().expired_count == 1
    assert statuses(pool, "appointment", [late.appointment_id]) == ["Expired"]


def test_a_row_another_transaction_held_keeps_the_floor_below_it(pool: ConnectionPool[Conn], database_url: str) -> None:
    """A claim passes over a row held by another transaction, which then rolls back: still Pending, still found."""
    now = db_now(pool)
    held, *_rest = seed_appointments(
        pool, 20, pending_expires_at=now - timedelta(minutes=5), spread=timedelta(seconds=1)
    )
    clock = FakeMonotonic()
    job = make_job(pool, clock)
    with psycopg.connect(database_url) as other:
        other.execute("SELECT 1 FROM calendar.appointment WHERE id = %s FOR NO KEY UPDATE", (held.appointment_id,))
        assert expire_all(job) == 19
        other.rollback()
    assert job.claim_floor.value is not None
    assert job.claim_floor.value <= now - timedelta(minutes=5)  # at the held row's deadline
    assert job.run_once().expired_count == 1  # no full walk needed
    assert statuses(pool, "appointment", [held.appointment_id]) == ["Expired"]


# One step of the property: seed due appointments (some with deadlines older than the floor, as a late commit
# makes them), hold some Pending rows in another transaction across a cycle and roll it back, run a cycle, or let
# the floor's clock pass its reset period.
step = st.one_of(
    st.tuples(st.just("seed"), st.integers(1, 15), st.integers(-600, 0)),
    st.tuples(st.just("hold"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("cycle"), st.just(0), st.just(0)),
    st.tuples(st.just("tick"), st.just(0), st.just(0)),
)


@pytest.mark.deep
@settings(
    max_examples=deep.examples(30, share=5, least=5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, min_size=4, max_size=14), batch=st.sampled_from([3, 200]))
def test_no_due_appointment_is_ever_skipped(
    pool: ConnectionPool[Conn], database_url: str, steps: list[tuple[str, int, int]], batch: int
) -> None:
    """Property: every cycle with room left in its batch expires every due Pending appointment committed before it
    and held by nobody during it, those another transaction held and released in an earlier cycle included, except
    the ones committed with a deadline already below the floor (a late commit); once a full walk is due, those too."""
    with pool.connection() as conn:  # each example on an empty calendar
        conn.execute("TRUNCATE calendar.event_reminder, calendar.calendar_event, calendar.appointment, "
                     "calendar.availability_slot, outbox.message, jobs.item_failure, jobs.cycle CASCADE")  # fmt: skip
    clock = FakeMonotonic()
    job = make_job(pool, clock, batch_size=batch, claim_floor_reset_seconds=30.0, claim_floor_margin_seconds=1.0)
    rng = random.Random(len(steps) * 31 + batch)
    held_conn: psycopg.Connection[Any] | None = None
    held: set[uuid.UUID] = set()
    late: set[uuid.UUID] = set()
    for kind, n, offset in steps:
        if kind == "seed":
            floor = job.claim_floor.value
            first = (floor or db_now(pool)) + timedelta(seconds=offset)
            seeded = seed_appointments(pool, n, pending_expires_at=first, spread=timedelta(seconds=1))
            late |= {c.appointment_id for i, c in enumerate(seeded) if floor and first + timedelta(seconds=i) < floor}
        elif kind == "hold" and held_conn is None:
            pending = _due_pending(pool)
            if pending:
                held_conn = psycopg.connect(database_url)
                held = set(rng.sample(pending, min(n, len(pending))))
                for row_id in held:
                    held_conn.execute("SELECT 1 FROM calendar.appointment WHERE id = %s FOR NO KEY UPDATE", (row_id,))
        elif kind == "tick":
            clock.t += 30.0
        elif kind == "cycle":
            # every due Pending one but those held now and those committed below the floor (late), which only a
            # full walk must find
            expected = [i for i in _due_pending(pool) if i not in held and i not in late]
            result = job.run_once()
            if held_conn is not None:  # the other transaction rolls back: its rows are still Pending
                held_conn.rollback()
                held_conn.close()
                held_conn, held = None, set()
            if result.claimed_count < batch:  # room was left: the cycle read everything from where it started
                assert [s for s in statuses(pool, "appointment", expected) if s != "Expired"] == []
    if held_conn is not None:
        held_conn.rollback()
        held_conn.close()
    clock.t += 30.0  # a full walk is due: nothing below the floor stays behind
    while job.run_once().claimed_count:
        pass
    assert _due_pending(pool) == []


def _due_pending(pool: ConnectionPool[Conn], at_or_after: datetime | None = None) -> list[uuid.UUID]:
    with pool.connection() as conn:
        as_of = database_now(conn)
        rows = conn.execute(
            "SELECT id FROM calendar.appointment WHERE status = 'Pending' AND pending_expires_at < %s "
            "AND pending_expires_at >= coalesce(%s::timestamptz, '-infinity')",
            (as_of, at_or_after),
        ).fetchall()
    return [r["id"] for r in rows]
