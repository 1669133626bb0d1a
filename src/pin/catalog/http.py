"""catalog's HTTP routes: the stand-in feed of cards and a card with its promotionBoost (SPEC section 9)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from pin.api.auth import Principal, Role, current_principal, require_roles
from pin.api.bodies import RequestBody, Uuid
from pin.api.deps import IfMatch, Pool, etag
from pin.api.problems import ApiProblem
from pin.catalog.cards import CardInput, CardVersionMismatchError, card_with_boost, put_card
from pin.catalog.domain import CardKind

router = APIRouter(prefix="/catalog", tags=["catalog"])


class CardBody(RequestBody):
    """PUT body: the project of a PropertyObject (none for a Project) and whether it is published."""

    project_id: Uuid | None = None
    published: bool


@router.put("/cards/{kind}/{card_id}")
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
        try:
            created = put_card(conn, card, if_match=if_match)
        except CardVersionMismatchError:
            raise ApiProblem(412, "precondition-failed", "the card changed since the given ETag") from None
        result = card_with_boost(conn, kind=kind, card_id=card_id, tenant_id=principal.tenant_id)
    assert result is not None
    response.status_code = 201 if created else 200
    response.headers["ETag"] = etag(result["version"])
    return result


@router.get("/cards/{kind}/{card_id}")
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
    if result is None:
        raise ApiProblem(404, "not-found", "no such card")
    response.headers["ETag"] = etag(result["version"])
    return result
