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


def _post_key(target_kind: TargetKind, target_id: uuid.UUID) -> tuple[uuid.UUID] | None:
    """(post id,) of a Post; None for a Project or PropertyObject (catalog keeps their boost)."""
    return (target_id,) if target_kind is TargetKind.POST else None


POST_BOOST = BoostTables(
    schema="news",
    key=(("post_id", "uuid"),),
    key_of=_post_key,
)


def routes() -> dict[str, Route[Any]]:
    """The topics news reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: purchase_route(POST_BOOST, log)}
