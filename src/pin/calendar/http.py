"""The calendar's HTTP routes (SPEC section 9): parse, call one use case, map the result or the domain error.

JSON is camelCase; every resource carries ``ETag: "<Version>"``; a state-changing request may send
``If-Match`` (a mismatch answers 412). Domain errors become RFC 9457 problem documents in :func:`_problem_of`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from pin.api.auth import Principal, Role, require_roles
from pin.api.bodies import FromString, RequestBody, Rfc3339, Uuid
from pin.api.deps import AppSettings, IfMatch, Pool, etag
from pin.api.problems import ApiProblem
from pin.calendar import domain, service
from pin.calendar.domain import Appointment, AvailabilitySlot, CalendarEvent, Kind
from pin.messaging.contracts import utc_iso
from pin.outbox.writer import MessageContext

router = APIRouter(prefix="/calendar", tags=["calendar"])

Agent = Annotated[Principal, require_roles(Role.AGENT)]
Investor = Annotated[Principal, require_roles(Role.INVESTOR)]
AgentOrInvestor = Annotated[Principal, require_roles(Role.AGENT, Role.INVESTOR)]

# ------------------------------------------------------------------------------------------ request bodies

# Times outside this range cannot be a real meeting, and would overflow the reminder arithmetic.
_MIN_YEAR, _MAX_YEAR = 2000, 2999


class CreateSlotBody(RequestBody):
    """POST /calendar/slots."""

    start_at: Rfc3339
    end_at: Rfc3339
    time_zone: str = Field(max_length=64)
    kind: Annotated[Kind, FromString]
    # the domain refuses a negative value with its own code; the bound keeps it in a database integer
    min_lead_time_minutes: int = Field(default=0, le=1_000_000)
    auto_confirm: bool = False

    @field_validator("start_at", "end_at")
    @classmethod
    def _plausible(cls, value: datetime) -> datetime:
        if not _MIN_YEAR <= value.year <= _MAX_YEAR:
            raise ValueError(f"must be between the years {_MIN_YEAR} and {_MAX_YEAR}")
        return value


class ReasonBody(RequestBody):
    """A free-text reason (decline, cancel); it stays inside calendar."""

    reason: str | None = Field(default=None, max_length=2000)


class RescheduleBody(RequestBody):
    """POST /calendar/my/appointments/{id}/reschedule."""

    new_slot_id: Uuid


# ------------------------------------------------------------------------------------------ response models

# Times are ISO 8601 in UTC with a Z suffix; ids are UUID strings.
_Time = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
_Uuid = Annotated[str, Field(json_schema_extra={"format": "uuid"})]


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class SlotOut(_Out):
    """An availability slot."""

    id: _Uuid
    tenant_id: _Uuid
    agent_user_id: _Uuid
    kind: Kind
    start_at: _Time
    end_at: _Time
    time_zone: str
    min_lead_time_minutes: int
    auto_confirm: bool
    status: domain.SlotStatus
    version: int
    created_at: _Time
    updated_at: _Time


class AppointmentOut(_Out):
    """An appointment (its free-text cancelReason is shown to its parties only, never published)."""

    id: _Uuid
    tenant_id: _Uuid
    slot_id: _Uuid
    agent_user_id: _Uuid
    investor_user_id: _Uuid
    kind: Kind
    start_at: _Time
    end_at: _Time
    time_zone: str
    status: domain.AppointmentStatus
    pending_expires_at: _Time | None
    calendar_event_id: _Uuid
    cancelled_by: domain.CancelledBy | None
    cancel_reason: str | None
    rescheduled_to_appointment_id: _Uuid | None
    rescheduled_from_appointment_id: _Uuid | None
    version: int
    created_at: _Time
    updated_at: _Time


class ReminderOut(_Out):
    """A reminder of a calendar event."""

    id: _Uuid
    remind_at: _Time
    status: domain.ReminderStatus


class EventOut(_Out):
    """A calendar event with its reminders."""

    id: _Uuid
    tenant_id: _Uuid
    owner_user_id: _Uuid
    origin: domain.Origin
    appointment_id: _Uuid | None
    start_at: _Time
    end_at: _Time
    time_zone: str
    status: domain.EventStatus
    cancel_reason: str | None
    version: int
    created_at: _Time
    updated_at: _Time
    reminders: list[ReminderOut]


# --------------------------------------------------------------------------------------------- responses


def _time(value: datetime | None) -> str | None:
    return utc_iso(value) if value is not None else None


def _id(value: uuid.UUID | None) -> str | None:
    return str(value) if value is not None else None


def slot_json(slot: AvailabilitySlot) -> dict[str, Any]:
    """A slot as the API shows it."""
    return {
        "id": str(slot.id),
        "tenantId": str(slot.tenant_id),
        "agentUserId": str(slot.agent_user_id),
        "kind": slot.kind.value,
        "startAt": _time(slot.start_at),
        "endAt": _time(slot.end_at),
        "timeZone": slot.time_zone,
        "minLeadTimeMinutes": slot.min_lead_time_minutes,
        "autoConfirm": slot.auto_confirm,
        "status": slot.status.value,
        "version": slot.version,
        "createdAt": _time(slot.created_at),
        "updatedAt": _time(slot.updated_at),
    }


def appointment_json(appointment: Appointment) -> dict[str, Any]:
    """An appointment as the API shows it (to its agent and investor)."""
    return {
        "id": str(appointment.id),
        "tenantId": str(appointment.tenant_id),
        "slotId": str(appointment.slot_id),
        "agentUserId": str(appointment.agent_user_id),
        "investorUserId": str(appointment.investor_user_id),
        "kind": appointment.kind.value,
        "startAt": _time(appointment.start_at),
        "endAt": _time(appointment.end_at),
        "timeZone": appointment.time_zone,
        "status": appointment.status.value,
        "pendingExpiresAt": _time(appointment.pending_expires_at),
        "calendarEventId": str(appointment.calendar_event_id),
        "cancelledBy": appointment.cancelled_by.value if appointment.cancelled_by else None,
        "cancelReason": appointment.cancel_reason,
        "rescheduledToAppointmentId": _id(appointment.rescheduled_to_appointment_id),
        "rescheduledFromAppointmentId": _id(appointment.rescheduled_from_appointment_id),
        "version": appointment.version,
        "createdAt": _time(appointment.created_at),
        "updatedAt": _time(appointment.updated_at),
    }


def event_json(event: CalendarEvent) -> dict[str, Any]:
    """A calendar event with its reminders."""
    return {
        "id": str(event.id),
        "tenantId": str(event.tenant_id),
        "ownerUserId": str(event.owner_user_id),
        "origin": event.origin.value,
        "appointmentId": _id(event.appointment_id),
        "startAt": _time(event.start_at),
        "endAt": _time(event.end_at),
        "timeZone": event.time_zone,
        "status": event.status.value,
        "cancelReason": event.cancel_reason,
        "version": event.version,
        "createdAt": _time(event.created_at),
        "updatedAt": _time(event.updated_at),
        "reminders": [
            {"id": str(r.id), "remindAt": _time(r.remind_at), "status": r.status.value} for r in event.reminders
        ],
    }


def _respond(response: Response, body: dict[str, Any], version: int) -> dict[str, Any]:
    response.headers["ETag"] = etag(version)
    return body


# ------------------------------------------------------------------------------------------------ errors

# One place where domain errors become problem documents; the most specific class is matched first.
_PROBLEMS: tuple[tuple[type[domain.DomainError], int, str], ...] = (
    (domain.SlotNotFoundError, 404, "slot-not-found"),
    (domain.AppointmentNotFoundError, 404, "appointment-not-found"),
    (domain.CalendarEventNotFoundError, 404, "calendar-event-not-found"),
    (domain.InvalidTimeZoneError, 422, "invalid-time-zone"),
    (domain.EndNotAfterStartError, 422, "end-before-start"),
    (domain.StartInPastError, 422, "start-in-past"),
    (domain.InvalidLeadTimeError, 422, "invalid-lead-time"),
    (domain.ReasonRequiredError, 422, "reason-required"),
    (domain.SameSlotError, 422, "same-slot"),
    (domain.SlotNotAvailableError, 409, "slot-not-available"),
    (domain.LeadTimePassedError, 409, "lead-time-passed"),
    (domain.AppointmentNotPendingError, 409, "appointment-not-pending"),
    (domain.AppointmentNotActiveError, 409, "appointment-not-active"),
    (domain.InvalidTransitionError, 409, "invalid-transition"),
    (domain.CancelCutoffPassedError, 409, "cancel-cutoff-passed"),
    (domain.ConflictError, 409, "concurrent-modification"),
    (domain.VersionMismatchError, 412, "version-mismatch"),
    (domain.CascadeInconsistentError, 409, "inconsistent-state"),
    (domain.NotDueYetError, 409, "not-due"),
)


def _problem_of(error: domain.DomainError) -> ApiProblem:
    for error_type, http_status, code in _PROBLEMS:
        if isinstance(error, error_type):
            return ApiProblem(http_status, code, str(error))
    return ApiProblem(409, "calendar-rule", str(error))


@contextmanager
def _domain_errors() -> Iterator[None]:
    try:
        yield
    except domain.DomainError as exc:
        raise _problem_of(exc) from exc


# ----------------------------------------------------------------------------------------------- context

_CORRELATION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _calendar(request: Request, pool: Pool, settings: AppSettings) -> service.Calendar:
    """The use cases' dependencies for this request; the correlation id is the caller's or a new one."""
    given = request.headers.get("x-correlation-id") or request.headers.get("x-request-id") or ""
    correlation_id = given if _CORRELATION_ID.match(given) else str(uuid.uuid4())
    return service.Calendar(pool, service.CalendarPolicy.from_settings(settings), MessageContext(correlation_id))


def _actor(principal: Principal) -> service.Actor:
    return service.Actor(principal.user_id, principal.tenant_id)


# ------------------------------------------------------------------------------------------------ routes


@router.post("/slots", status_code=status.HTTP_201_CREATED, response_model=SlotOut)
def create_slot(
    *, body: CreateSlotBody, principal: Agent, request: Request, response: Response, pool: Pool, settings: AppSettings
) -> dict[str, Any]:
    """An agent offers a slot."""
    with _domain_errors():
        slot = service.create_slot(
            _calendar(request, pool, settings),
            _actor(principal),
            kind=body.kind,
            start_at=body.start_at,
            end_at=body.end_at,
            time_zone=body.time_zone,
            min_lead_time_minutes=body.min_lead_time_minutes,
            auto_confirm=body.auto_confirm,
        )
    response.headers["Location"] = f"/calendar/slots/{slot.id}"
    return _respond(response, slot_json(slot), slot.version)


@router.get("/slots/{slot_id}", response_model=SlotOut)
def get_slot(slot_id: uuid.UUID, principal: AgentOrInvestor, response: Response, pool: Pool) -> dict[str, Any]:
    """A slot: any of the tenant's for an investor, only their own for an agent."""
    with _domain_errors():
        slot = service.get_slot(pool, _actor(principal), slot_id, any_of_tenant=principal.has(Role.INVESTOR))
    return _respond(response, slot_json(slot), slot.version)


@router.post("/slots/{slot_id}/book", status_code=status.HTTP_201_CREATED, response_model=AppointmentOut)
def book_slot(
    *,
    slot_id: uuid.UUID,
    principal: Investor,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
) -> dict[str, Any]:
    """An investor books a slot (If-Match refers to the slot's Version)."""
    with _domain_errors():
        cluster = service.book_slot(
            _calendar(request, pool, settings), _actor(principal), slot_id, expected_version=if_match
        )
    appointment = cluster.appointment
    response.headers["Location"] = f"/calendar/appointments/{appointment.id}"
    return _respond(response, appointment_json(appointment), appointment.version)


@router.get("/appointments/{appointment_id}", response_model=AppointmentOut)
def get_appointment(
    *, appointment_id: uuid.UUID, principal: AgentOrInvestor, response: Response, pool: Pool
) -> dict[str, Any]:
    """An appointment, to its agent or its investor."""
    sides = frozenset(
        side
        for side, role in ((service.Side.AGENT, Role.AGENT), (service.Side.INVESTOR, Role.INVESTOR))
        if principal.has(role)
    )
    with _domain_errors():
        appointment = service.get_appointment(pool, _actor(principal), appointment_id, sides=sides)
    return _respond(response, appointment_json(appointment), appointment.version)


@router.post("/appointments/{appointment_id}/confirm", response_model=AppointmentOut)
def confirm_appointment(
    *,
    appointment_id: uuid.UUID,
    principal: Agent,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
) -> dict[str, Any]:
    """Its agent confirms a Pending appointment."""
    with _domain_errors():
        appointment = service.confirm_appointment(
            _calendar(request, pool, settings), _actor(principal), appointment_id, expected_version=if_match
        )
    return _respond(response, appointment_json(appointment), appointment.version)


@router.post("/appointments/{appointment_id}/decline", response_model=AppointmentOut)
def decline_appointment(
    *,
    appointment_id: uuid.UUID,
    principal: Agent,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
    body: Annotated[ReasonBody | None, Body()] = None,
) -> dict[str, Any]:
    """Its agent declines a Pending appointment; the reason is required."""
    with _domain_errors():
        appointment = service.decline_appointment(
            _calendar(request, pool, settings),
            _actor(principal),
            appointment_id,
            body.reason if body else None,
            expected_version=if_match,
        )
    return _respond(response, appointment_json(appointment), appointment.version)


@router.post("/appointments/{appointment_id}/cancel", response_model=AppointmentOut)
def cancel_appointment(
    *,
    appointment_id: uuid.UUID,
    principal: Agent,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
    body: Annotated[ReasonBody | None, Body()] = None,
) -> dict[str, Any]:
    """Its agent cancels a Pending or Confirmed appointment; the reason is required."""
    with _domain_errors():
        appointment = service.cancel_appointment_by_agent(
            _calendar(request, pool, settings),
            _actor(principal),
            appointment_id,
            body.reason if body else None,
            expected_version=if_match,
        )
    return _respond(response, appointment_json(appointment), appointment.version)


@router.post("/my/appointments/{appointment_id}/cancel", response_model=AppointmentOut)
def cancel_my_appointment(
    *,
    appointment_id: uuid.UUID,
    principal: Investor,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
    body: Annotated[ReasonBody | None, Body()] = None,
) -> dict[str, Any]:
    """Its investor cancels until the cutoff; the reason is optional."""
    with _domain_errors():
        appointment = service.cancel_my_appointment(
            _calendar(request, pool, settings),
            _actor(principal),
            appointment_id,
            body.reason if body else None,
            expected_version=if_match,
        )
    return _respond(response, appointment_json(appointment), appointment.version)


@router.post(
    "/my/appointments/{appointment_id}/reschedule", status_code=status.HTTP_201_CREATED, response_model=AppointmentOut
)
def reschedule_my_appointment(
    *,
    appointment_id: uuid.UUID,
    body: RescheduleBody,
    principal: Investor,
    request: Request,
    response: Response,
    pool: Pool,
    settings: AppSettings,
    if_match: IfMatch,
) -> dict[str, Any]:
    """Its investor moves the appointment to another slot: the new appointment (If-Match: the old one's Version)."""
    with _domain_errors():
        cluster = service.reschedule_my_appointment(
            _calendar(request, pool, settings),
            _actor(principal),
            appointment_id,
            body.new_slot_id,
            expected_version=if_match,
        )
    appointment = cluster.appointment
    response.headers["Location"] = f"/calendar/appointments/{appointment.id}"
    return _respond(response, appointment_json(appointment), appointment.version)


@router.get("/events/{event_id}", response_model=EventOut)
def get_event(event_id: uuid.UUID, principal: Agent, response: Response, pool: Pool) -> dict[str, Any]:
    """A calendar event of its owner, with its reminders."""
    with _domain_errors():
        event = service.get_event(pool, _actor(principal), event_id)
    return _respond(response, event_json(event), event.version)
