"""crm's HTTP routes: the lead feed (SPEC section 9)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query

from pin.api.auth import Principal, Role, require_roles
from pin.api.bodies import ResponseBody, UtcTime
from pin.api.deps import Pool
from pin.api.problems import ProblemTable
from pin.crm.queries import lead_feed

router = APIRouter(prefix="/crm", tags=["crm"])

# How crm's errors answer (pin.api.problems): the lead feed is read only, it raises none of its own.
PROBLEMS: ProblemTable = {}


class LeadFeedEntryOut(ResponseBody):
    """One entry of a lead's feed (the appointment fields are null until the event that carries them arrives)."""

    id: uuid.UUID
    appointment_id: uuid.UUID
    entry_kind: str
    reason: str | None
    text: str
    appointment_kind: str | None
    start_at: UtcTime | None
    time_zone: str | None
    rescheduled_to_appointment_id: uuid.UUID | None
    rescheduled_start_at: UtcTime | None
    occurred_at: UtcTime
    recorded_at: UtcTime


class LeadFeedOut(ResponseBody):
    """The lead feed of one investor, newest first."""

    investor_user_id: uuid.UUID
    entries: list[LeadFeedEntryOut]


@router.get("/leads/{investorUserId}/feed", response_model=LeadFeedOut)
def get_lead_feed(
    investorUserId: uuid.UUID,  # noqa: N803 - the path parameter's public name
    pool: Pool,
    principal: Annotated[Principal, require_roles(Role.AGENT, Role.MANAGER)],
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """The lead feed of one investor in the caller's tenant (newest first); empty when there is none."""
    with pool.connection() as conn:
        entries = lead_feed(conn, tenant_id=principal.tenant_id, investor_user_id=investorUserId, limit=limit)
    return {"investorUserId": investorUserId, "entries": entries}
