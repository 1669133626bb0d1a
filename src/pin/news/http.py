"""news' HTTP routes: the stand-in feed of posts and a post with its promotionBoost (SPEC section 9)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from pin.api.auth import Principal, Role, current_principal, require_roles
from pin.api.bodies import RequestBody, ResponseBody, UtcTime
from pin.api.deps import IfMatch, Pool, found, upserted
from pin.api.problems import DomainProblem, ProblemTable
from pin.news.posts import PostVersionMismatchError, post_with_boost, put_post

router = APIRouter(prefix="/news", tags=["news"])

# How news's errors answer (pin.api.problems).
PROBLEMS: ProblemTable = {
    PostVersionMismatchError: DomainProblem(412, "precondition-failed", "the post changed since the given ETag"),
}


class PostBody(RequestBody):
    """PUT body: whether the post is published."""

    published: bool


class PostOut(ResponseBody):
    """A post with its promotion boost."""

    id: uuid.UUID
    published: bool
    promotion_boost: int
    version: int
    updated_at: UtcTime


@router.put("/posts/{post_id}", response_model=PostOut)
def put_post_route(
    *,
    post_id: uuid.UUID,
    body: PostBody,
    response: Response,
    pool: Pool,
    if_match: IfMatch,
    principal: Annotated[Principal, require_roles(Role.ADMIN)],
) -> dict[str, Any]:
    """Create or replace a post of the caller's tenant (201 when created); answers it with its boost.

    Post ids are scoped by tenant: another tenant's post with the same id is neither seen nor changed.
    """
    tenant_id = principal.tenant_id
    with pool.connection() as conn:
        created = put_post(conn, post_id=post_id, tenant_id=tenant_id, published=body.published, if_match=if_match)
        return upserted(response, created, post_with_boost(conn, post_id=post_id, tenant_id=tenant_id))


@router.get("/posts/{post_id}", response_model=PostOut)
def get_post_route(
    post_id: uuid.UUID,
    response: Response,
    pool: Pool,
    principal: Annotated[Principal, Depends(current_principal)],
) -> dict[str, Any]:
    """A post of the caller's tenant with its promotionBoost."""
    with pool.connection() as conn:
        result = post_with_boost(conn, post_id=post_id, tenant_id=principal.tenant_id)
    return found(response, result, "no such post")
