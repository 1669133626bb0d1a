"""The hot path's plans use their indexes from the first cycle, whatever the statistics say, and keep doing so.

On a fresh database that nothing analyzes (autovacuum off for every table, no ANALYZE), a role's connection keeps
the generic plan it built while the tables were empty: with plan_cache_mode = force_generic_plan and psycopg
preparing every statement at its first execution, each statement's plan is built on empty tables and cached for
the session. The tables then grow from empty through the real code (the appointment-timeout worker's cycles, the
promotions' worker, the consumers' inbox); afterwards each cached plan of the session is shown with EXPLAIN EXECUTE
and must read the hot tables by index, never by a sequential scan.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.db import Conn, ConnectionPolicy, create_pool, default_policy
from pin.messaging.consumer.inbox import inbox_insert, inbox_prune
from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob
from tests.calendar.worker.factory import db_now, seed_appointments
from tests.promotion.support import seed_purchases
from tests.support import deep

pytestmark = [pytest.mark.integration, pytest.mark.deep]

# how many appointments the tables grow by from empty (a third as many purchases)
GROWN = 3_000 if deep.DEEP else 900

# how many appointments the tables grow by after statistics taken at two rows: enough that a sequential scan is
# the wrong plan on the tables as they are (a few pages' table is rightly read whole)
GROWN_FROM_TWO = 6_000

# The tables the hot path reads and writes: none may be read by a sequential scan once it has grown.
HOT = (
    "calendar.appointment", "calendar.availability_slot", "calendar.calendar_event", "calendar.event_reminder",
    "promotion.purchase", "promotion.purchase_target", "jobs.item_failure", "jobs.cycle", "messaging.inbox",
    "outbox.message",
)  # fmt: skip


@pytest.fixture
def unanalyzed(database_url: str) -> str:
    """The test's fresh database with autovacuum off for every table of the hot path and no statistics at all."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for table in HOT:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        never = conn.execute(
            "SELECT count(*) FROM pg_class WHERE oid = ANY(%s::regclass[]) AND reltuples >= 0", (list(HOT),)
        ).fetchone()
    assert never == (0,)  # never vacuumed nor analyzed: the planner knows nothing but the pages
    return database_url


@pytest.fixture
def first_plans_pool(unanalyzed: str) -> Iterator[ConnectionPool[Conn]]:
    """One connection of the worker role's policy, every statement prepared at once and planned generically."""
    policy = default_policy("worker")
    policy = ConnectionPolicy(
        policy.client, {**policy.session, "plan_cache_mode": "force_generic_plan"}, policy.check_timeout_seconds
    )
    pool = create_pool(unanalyzed, min_size=1, max_size=1, name="first-plans", policy=policy)

    def prepare_everything(conn: Conn) -> None:
        conn.prepare_threshold = 0

    pool._configure = _chain(pool._configure, prepare_everything)  # type: ignore[attr-defined]
    with pool.connection() as conn:  # the connection opened before the configure above: set it too
        conn.prepare_threshold = 0
    try:
        yield pool
    finally:
        pool.close()


def _chain(first: Any, then: Any) -> Any:
    def both(conn: Conn) -> None:
        if first is not None:
            first(conn)
        then(conn)

    return both


def _unindexed(plan: dict[str, Any]) -> list[str]:
    """The hot tables a plan reads by a sequential scan or by a whole index (an index scan with no condition)."""
    found = []
    relation = plan.get("Relation Name")
    if relation and any(relation == t.split(".")[1] for t in HOT):
        kind = plan["Node Type"]
        if kind == "Seq Scan" or (kind in {"Index Scan", "Index Only Scan"} and "Index Cond" not in plan):
            found.append(f"{kind} on {relation}")
    for child in plan.get("Plans", []):
        found += _unindexed(child)
    return found


def _cached_plans(conn: Conn) -> dict[str, dict[str, Any]]:
    """Every statement the session prepared, with its cached generic plan (EXPLAIN EXECUTE with NULL parameters:
    a generic plan does not depend on them)."""
    rows = conn.execute(
        "SELECT name, statement, parameter_types::text[] AS types FROM pg_prepared_statements", prepare=False
    ).fetchall()
    plans = {}
    for row in rows:
        if not any(table in str(row["statement"]) for table in HOT):
            continue  # not the hot path's (a session setting, a statistics read)
        args = f"({', '.join(f'NULL::{t}' for t in row['types'])})" if row["types"] else ""
        explained = conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {row['name']}{args}", prepare=False).fetchone()
        assert explained is not None
        document = next(iter(explained.values()))
        plans[str(row["statement"])] = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    conn.rollback()
    return plans


def test_every_hot_statement_keeps_its_index_plan_as_the_tables_grow_from_empty(
    first_plans_pool: ConnectionPool[Conn], pool: ConnectionPool[Conn]
) -> None:
    pool_ = first_plans_pool
    # first cycles on empty tables: every statement is prepared and its generic plan cached now
    timeout = AppointmentTimeoutJob(pool_, AppointmentTimeoutConfig(instance="plans"))
    promotions = ExpirePromotionsJob(pool_, ExpirePromotionsConfig(instance="plans"))
    _first_cycles(pool, pool_, timeout, promotions, rows=1)
    # the tables grow from empty: thousands of appointments, purchases and inbox rows, no ANALYZE anywhere
    _grow(pool, GROWN)
    while timeout.run_once().claimed_count:
        pass
    while promotions.run_once().is_full:
        pass
    with pool_.connection() as conn:
        for _ in range(20):
            _inbox(conn, 200)
        plans = _cached_plans(conn)
    hot = plans
    assert len(hot) >= 8  # the claims, the count, the cascade's write, the bookkeeping, the inbox ...
    scanned = [f"{_unindexed(plan)}: {' '.join(sql.split())[:300]}" for sql, plan in hot.items() if _unindexed(plan)]
    assert scanned == []


def _inbox_then_scans(
    role: ConnectionPool[Conn], pool: ConnectionPool[Conn], *, batches: int
) -> dict[str, tuple[int, int, int]]:
    """``batches`` of 200 inbox rows on ``role``'s connection, its counters sent to the server, then every count."""
    with role.connection() as conn:
        for _ in range(batches):
            _inbox(conn, 200)
        conn.execute("SELECT pg_stat_force_next_flush()", prepare=False)
        conn.commit()
    with pool.connection() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        scans = _scans(conn)
        conn.commit()
    return scans


def _first_cycles(
    pool: ConnectionPool[Conn],
    role: ConnectionPool[Conn],
    timeout: AppointmentTimeoutJob,
    promotions: ExpirePromotionsJob,
    *,
    rows: int,
    analyze: bool = False,
) -> None:
    """A few rows in each hot table (analyzed then, when ``analyze``) and a cycle of each worker and of the inbox on
    ``role``'s connection: every statement prepared and planned on tables that small."""
    seed_appointments(pool, rows)
    seed_purchases(pool, rows, ends_at=db_now(pool) - timedelta(minutes=1))
    if analyze:
        with pool.connection() as conn:
            for table in HOT:
                conn.execute(f"ANALYZE {table}")  # statistics of a row or two, never taken again
    timeout.run_once()
    promotions.run_once()
    with role.connection() as conn:
        _inbox(conn, rows)


def _grow(pool: ConnectionPool[Conn], appointments: int) -> None:
    """The tables grow: ``appointments`` due appointments and a third as many due purchases, no ANALYZE."""
    seed_appointments(pool, appointments, spread=timedelta(milliseconds=1))
    seed_purchases(pool, appointments // 3, ends_at=db_now(pool) - timedelta(minutes=1))


def _pages(conn: Conn, table: str) -> int:
    row = conn.execute("SELECT pg_relation_size(%s::regclass) / 8192 AS n", (table,)).fetchone()
    assert row is not None
    return int(str(row["n"]))


def _inbox(conn: Conn, count: int) -> None:
    ids = [uuid.uuid4() for _ in range(count)]
    inbox_insert(
        conn, "crm", topic="t", partition=0, message_ids=ids, offsets=list(range(count)), occurred_at=[None] * count
    )
    inbox_prune(conn, "crm", 3600)
    conn.commit()


def _scans(conn: Conn) -> dict[str, tuple[int, int, int]]:
    """Per hot table and per index of one: (sequential scans, index scans, index entries read), as counted so far."""
    rows = conn.execute(
        "SELECT t.schemaname || '.' || t.relname AS name, t.seq_scan AS seq, 0::bigint AS idx, 0::bigint AS read"
        " FROM pg_stat_user_tables t WHERE (t.schemaname || '.' || t.relname) = ANY(%(hot)s)"
        " UNION ALL"
        " SELECT i.schemaname || '.' || i.indexrelname, 0, i.idx_scan, i.idx_tup_read"
        " FROM pg_stat_user_indexes i WHERE (i.schemaname || '.' || i.relname) = ANY(%(hot)s)",
        {"hot": list(HOT)},
        prepare=False,
    ).fetchall()
    return {str(r["name"]): (int(r["seq"]), int(r["idx"]), int(r["read"])) for r in rows}


@pytest.mark.deep(only=True)  # a minute of growing every hot table from two rows: make test-deep runs it
def test_hot_statements_keep_their_indexes_after_statistics_taken_at_two_rows(
    unanalyzed: str, pool: ConnectionPool[Conn]
) -> None:
    """Every hot table analyzed once while it held a row or two, never again as it grows: the roles' sessions plan
    each execution on its parameters and the tables as they are now (plan_cache_mode), with sequential scans off
    (pin/db.py: HOT_ROLES), so no grown hot table is read by a sequential scan."""
    worker = create_pool(unanalyzed, min_size=1, max_size=1, name="tiny-statistics", policy=default_policy("worker"))

    def prepare_everything(conn: Conn) -> None:
        conn.prepare_threshold = 0  # every statement prepared at its first execution: nothing planned again by luck

    worker._configure = _chain(worker._configure, prepare_everything)  # type: ignore[attr-defined]
    with worker.connection() as conn:
        conn.prepare_threshold = 0
    try:
        timeout = AppointmentTimeoutJob(worker, AppointmentTimeoutConfig(instance="tiny"))
        promotions = ExpirePromotionsJob(worker, ExpirePromotionsConfig(instance="tiny"))
        _first_cycles(pool, worker, timeout, promotions, rows=2, analyze=True)
        _grow(pool, GROWN_FROM_TWO)
        before = _inbox_then_scans(worker, pool, batches=10)
        cycles = 0
        while timeout.run_once().claimed_count:
            cycles += 1
        while promotions.run_once().is_full:
            cycles += 1
        after = _inbox_then_scans(worker, pool, batches=1)
        with pool.connection() as conn:
            pages = {t: _pages(conn, t) for t in HOT}
    finally:
        worker.close()
    assert cycles >= 3  # the grown tables were worked through by several cycles
    seq = {
        name: (after[name][0] - before[name][0], pages[name])
        for name in after
        if after[name][0] > before[name][0] and pages[name] > 1
    }
    assert seq == {}, f"sequential scans of grown hot tables: {seq}"
