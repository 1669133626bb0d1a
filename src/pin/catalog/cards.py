"""The card replica and its PromotionBoost (the read side of catalog, and the stand-in feed of cards)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pin.catalog.domain import CardKind
from pin.db import Conn
from pin.messaging.contracts import utc_iso

# PromotionBoost = the sum of the active contributions of the same tenant to this card, plus, for a published
# PropertyObject, those to its project (seed 002: a Project's contribution cascades to its published objects).
_CARD_WITH_BOOST = """
SELECT c.kind, c.id, c.project_id, c.published, c.version, c.updated_at,
       COALESCE((
           SELECT sum(b.boost_weight) FROM catalog.boost_contribution AS b
           WHERE b.active AND b.tenant_id = c.tenant_id
             AND ((b.target_kind = c.kind AND b.target_id = c.id)
                  OR (c.kind = 'PropertyObject' AND c.published AND b.target_kind = 'Project'
                      AND b.target_id = c.project_id))
       ), 0)::bigint AS promotion_boost
FROM catalog.card AS c
WHERE c.kind = %s AND c.id = %s AND c.tenant_id = %s
"""

# Ids are scoped by tenant (the primary key): another tenant's card with the same id is a different row.
_UPSERT_CARD = """
INSERT INTO catalog.card AS c (kind, id, tenant_id, project_id, published) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (tenant_id, kind, id) DO UPDATE
SET project_id = EXCLUDED.project_id, published = EXCLUDED.published, version = c.version + 1, updated_at = now()
WHERE %s::integer IS NULL OR c.version = %s::integer
RETURNING (xmax = 0) AS created
"""


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
