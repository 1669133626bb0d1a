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
SELECT %s, %s, %s, %s, %s, %s
WHERE EXISTS (SELECT FROM news.purchase WHERE purchase_id = %s AND version = %s)
ON CONFLICT (purchase_id, post_id) DO UPDATE
SET boost_weight = EXCLUDED.boost_weight, active = EXCLUDED.active,
    purchase_version = EXCLUDED.purchase_version, updated_at = now()
WHERE c.purchase_version <= EXCLUDED.purchase_version
"""

# A post a newer Version no longer names stops contributing.
_DEACTIVATE_DROPPED = """
UPDATE news.boost_contribution
SET active = false, purchase_version = %s, updated_at = now()
WHERE purchase_id = %s AND active AND post_id <> ALL(%s::uuid[])
  AND EXISTS (SELECT FROM news.purchase WHERE purchase_id = %s AND version = %s)
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
