"""catalog's HTTP routes: the stand-in feed of cards and a card with its promotionBoost (SPEC section 9)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from pin.api.auth import Principal, Role, current_principal, require_roles
from pin.api.bodies import RequestBody, ResponseBody, UtcTime, Uuid
from pin.api.deps import IfMatch, Pool, found, upserted
from pin.api.problems import ApiProblem, DomainProblem, ProblemTable
from pin.catalog.cards import CardInput, CardVersionMismatchError, card_with_boost, put_card
from pin.catalog.domain import CardKind

router = APIRouter(prefix="/catalog", tags=["catalog"])

# How catalog's errors answer (pin.api.problems).
PROBLEMS: ProblemTable = {
    CardVersionMismatchError: DomainProblem(412, "precondition-failed", "the card changed since the given ETag"),
}


class CardBody(RequestBody):
    """PUT body: the project of a PropertyObject (none for a Project) and whether it is published."""

    project_id: Uuid | None = None
    published: bool


class CardOut(ResponseBody):
    """A card with the promotion boost of its target."""

    kind: CardKind
    id: uuid.UUID
    project_id: uuid.UUID | None
    published: bool
    promotion_boost: int
    version: int
    updated_at: UtcTime


@router.put("/cards/{kind}/{card_id}", response_model=CardOut)
def put_card_route(
    *,
    kind: CardKind,
    card_id: uuid.UUID,
    body: CardBody,
    response: Response,
    pool: Pool,
    if_match: IfMatch,
    principal: Annotated[Principal, require_roles(Role.ADMIN)],
) -> dict[str, Any]:
    """Create or replace a card of the caller's tenant (201 when created); answers it with its boost.

    Card ids are scoped by tenant: another tenant's card with the same id is neither seen nor changed.
    """
    if kind is CardKind.PROJECT and body.project_id is not None:
        raise ApiProblem(422, "validation-error", "a Project has no projectId")
    if kind is CardKind.PROPERTY_OBJECT and body.project_id is None:
        raise ApiProblem(422, "validation-error", "a PropertyObject needs its projectId")
    card = CardInput(kind, card_id, principal.tenant_id, body.project_id, body.published)
    with pool.connection() as conn:
        created = put_card(conn, card, if_match=if_match)
        return upserted(response, created, card_with_boost(conn, kind=kind, card_id=card_id, tenant_id=card.tenant_id))


@router.get("/cards/{kind}/{card_id}", response_model=CardOut)
def get_card_route(
    kind: CardKind,
    card_id: uuid.UUID,
    response: Response,
    pool: Pool,
    principal: Annotated[Principal, Depends(current_principal)],
) -> dict[str, Any]:
    """A card of the caller's tenant with its promotionBoost."""
    with pool.connection() as conn:
        result = card_with_boost(conn, kind=kind, card_id=card_id, tenant_id=principal.tenant_id)
    return found(response, result, "no such card")
