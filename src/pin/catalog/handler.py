"""catalog's handler of purchase-changed: the boost contributions of Projects and PropertyObjects (seed 002)."""

from __future__ import annotations

import uuid
from typing import Any

import structlog

from pin.boost.contributions import BoostTables, purchase_route
from pin.boost.domain import TargetKind
from pin.catalog.domain import card_kind_of
from pin.messaging import topics
from pin.messaging.consumer import Route

log = structlog.get_logger(__name__)

_UPSERT_CONTRIBUTION = """
INSERT INTO catalog.boost_contribution AS c
    (purchase_id, target_kind, target_id, tenant_id, boost_weight, active, purchase_version)
SELECT r.purchase_id, r.target_kind, r.target_id, r.tenant_id, r.boost_weight, r.active, r.purchase_version
FROM unnest(%b::uuid[], %b::text[], %b::uuid[], %b::uuid[], %b::int[], %b::bool[], %b::int[], %b::int[])
    AS r(purchase_id, target_kind, target_id, tenant_id, boost_weight, active, purchase_version, final_version)
WHERE EXISTS (SELECT FROM catalog.purchase AS p WHERE p.purchase_id = r.purchase_id AND p.version = r.final_version)
ON CONFLICT (purchase_id, target_kind, target_id) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version
"""

# A target a newer Version no longer names stops contributing.
_DEACTIVATE_DROPPED = """
UPDATE catalog.boost_contribution AS c
SET active = false, purchase_version = d.first_version, updated_at = now()
FROM unnest(%b::uuid[], %b::int[], %b::int[]) AS d(purchase_id, first_version, final_version)
WHERE c.purchase_id = d.purchase_id AND c.active
  AND NOT EXISTS (
      SELECT FROM unnest(%b::uuid[], %b::text[], %b::uuid[]) AS n(purchase_id, target_kind, target_id)
      WHERE n.purchase_id = c.purchase_id AND n.target_kind = c.target_kind AND n.target_id = c.target_id
  )
  AND EXISTS (SELECT FROM catalog.purchase AS p WHERE p.purchase_id = d.purchase_id AND p.version = d.final_version)
"""


def _card_key(target_kind: TargetKind, target_id: uuid.UUID) -> tuple[str, uuid.UUID] | None:
    """(card kind, id) of a Project or PropertyObject; None for a Post (news keeps its boost)."""
    card_kind = card_kind_of(target_kind)
    return (card_kind.value, target_id) if card_kind is not None else None


CARD_BOOST = BoostTables(
    schema="catalog",
    upsert_contribution=_UPSERT_CONTRIBUTION,
    deactivate_dropped=_DEACTIVATE_DROPPED,
    key_of=_card_key,
    key_columns=2,
)


def routes() -> dict[str, Route[Any]]:
    """The topics catalog reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: purchase_route(CARD_BOOST, log)}
