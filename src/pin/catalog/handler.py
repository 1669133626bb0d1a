"""catalog's handler of purchase-changed: the boost contributions of Projects and PropertyObjects (seed 002)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from pin.catalog.domain import CardKind, PurchaseStatus, TargetKind, card_kind_of, contributes
from pin.catalog.messages import PurchaseChanged
from pin.messaging import topics
from pin.messaging.consumer import Conn, HandlingContext, Route
from pin.messaging.tolerant import known

log = structlog.get_logger(__name__)

# Seed 002 «Guard монотонности»: an event applies only if its Version >= the stored one (replay and reorder
# safe); the row lock also serializes two deliveries of the same purchase (e.g. a DLQ replay beside the stream).
_UPSERT_PURCHASE = """
INSERT INTO catalog.purchase AS p (purchase_id, tenant_id, status, version) VALUES (%s, %s, %s, %s)
ON CONFLICT (purchase_id) DO UPDATE
SET status = EXCLUDED.status, version = EXCLUDED.version, updated_at = now()
WHERE p.version <= EXCLUDED.version
RETURNING p.purchase_id
"""

_UPSERT_CONTRIBUTION = """
INSERT INTO catalog.boost_contribution AS c
    (purchase_id, target_kind, target_id, tenant_id, boost_weight, active, purchase_version)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (purchase_id, target_kind, target_id) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version
"""

# A target a newer Version no longer names stops contributing.
_DEACTIVATE_DROPPED = """
UPDATE catalog.boost_contribution
SET active = false, purchase_version = %s, updated_at = now()
WHERE purchase_id = %s AND active
  AND (target_kind, target_id) NOT IN (SELECT k, i FROM unnest(%s::text[], %s::uuid[]) AS t(k, i))
"""


def apply_purchase(conn: Conn, event: PurchaseChanged, context: HandlingContext) -> None:
    """Record the purchase's contributions to its Project and PropertyObject targets, if the Version is not older."""
    status = known(PurchaseStatus, event.status)
    if status is None:
        context.unknown_value("Status", event.status)
    applied = conn.execute(_UPSERT_PURCHASE, (event.purchase_id, event.tenant_id, event.status, event.version))
    if applied.fetchone() is None:
        log.info("older purchase version ignored", purchase_id=str(event.purchase_id), version=event.version)
        return
    active = contributes(status)
    kinds: list[str] = []
    ids: list[Any] = []
    for target in event.targets:
        target_kind = known(TargetKind, target.target_kind)
        if target_kind is None:
            context.unknown_value("TargetKind", target.target_kind)
            continue
        card_kind: CardKind | None = card_kind_of(target_kind)
        if card_kind is None:
            continue  # a Post: news keeps its boost
        conn.execute(
            _UPSERT_CONTRIBUTION,
            (event.purchase_id, card_kind.value, target.target_id, event.tenant_id, event.boost_weight, active,
             event.version),
        )  # fmt: skip
        kinds.append(card_kind.value)
        ids.append(target.target_id)
    conn.execute(_DEACTIVATE_DROPPED, (event.version, event.purchase_id, kinds, ids))


def _parse(payload: Mapping[str, Any]) -> PurchaseChanged:
    return PurchaseChanged.model_validate(payload)


def routes() -> dict[str, Route[Any]]:
    """The topics catalog reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: Route(_parse, apply_purchase)}
