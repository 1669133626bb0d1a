"""The post replica and its PromotionBoost (the read side of news, and the stand-in feed of posts)."""

from __future__ import annotations

import uuid
from typing import Any

from pin.db import Conn, load_queries
from pin.messaging.contracts import utc_iso

_QUERIES = load_queries(__package__)
_POST_WITH_BOOST = _QUERIES["post_with_boost"]
_UPSERT_POST = _QUERIES["post_upsert"]


class PostVersionMismatchError(Exception):
    """The post's Version is not the one If-Match names."""


def put_post(conn: Conn, *, post_id: uuid.UUID, tenant_id: uuid.UUID, published: bool, if_match: int | None) -> bool:
    """Create or replace a post in the replica; True when it was created."""
    row = conn.execute(_UPSERT_POST, (post_id, tenant_id, published, if_match, if_match)).fetchone()
    if row is None:  # the post exists in this tenant and the If-Match guard refused the update
        raise PostVersionMismatchError
    return bool(row["created"])


def post_with_boost(conn: Conn, *, post_id: uuid.UUID, tenant_id: uuid.UUID) -> dict[str, Any] | None:
    """The post as camelCase JSON with its promotionBoost, or None when the tenant has no such post."""
    row = conn.execute(_POST_WITH_BOOST, (post_id, tenant_id)).fetchone()
    return _json(row) if row is not None else None


def _json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "published": row["published"],
        "promotionBoost": int(row["promotion_boost"]),
        "version": row["version"],
        "updatedAt": utc_iso(row["updated_at"]),
    }
