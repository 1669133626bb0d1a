"""expire-promotions, seed 002 A4: a failure that is not about the items rolls the whole batch back (pin.faults).

One test per class of failure, each made to happen for real on the batch write (a statement timeout, a deadlock
with another session, a lock timeout, a trigger raising SQLSTATE 53100 disk_full): the batch is rolled back, no
poison record and no ``item failed``, the cycle counted as failed; the next cycle expires every purchase once.
"""

# ruff: noqa: N802 - test names carry the seed's row ids (A4)
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg
import pytest
from prometheus_client import REGISTRY
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs

from pin.db import Conn
from pin.promotion.domain import PromotionPurchase
from pin.promotion.expiry import JOB_NAME, ExpirePromotionsConfig, ExpirePromotionsJob
from tests.promotion.support import db_now, execute, purchase_events, purchase_rows, seed_purchases
from tests.support.contention import Background, arm_deadlocks, hold_blocker, install_blocker, provoke_deadlocks

pytestmark = pytest.mark.integration

_EXPIRING = "NEW.status = 'Expired'"  # the batch write (and the item-by-item fallback): never the seeding


def _errors() -> float:
    return REGISTRY.get_sample_value("promotion_expire_errors_total", {}) or 0.0


def _trigger_on_expiry(pool: ConnectionPool[Conn], body: str) -> None:
    """A trigger running ``body`` (plpgsql) on every write that expires a purchase."""
    execute(pool, f"CREATE FUNCTION public.test_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$")
    execute(
        pool,
        "CREATE TRIGGER test_fault BEFORE UPDATE ON promotion.purchase FOR EACH ROW"
        f" WHEN ({_EXPIRING}) EXECUTE FUNCTION public.test_fault()",
    )


def _drop_trigger(pool: ConnectionPool[Conn]) -> None:
    execute(pool, "DROP TRIGGER test_fault ON promotion.purchase")


def _fails_whole_then_redone(
    pool: ConnectionPool[Conn],
    job: ExpirePromotionsJob,
    purchases: list[PromotionPurchase],
    error: type[psycopg.Error],
    *,
    heal: Callable[[], None],
) -> None:
    """The cycle fails with ``error`` and keeps nothing; after ``heal`` the next cycle expires each purchase once."""
    errors_before = _errors()
    with capture_logs() as logs, pytest.raises(error):
        job.run_once()

    events = [entry["event"] for entry in logs]
    assert "item failed" not in events
    assert "batch write failed, writing item by item" not in events  # no item is blamed, none is tried alone
    assert "cycle failed" in events
    assert _errors() == errors_before + 1  # the cycle, not an item
    rows = purchase_rows(pool)
    assert {(rows[p.id]["status"], rows[p.id]["version"]) for p in purchases} == {("Active", 1)}
    assert purchase_events(pool, "Expired") == []
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM jobs.item_failure").fetchone() == {"n": 0}
        last = conn.execute(
            "SELECT succeeded FROM jobs.cycle WHERE job = %s ORDER BY finished_at DESC LIMIT 1", (JOB_NAME,)
        ).fetchone()
    assert last == {"succeeded": False}

    heal()
    again = job.run_once()

    assert (again.expired_count, again.failed_count) == (len(purchases), 0)
    expired = purchase_events(pool, "Expired")
    assert sorted(e["message_key"] for e in expired) == sorted(str(p.id) for p in purchases)  # once each


def _purchases(pool: ConnectionPool[Conn]) -> list[PromotionPurchase]:
    return seed_purchases(pool, 3, ends_at=db_now(pool) - timedelta(minutes=1))


def test_A4_a_statement_timeout_on_the_batch_write_rolls_the_whole_batch_back(pool: ConnectionPool[Conn]) -> None:
    purchases = _purchases(pool)
    _trigger_on_expiry(pool, "PERFORM pg_sleep(3); RETURN NEW;")  # slower than the 1 s statement timeout
    job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(transaction_timeout_seconds=1))

    _fails_whole_then_redone(pool, job, purchases, pg_errors.QueryCanceled, heal=lambda: _drop_trigger(pool))


def test_A4_a_deadlock_on_the_batch_write_rolls_the_whole_batch_back(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    purchases = _purchases(pool)
    install_blocker(database_url, table="promotion.purchase", when=_EXPIRING)
    # The batch write waits until another session asks for a purchase the batch holds, then for a row it holds.
    arm_deadlocks(database_url)
    other = Background(
        lambda: provoke_deadlocks(
            database_url, "SELECT 1 FROM promotion.purchase WHERE id = %s FOR UPDATE", [purchases[0].id]
        )
    )
    _fails_whole_then_redone(pool, ExpirePromotionsJob(pool), purchases, pg_errors.DeadlockDetected, heal=other.result)
    # one deadlock: the worker gave the batch up at once, it did not retry item by item into more
    assert len(other.result()) == 1


def test_A4_a_lock_timeout_on_the_batch_write_rolls_the_whole_batch_back(
    pool: ConnectionPool[Conn], database_url: str
) -> None:
    purchases = _purchases(pool)
    install_blocker(database_url, table="promotion.purchase", when=_EXPIRING, lock_timeout_ms=200)
    holder = hold_blocker(database_url)  # held past the write's lock_timeout

    def release() -> None:
        holder.rollback()
        holder.close()

    try:
        _fails_whole_then_redone(pool, ExpirePromotionsJob(pool), purchases, pg_errors.LockNotAvailable, heal=release)
    finally:
        holder.close()


def test_A4_a_disk_full_on_the_batch_write_rolls_the_whole_batch_back(pool: ConnectionPool[Conn]) -> None:
    purchases = _purchases(pool)
    _trigger_on_expiry(pool, "RAISE EXCEPTION 'could not extend file' USING ERRCODE = '53100';")

    _fails_whole_then_redone(
        pool, ExpirePromotionsJob(pool), purchases, pg_errors.DiskFull, heal=lambda: _drop_trigger(pool)
    )
