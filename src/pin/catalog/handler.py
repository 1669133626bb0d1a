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


def _card_key(target_kind: TargetKind, target_id: uuid.UUID) -> tuple[str, uuid.UUID] | None:
    """(card kind, id) of a Project or PropertyObject; None for a Post (news keeps its boost)."""
    card_kind = card_kind_of(target_kind)
    return (card_kind.value, target_id) if card_kind is not None else None


CARD_BOOST = BoostTables(
    schema="catalog",
    key=(("target_kind", "text"), ("target_id", "uuid")),
    key_of=_card_key,
)


def routes() -> dict[str, Route[Any]]:
    """The topics catalog reads and how it handles each."""
    return {topics.PURCHASE_CHANGED: purchase_route(CARD_BOOST, log)}
