"""news' handler of purchase-changed: the boost contributions of posts (seed 002, step 3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from pin.messaging import topics
from pin.messaging.consumer import Conn, HandlingContext, Route
from pin.messaging.tolerant import known
from pin.news.domain import PurchaseStatus, TargetKind, contributes
from pin.news.messages import PurchaseChanged

log = structlog.get_logger(__name__)

# Seed 002 «Guard монотонности»: Version >= the stored one, else the event is older and ignored.
_UPSERT_PURCHASE = """
INSERT INTO news.purchase AS p (purchase_id, tenant_id, status, version) VALUES (%s, %s, %s, %s)
ON CONFLICT (purchase_id) DO UPDATE
SET status = EXCLUDED.status, version = EXCLUDED.version, updated_at = now()
WHERE p.version <= EXCLUDED.version
RETURNING p.purchase_id
"""

_UPSERT_CONTRIBUTION = """
INSERT INTO news.boost_contribution AS c
    (purchase_id, post_id, tenant_id, boost_weight, active, purchase_version)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (purchase_id, post_id) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version
"""

_DEACTIVATE_DROPPED = """
UPDATE news.boost_contribution
SET active = false, purchase_version = %s, updated_at = now()
WHERE purchase_id = %s AND active AND post_id <> ALL(%s::uuid[])
"""


def apply_purchase(conn: Conn, event: PurchaseChanged, context: HandlingContext) -> None:
    """Record the purchase's contributions to its Post targets, if the Version is not older."""
    status = known(PurchaseStatus, event.status)
    if status is None:
        context.unknown_value("Status", event.status)
    applied = conn.execute(_UPSERT_PURCHASE, (event.purchase_id, event.tenant_id, event.status, event.version))
    if applied.fetchone() is None:
        log.info("older purchase version ignored", purchase_id=str(event.purchase_id), version=event.version)
        return
    active = contributes(status)
    posts: list[Any] = []
    for target in event.targets:
        target_kind = known(TargetKind, target.target_kind)
        if target_kind is None:
            context.unknown_value("TargetKind", target.target_kind)
            continue
        if target_kind is not TargetKind.POST:
            continue  # catalog keeps the boost of Projects and PropertyObjects
        conn.execute(
            _UPSERT_CONTRIBUTION,
            (event.purchase_id, target.target_id, event.tenant_id, event.boost_weight, active, event.version),
        )
        posts.append(target.target_id)
    conn.execute(_DEACTIVATE_DROPPED, (event.version, event.purchase_id, posts))


def _parse(payload: Mapping[str, Any]) -> PurchaseChanged:
    return PurchaseChanged.model_validate(payload)


def routes() -> dict[str, Route[Any]]:
    """The topics news reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: Route(_parse, apply_purchase)}
