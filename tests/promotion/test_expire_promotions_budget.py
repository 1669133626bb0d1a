"""expire-promotions' cycle budget (seed 002, "Max duration: < 30 s per cycle"), against a real PostgreSQL: a slow
item-by-item write stops at the budget and commits what it wrote, and no statement outlives the budget."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.db import Conn
from pin.promotion.expiry import JOB_NAME, ExpirePromotionsConfig, ExpirePromotionsJob
from tests.promotion.support import (
    db_now,
    execute,
    fail_updates_of,
    gate_transitions,
    purchase_events,
    purchase_rows,
    seed_purchases,
)
from tests.support.contention import holding_connection

pytestmark = pytest.mark.integration


def _exhausted() -> float:
    return REGISTRY.get_sample_value("promotion_expire_cycle_budget_exhausted_total", {}) or 0.0


def _errors() -> float:
    return REGISTRY.get_sample_value("promotion_expire_errors_total", {}) or 0.0


def _slow_single_writes(pool: ConnectionPool[Conn], seconds: float) -> None:
    """Every UPDATE statement of purchases that completes sleeps ``seconds`` once (a statement-level trigger): the
    set-based write that a poison row aborts does not sleep, each write of the item-by-item fallback does."""
    execute(
        pool,
        "CREATE FUNCTION public.test_slow_statement() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$",
    )
    execute(
        pool,
        "CREATE TRIGGER test_slow_statement AFTER UPDATE ON promotion.purchase FOR EACH STATEMENT"
        " EXECUTE FUNCTION public.test_slow_statement()",
    )


def test_a_cycle_over_its_budget_commits_what_it_wrote_and_the_next_cycle_takes_the_rest(
    pool: ConnectionPool[Conn],
) -> None:
    now = db_now(pool)
    (poison,) = seed_purchases(pool, ends_at=now - timedelta(hours=1))  # oldest: the fallback meets it first
    others = seed_purchases(pool, 9, ends_at=now - timedelta(minutes=5))
    fail_updates_of(pool, poison.id)  # the set-based write fails: the batch is written item by item
    per_item, budget = 0.3, 1.0
    _slow_single_writes(pool, per_item)
    exhausted_before = _exhausted()
    job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(cycle_budget_seconds=budget))

    started = time.monotonic()
    with capture_logs() as logs:
        result = job.run_once()
    took = time.monotonic() - started

    # the budget plus one item's write, and a loaded machine's overhead; the count below says it stopped early
    assert took < budget + 1.0  # the write in flight at the budget is cancelled
    assert result.budget_exhausted
    assert not result.is_full
    assert 1 <= result.expired_count < len(others)  # stopped writing before the end of the batch
    assert result.failed_count == 1  # the poison one; those not written are not failures
    (line,) = [entry for entry in logs if entry["event"] == "cycle budget exhausted"]
    assert (line["log_level"], line["BudgetSeconds"], line["ExpiredCount"]) == ("warning", budget, result.expired_count)
    assert _exhausted() == exhausted_before + 1
    rows = purchase_rows(pool)
    written = {p.id for p in others if rows[p.id]["status"] == "Expired"}
    assert len(written) == result.expired_count  # committed, each with its event
    assert sorted(e["message_key"] for e in purchase_events(pool, "Expired")) == sorted(str(i) for i in written)
    with pool.connection() as conn:
        failures = conn.execute("SELECT item_id FROM jobs.item_failure WHERE job = %s", (JOB_NAME,)).fetchall()
    assert failures == [{"item_id": poison.id}]

    execute(pool, "DROP TRIGGER test_slow_statement ON promotion.purchase")
    again = job.run_once()

    assert (again.expired_count, again.budget_exhausted) == (len(others) - len(written), False)
    expired = purchase_events(pool, "Expired")
    assert sorted(e["message_key"] for e in expired) == sorted(str(p.id) for p in others)  # each once
    assert purchase_rows(pool)[poison.id]["status"] == "Active"


def test_no_statement_outlives_the_budget_though_the_transaction_timeout_is_longer(
    pool: ConnectionPool[Conn],
) -> None:
    """The 60 s transaction timeout is twice the default budget: the statement in flight is cancelled at the
    budget, the batch rolls back whole (A4), and the cycle ends as one over its budget, not as a failure."""
    purchases = seed_purchases(pool, 2, ends_at=db_now(pool) - timedelta(minutes=1))
    execute(
        pool,
        "CREATE FUNCTION public.test_slow() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN PERFORM pg_sleep(10); RETURN NEW; END $$",
    )
    execute(pool, "CREATE TRIGGER test_slow BEFORE UPDATE ON promotion.purchase FOR EACH ROW"
                  " EXECUTE FUNCTION public.test_slow()")  # fmt: skip
    job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(transaction_timeout_seconds=60, cycle_budget_seconds=1.0))
    errors_before = _errors()
    started = time.monotonic()

    with capture_logs() as logs:
        result = job.run_once()

    assert time.monotonic() - started < 1.0 + 1.0  # the budget + 1 s: not 10 s, not 60 s
    assert (result.budget_exhausted, result.expired_count, result.is_full) == (True, 0, False)
    (line,) = [entry for entry in logs if entry["event"].startswith("cycle budget spent")]
    assert (line["RolledBack"], line["Count"]) == ("the batch", 2)
    assert _errors() == errors_before
    rows = purchase_rows(pool)
    assert {rows[p.id]["status"] for p in purchases} == {"Active"}  # the whole batch rolled back (A4)
    assert purchase_events(pool, "Expired") == []


def test_rows_held_elsewhere_end_the_cycle_within_the_budget_plus_a_second(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    """The batch's write waits on a row another connection holds (a trigger takes it): cancelled at the budget,
    the batch rolled back, not a failed cycle; once the row is free the next cycle takes the batch."""
    purchases = seed_purchases(pool, 3, ends_at=db_now(pool) - timedelta(minutes=1))
    take_gate = gate_transitions(pool)
    budget = 1.0
    job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(cycle_budget_seconds=budget))
    holder = holding_connection(database_url)
    try:
        holder.execute(take_gate)
        started = time.monotonic()
        result = job.run_once()
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()

    assert took < budget + 1.0
    assert (result.budget_exhausted, result.expired_count, result.failed_count) == (True, 0, 0)
    assert {purchase_rows(pool)[p.id]["status"] for p in purchases} == {"Active"}
    assert job.run_once().expired_count == 3
