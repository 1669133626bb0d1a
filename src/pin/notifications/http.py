"""notifications' HTTP routes: the caller's own notifications (SPEC section 9)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from pin.api.auth import Principal, current_principal
from pin.api.bodies import ResponseBody, UtcTime
from pin.api.deps import Pool
from pin.api.problems import ProblemTable
from pin.notifications.queries import notifications_of

router = APIRouter(tags=["notifications"])

# How notifications' errors answer (pin.api.problems): the list is read only, it raises none of its own.
PROBLEMS: ProblemTable = {}


class NotificationOut(ResponseBody):
    """A notification: what it is about (subjectId) and its text."""

    id: uuid.UUID
    kind: str
    template_key: str
    text: str
    subject_id: uuid.UUID
    created_at: UtcTime


class NotificationsOut(ResponseBody):
    """The caller's notifications, newest first."""

    items: list[NotificationOut]


@router.get("/notifications", response_model=NotificationsOut)
def get_my_notifications(
    pool: Pool,
    principal: Annotated[Principal, Depends(current_principal)],
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """The caller's notifications in the caller's tenant, newest first."""
    with pool.connection() as conn:
        items = notifications_of(conn, tenant_id=principal.tenant_id, user_id=principal.user_id, limit=limit)
    return {"items": items}
