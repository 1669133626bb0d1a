"""The card replica and its PromotionBoost (the read side of catalog, and the stand-in feed of cards)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pin.catalog.domain import CardKind
from pin.db import Conn, load_queries
from pin.messaging.contracts import utc_iso

_QUERIES = load_queries(__package__)
_CARD_WITH_BOOST = _QUERIES["card_with_boost"]
_UPSERT_CARD = _QUERIES["card_upsert"]


class CardVersionMismatchError(Exception):
    """The card's Version is not the one If-Match names."""


@dataclass(frozen=True)
class CardInput:
    """A card as the replica feed sends it."""

    kind: CardKind
    id: uuid.UUID
    tenant_id: uuid.UUID
    project_id: uuid.UUID | None
    published: bool


def put_card(conn: Conn, card: CardInput, *, if_match: int | None) -> bool:
    """Create or replace a card in the replica; True when it was created."""
    row = conn.execute(
        _UPSERT_CARD,
        (card.kind.value, card.id, card.tenant_id, card.project_id, card.published, if_match, if_match),
    ).fetchone()
    if row is None:  # the card exists in this tenant and the If-Match guard refused the update
        raise CardVersionMismatchError
    return bool(row["created"])


def card_with_boost(conn: Conn, *, kind: CardKind, card_id: uuid.UUID, tenant_id: uuid.UUID) -> dict[str, Any] | None:
    """The card as camelCase JSON with its promotionBoost, or None when the tenant has no such card."""
    row = conn.execute(_CARD_WITH_BOOST, (kind.value, card_id, tenant_id)).fetchone()
    return _json(row) if row is not None else None


def _json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": row["kind"],
        "id": str(row["id"]),
        "projectId": str(row["project_id"]) if row["project_id"] is not None else None,
        "published": row["published"],
        "promotionBoost": int(row["promotion_boost"]),
        "version": row["version"],
        "updatedAt": utc_iso(row["updated_at"]),
    }
