"""Helpers of the promotion tests: purchases built through the real domain and unit of work, outbox reads,
and test-only triggers that make a race window wide or an item really fail."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now
from pin.messaging import topics
from pin.outbox.writer import RELAY_POLICY, MessageContext, OutboxPolicy
from pin.promotion import repository
from pin.promotion.domain import PromotionPurchase, Target, TargetKind
from pin.promotion.service import record_events
from pin.unit_of_work import UnitOfWork

# Reference data seeded by promotion/schema.sql.
TOP_1D = uuid.UUID("6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004")
STANDARD_7D = uuid.UUID("6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0001")
RUB = uuid.UUID("3a7f0c52-5b1e-4d0e-8a1c-00000000a643")


def db_now(pool: ConnectionPool[Conn]) -> datetime:
    """The database clock."""
    with pool.connection() as conn:
        return database_now(conn)


def seed_purchases(
    pool: ConnectionPool[Conn],
    count: int = 1,
    *,
    ends_at: datetime,
    tenant_id: uuid.UUID | None = None,
    targets: Sequence[Target] | None = None,
    package_id: uuid.UUID = TOP_1D,
    outbox: OutboxPolicy = RELAY_POLICY,
) -> list[PromotionPurchase]:
    """``count`` Active purchases ending at ``ends_at``, activated an hour before it (through the real domain,
    with their activation events in the outbox, written as ``outbox`` says), committed together."""
    tenant = tenant_id or uuid.uuid4()
    purchases = []
    with UnitOfWork(pool, MessageContext("test-seed"), outbox=outbox) as uow:
        package = repository.package_get(uow.conn, package_id)
        assert package is not None
        for _ in range(count):
            purchase = PromotionPurchase.activate(
                purchase_id=uuid.uuid4(),
                tenant_id=tenant,
                buyer_user_id=uuid.uuid4(),
                package=package,
                targets=targets or [Target(TargetKind.PROJECT, uuid.uuid4()), Target(TargetKind.POST, uuid.uuid4())],
                now=ends_at - timedelta(hours=1),
                requested_ends_at=ends_at,
            )
            repository.purchase_insert(uow.conn, purchase)
            record_events(uow, purchase)
            purchases.append(purchase)
        uow.commit()
    return purchases


def purchase_rows(
    pool: ConnectionPool[Conn], ids: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, dict[str, Any]]:
    """Purchase rows by id (all, or those of ``ids``)."""
    with pool.connection() as conn:
        if ids is None:
            rows = conn.execute("SELECT * FROM promotion.purchase").fetchall()
        else:
            rows = conn.execute("SELECT * FROM promotion.purchase WHERE id = ANY(%s)", (list(ids),)).fetchall()
    return {row["id"]: row for row in rows}  # type: ignore[misc]


def purchase_events(pool: ConnectionPool[Conn], status: str | None = None) -> list[dict[str, Any]]:
    """Outbox rows of the purchase-changed topic in id order, optionally of one Status."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT message_key, topic, event_type, contract_version, payload, headers, occurred_at"
            " FROM outbox.message WHERE topic = %s AND (%s::text IS NULL OR payload->>'Status' = %s) ORDER BY id",
            (topics.PURCHASE_CHANGED, status, status),
        ).fetchall()
    return [dict(row) for row in rows]


def execute(pool: ConnectionPool[Conn], sql: str, params: Sequence[object] | None = None) -> None:
    """Run one statement and commit."""
    with pool.connection() as conn:
        conn.execute(sql, params)  # type: ignore[arg-type]


def fail_updates_of(pool: ConnectionPool[Conn], purchase_id: uuid.UUID) -> None:
    """Make every UPDATE of one purchase fail in the database (a real poison row for the worker)."""
    execute(
        pool,
        """
        CREATE FUNCTION public.test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected poison for this purchase'; END $$;
        """,
    )
    execute(
        pool,
        f"CREATE TRIGGER test_poison BEFORE UPDATE ON promotion.purchase FOR EACH ROW"
        f" WHEN (OLD.id = '{purchase_id}') EXECUTE FUNCTION public.test_poison()",
    )


def heal_poison(pool: ConnectionPool[Conn]) -> None:
    """Remove the trigger of :func:`fail_updates_of`."""
    execute(pool, "DROP TRIGGER test_poison ON promotion.purchase")


def slow_transitions_to(pool: ConnectionPool[Conn], status: str, seconds: float) -> None:
    """Every UPDATE that moves a purchase to ``status`` sleeps ``seconds`` (holding its row lock): widens races."""
    name = f"test_slow_{status.lower()}"
    execute(
        pool,
        f"""
        CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$;
        """,
    )
    execute(
        pool,
        f"CREATE TRIGGER {name} BEFORE UPDATE ON promotion.purchase FOR EACH ROW"
        f" WHEN (NEW.status = '{status}' AND OLD.status = 'Active') EXECUTE FUNCTION public.{name}()",
    )


def gate_transitions(pool: ConnectionPool[Conn]) -> str:
    """Every UPDATE of a purchase first takes the one row of ``public.test_gate`` (a trigger): a session that holds
    that row (returned: the statement that takes it) makes every purchase write wait on it."""
    execute(pool, "CREATE TABLE public.test_gate (id int PRIMARY KEY); INSERT INTO public.test_gate VALUES (1)")
    execute(
        pool,
        "CREATE FUNCTION public.test_gated() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN PERFORM 1 FROM public.test_gate WHERE id = 1 FOR UPDATE; RETURN NEW; END $$",
    )
    execute(pool, "CREATE TRIGGER test_gated BEFORE UPDATE ON promotion.purchase FOR EACH ROW"
                  " EXECUTE FUNCTION public.test_gated()")  # fmt: skip
    return "SELECT 1 FROM public.test_gate WHERE id = 1 FOR UPDATE"


def die_once_at_commit(pool: ConnectionPool[Conn]) -> None:
    """The next transaction that commits outbox rows has its backend terminated at COMMIT (once).

    A deferred constraint trigger fires in pre-commit, and the backend terminates itself there with
    pg_terminate_backend: a real infrastructure failure exactly at commit time. A sequence gates it to the
    first time, because sequences are not rolled back with the transaction.
    """
    execute(pool, "CREATE SEQUENCE public.test_commit_failures")
    execute(
        pool,
        """
        CREATE FUNCTION public.test_die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('public.test_commit_failures') = 1 THEN
                PERFORM pg_terminate_backend(pg_backend_pid());
                PERFORM pg_sleep(5);
            END IF;
            RETURN NULL;
        END $$;
        """,
    )
    execute(
        pool,
        "CREATE CONSTRAINT TRIGGER test_die_at_commit AFTER INSERT ON outbox.message"
        " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.test_die_at_commit()",
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of a role's output."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return lines


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in a role's output, one-line (logs) or indented (console spans)."""
    decoder = json.JSONDecoder()
    objects, position = [], 0
    while (start := text.find("{", position)) >= 0:
        try:
            value, position = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects
