"""Recording a purchase's boost contributions in one context's tables, in the consumer runtime's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pin.boost.domain import PurchaseStatus, TargetKind, contributes
from pin.boost.messages import PurchaseChanged
from pin.db import Conn
from pin.messaging.consumer import HandlingContext, Route
from pin.messaging.tolerant import known

# purchase_upsert: seed 002 «Guard монотонности»: an event applies only if its Version >= the stored one (replay and
# reorder safe); the row lock also serializes two deliveries of the same purchase (e.g. a DLQ replay beside the stream).
_PURCHASE_UPSERT = sql.SQL("""
INSERT INTO {purchase} AS p (purchase_id, tenant_id, status, version) VALUES (%s, %s, %s, %s)
ON CONFLICT (purchase_id) DO UPDATE
SET status = EXCLUDED.status, version = EXCLUDED.version, updated_at = now()
WHERE p.version <= EXCLUDED.version
RETURNING p.purchase_id
""")


# The guard both contribution statements end with, so that they change nothing when the purchase upsert before them
# ignored an older Version: "the stored Version is this event's" (parameters: purchase_id, purchase_version). After
# the upsert it holds exactly when the upsert applied (an ignored one means a newer stored Version, kept locked).
# The statements need no answer from the upsert first: a batch's effects go to the server in one round trip.


@dataclass(frozen=True)
class BoostTables:
    """Where one context keeps its boost, and which targets are its (the key of a contribution row, or None)."""

    # the context's schema, holding its ``purchase`` table (the newest Version of each purchase seen)
    schema: str
    # parameters: purchase_id, the key's columns, tenant_id, boost_weight, active, purchase_version, then the guard
    upsert_contribution: str
    # parameters: purchase_version, purchase_id, one array per key column (the keys the purchase still names), then
    # the guard
    deactivate_dropped: str
    # the contribution's key for a target of this context, None for another context's target
    key_of: Callable[[TargetKind, uuid.UUID], tuple[Any, ...] | None]
    # how many columns a key has
    key_columns: int


def apply_purchase(conn: Conn, event: PurchaseChanged, context: HandlingContext, tables: BoostTables, log: Any) -> None:
    """Record the purchase's contributions to this context's targets, if its Version is not older."""
    status = known(PurchaseStatus, event.status)
    if status is None:
        context.unknown_value("Status", event.status)
    purchase = _PURCHASE_UPSERT.format(purchase=sql.Identifier(tables.schema, "purchase"))
    upserted = conn.execute(purchase, (event.purchase_id, event.tenant_id, event.status, event.version))

    unknown_kinds: list[str] = []

    def check() -> None:
        if upserted.fetchone() is None:
            log.info("older purchase version ignored", purchase_id=str(event.purchase_id), version=event.version)
            return
        for raw in unknown_kinds:  # an ignored Version's targets are not looked at
            context.unknown_value("TargetKind", raw)

    context.after_results(check)
    guard = (event.purchase_id, event.version)
    active = contributes(status)
    keys: list[tuple[Any, ...]] = []
    for target in event.targets:
        target_kind = known(TargetKind, target.target_kind)
        if target_kind is None:
            unknown_kinds.append(target.target_kind)
            continue
        key = tables.key_of(target_kind, target.target_id)
        if key is None:
            continue  # another context's target: it keeps that boost
        conn.execute(
            tables.upsert_contribution,
            (event.purchase_id, *key, event.tenant_id, event.boost_weight, active, event.version, *guard),
        )
        keys.append(key)
    named = [[key[column] for key in keys] for column in range(tables.key_columns)]
    conn.execute(tables.deactivate_dropped, (event.version, event.purchase_id, *named, *guard))


def purchase_route(tables: BoostTables, log: Any) -> Route[PurchaseChanged]:
    """How a context reads purchase-changed: the boost's view of it, recorded in ``tables``."""

    def apply(conn: Conn, event: PurchaseChanged, context: HandlingContext) -> None:
        apply_purchase(conn, event, context, tables, log)

    return Route(PurchaseChanged.model_validate, apply)
