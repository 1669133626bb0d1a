"""notifications' HTTP routes: the caller's own notifications (SPEC section 9)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from pin.api.auth import Principal, current_principal
from pin.api.deps import Pool
from pin.notifications.queries import notifications_of

router = APIRouter(tags=["notifications"])


@router.get("/notifications")
def get_my_notifications(
    pool: Pool,
    principal: Annotated[Principal, Depends(current_principal)],
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """The caller's notifications in the caller's tenant, newest first."""
    with pool.connection() as conn:
        items = notifications_of(conn, tenant_id=principal.tenant_id, user_id=principal.user_id, limit=limit)
    return {"items": items}
