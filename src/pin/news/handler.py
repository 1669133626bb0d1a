"""news' handler of purchase-changed: the boost contributions of posts (seed 002, step 3)."""

from __future__ import annotations

import uuid
from typing import Any

import structlog

from pin.boost.contributions import BoostTables, purchase_route
from pin.boost.domain import TargetKind
from pin.messaging import topics
from pin.messaging.consumer import Route

log = structlog.get_logger(__name__)

_UPSERT_CONTRIBUTION = """
INSERT INTO news.boost_contribution AS c
    (purchase_id, post_id, tenant_id, boost_weight, active, purchase_version)
SELECT r.purchase_id, r.post_id, r.tenant_id, r.boost_weight, r.active, r.purchase_version
FROM unnest(%b::uuid[], %b::uuid[], %b::uuid[], %b::int[], %b::bool[], %b::int[], %b::int[])
    AS r(purchase_id, post_id, tenant_id, boost_weight, active, purchase_version, final_version)
WHERE EXISTS (SELECT FROM news.purchase AS p WHERE p.purchase_id = r.purchase_id AND p.version = r.final_version)
ON CONFLICT (purchase_id, post_id) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version
"""

# A post a newer Version no longer names stops contributing.
_DEACTIVATE_DROPPED = """
UPDATE news.boost_contribution AS c
SET active = false, purchase_version = d.first_version, updated_at = now()
FROM unnest(%b::uuid[], %b::int[], %b::int[]) AS d(purchase_id, first_version, final_version)
WHERE c.purchase_id = d.purchase_id AND c.active
  AND NOT EXISTS (
      SELECT FROM unnest(%b::uuid[], %b::uuid[]) AS n(purchase_id, post_id)
      WHERE n.purchase_id = c.purchase_id AND n.post_id = c.post_id
  )
  AND EXISTS (SELECT FROM news.purchase AS p WHERE p.purchase_id = d.purchase_id AND p.version = d.final_version)
"""


def _post_key(target_kind: TargetKind, target_id: uuid.UUID) -> tuple[uuid.UUID] | None:
    """(post id,) of a Post; None for a Project or PropertyObject (catalog keeps their boost)."""
    return (target_id,) if target_kind is TargetKind.POST else None


POST_BOOST = BoostTables(
    schema="news",
    upsert_contribution=_UPSERT_CONTRIBUTION,
    deactivate_dropped=_DEACTIVATE_DROPPED,
    key_of=_post_key,
    key_columns=1,
)


def routes() -> dict[str, Route[Any]]:
    """The topics news reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: purchase_route(POST_BOOST, log)}
