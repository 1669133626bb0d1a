"""The calendar's HTTP routes (SPEC section 9): parse, call one use case, answer the resource with its ETag."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Response, status
from pydantic import Field, field_validator

from pin.api.auth import Principal, Role, require_roles
from pin.api.bodies import FromString, RequestBody, ResponseBody, Rfc3339, UtcTime, Uuid
from pin.api.deps import AppSettings, CorrelationId, IfMatch, Outbox, Pool, tagged
from pin.api.problems import DomainProblem, ProblemTable
from pin.calendar import domain, service
from pin.calendar.domain import Appointment, Kind

router = APIRouter(prefix="/calendar", tags=["calendar"])

# How the calendar's domain errors answer (pin.api.problems looks an error up along its MRO: DomainError last).
PROBLEMS: ProblemTable = {
    domain.SlotNotFoundError: DomainProblem(404, "slot-not-found"),
    domain.AppointmentNotFoundError: DomainProblem(404, "appointment-not-found"),
    domain.CalendarEventNotFoundError: DomainProblem(404, "calendar-event-not-found"),
    domain.InvalidTimeZoneError: DomainProblem(422, "invalid-time-zone"),
    domain.EndNotAfterStartError: DomainProblem(422, "end-before-start"),
    domain.StartInPastError: DomainProblem(422, "start-in-past"),
    domain.InvalidLeadTimeError: DomainProblem(422, "invalid-lead-time"),
    domain.ReasonRequiredError: DomainProblem(422, "reason-required"),
    domain.SameSlotError: DomainProblem(422, "same-slot"),
    domain.SlotNotAvailableError: DomainProblem(409, "slot-not-available"),
    domain.LeadTimePassedError: DomainProblem(409, "lead-time-passed"),
    domain.AppointmentNotPendingError: DomainProblem(409, "appointment-not-pending"),
    domain.AppointmentNotActiveError: DomainProblem(409, "appointment-not-active"),
    domain.InvalidTransitionError: DomainProblem(409, "invalid-transition"),
    domain.CancelCutoffPassedError: DomainProblem(409, "cancel-cutoff-passed"),
    domain.ConflictError: DomainProblem(409, "concurrent-modification"),
    domain.VersionMismatchError: DomainProblem(412, "version-mismatch"),
    domain.CascadeInconsistentError: DomainProblem(409, "inconsistent-state"),
    domain.NotDueYetError: DomainProblem(409, "not-due"),
    domain.DomainError: DomainProblem(409, "calendar-rule"),
}

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


class SlotOut(ResponseBody):
    """An availability slot."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    kind: Kind
    start_at: UtcTime
    end_at: UtcTime
    time_zone: str
    min_lead_time_minutes: int
    auto_confirm: bool
    status: domain.SlotStatus
    version: int
    created_at: UtcTime
    updated_at: UtcTime


class AppointmentOut(ResponseBody):
    """An appointment (its free-text cancelReason is shown to its parties only, never published)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    slot_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcTime
    end_at: UtcTime
    time_zone: str
    status: domain.AppointmentStatus
    pending_expires_at: UtcTime | None
    calendar_event_id: uuid.UUID
    cancelled_by: domain.CancelledBy | None
    cancel_reason: str | None
    rescheduled_to_appointment_id: uuid.UUID | None
    rescheduled_from_appointment_id: uuid.UUID | None
    version: int
    created_at: UtcTime
    updated_at: UtcTime


class ReminderOut(ResponseBody):
    """A reminder of a calendar event."""

    id: uuid.UUID
    remind_at: UtcTime
    status: domain.ReminderStatus


class EventOut(ResponseBody):
    """A calendar event with its reminders."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: domain.Origin
    appointment_id: uuid.UUID | None
    start_at: UtcTime
    end_at: UtcTime
    time_zone: str
    status: domain.EventStatus
    cancel_reason: str | None
    version: int
    created_at: UtcTime
    updated_at: UtcTime
    reminders: list[ReminderOut]


def _appointment(response: Response, appointment: Appointment) -> AppointmentOut:
    return tagged(response, AppointmentOut.model_validate(appointment), appointment.version)


# ----------------------------------------------------------------------------------------------- context


def _calendar(
    pool: Pool, settings: AppSettings, outbox: Outbox, correlation_id: CorrelationId
) -> service.UseCaseContext:
    """The use cases' dependencies for this request."""
    return service.UseCaseContext.for_request(pool, settings, outbox, correlation_id)


UseCases = Annotated[service.UseCaseContext, Depends(_calendar)]
# decline, cancel by the agent, cancel by the investor: (calendar, actor, id, reason, expected_version=)
_EndingUseCase = Callable[..., Appointment]


def _actor(principal: Principal) -> service.Actor:
    return service.Actor(principal.user_id, principal.tenant_id)


class _EndingRequest:
    """A request that ends an appointment (decline, cancel by either side): its id, optional reason and If-Match."""

    def __init__(
        self,
        *,
        appointment_id: uuid.UUID,
        response: Response,
        calendar: UseCases,
        if_match: IfMatch,
        body: Annotated[ReasonBody | None, Body()] = None,
    ) -> None:
        self.appointment_id, self.response, self.calendar, self.if_match = appointment_id, response, calendar, if_match
        self.reason = body.reason if body else None

    def by(self, end: _EndingUseCase, principal: Principal) -> AppointmentOut:
        """Run one of the ending use cases as ``principal`` and answer the appointment."""
        ended = end(self.calendar, _actor(principal), self.appointment_id, self.reason, expected_version=self.if_match)
        return _appointment(self.response, ended)


EndingRequest = Annotated[_EndingRequest, Depends()]


# ------------------------------------------------------------------------------------------------ routes


@router.post("/slots", status_code=status.HTTP_201_CREATED, response_model=SlotOut)
def create_slot(*, body: CreateSlotBody, principal: Agent, response: Response, calendar: UseCases) -> SlotOut:
    """An agent offers a slot."""
    slot = service.create_slot(
        calendar,
        _actor(principal),
        kind=body.kind,
        start_at=body.start_at,
        end_at=body.end_at,
        time_zone=body.time_zone,
        min_lead_time_minutes=body.min_lead_time_minutes,
        auto_confirm=body.auto_confirm,
    )
    response.headers["Location"] = f"/calendar/slots/{slot.id}"
    return tagged(response, SlotOut.model_validate(slot), slot.version)


@router.get("/slots/{slot_id}", response_model=SlotOut)
def get_slot(slot_id: uuid.UUID, principal: AgentOrInvestor, response: Response, pool: Pool) -> SlotOut:
    """A slot: any of the tenant's for an investor, only their own for an agent."""
    slot = service.get_slot(pool, _actor(principal), slot_id, any_of_tenant=principal.has(Role.INVESTOR))
    return tagged(response, SlotOut.model_validate(slot), slot.version)


@router.post("/slots/{slot_id}/book", status_code=status.HTTP_201_CREATED, response_model=AppointmentOut)
def book_slot(
    *, slot_id: uuid.UUID, principal: Investor, response: Response, calendar: UseCases, if_match: IfMatch
) -> AppointmentOut:
    """An investor books a slot (If-Match refers to the slot's Version)."""
    cluster = service.book_slot(calendar, _actor(principal), slot_id, expected_version=if_match)
    response.headers["Location"] = f"/calendar/appointments/{cluster.appointment.id}"
    return _appointment(response, cluster.appointment)


@router.get("/appointments/{appointment_id}", response_model=AppointmentOut)
def get_appointment(
    *, appointment_id: uuid.UUID, principal: AgentOrInvestor, response: Response, pool: Pool
) -> AppointmentOut:
    """An appointment, to its agent or its investor."""
    sides = frozenset(
        side
        for side, role in ((service.Side.AGENT, Role.AGENT), (service.Side.INVESTOR, Role.INVESTOR))
        if principal.has(role)
    )
    return _appointment(response, service.get_appointment(pool, _actor(principal), appointment_id, sides=sides))


@router.post("/appointments/{appointment_id}/confirm", response_model=AppointmentOut)
def confirm_appointment(
    *, appointment_id: uuid.UUID, principal: Agent, response: Response, calendar: UseCases, if_match: IfMatch
) -> AppointmentOut:
    """Its agent confirms a Pending appointment."""
    appointment = service.confirm_appointment(calendar, _actor(principal), appointment_id, expected_version=if_match)
    return _appointment(response, appointment)


@router.post("/appointments/{appointment_id}/decline", response_model=AppointmentOut)
def decline_appointment(principal: Agent, request: EndingRequest) -> AppointmentOut:
    """Its agent declines a Pending appointment; the reason is required."""
    return request.by(service.decline_appointment, principal)


@router.post("/appointments/{appointment_id}/cancel", response_model=AppointmentOut)
def cancel_appointment(principal: Agent, request: EndingRequest) -> AppointmentOut:
    """Its agent cancels a Pending or Confirmed appointment; the reason is required."""
    return request.by(service.cancel_appointment_by_agent, principal)


@router.post("/my/appointments/{appointment_id}/cancel", response_model=AppointmentOut)
def cancel_my_appointment(principal: Investor, request: EndingRequest) -> AppointmentOut:
    """Its investor cancels until the cutoff; the reason is optional."""
    return request.by(service.cancel_my_appointment, principal)


@router.post(
    "/my/appointments/{appointment_id}/reschedule", status_code=status.HTTP_201_CREATED, response_model=AppointmentOut
)
def reschedule_my_appointment(
    *,
    appointment_id: uuid.UUID,
    body: RescheduleBody,
    principal: Investor,
    response: Response,
    calendar: UseCases,
    if_match: IfMatch,
) -> AppointmentOut:
    """Its investor moves the appointment to another slot: the new appointment (If-Match: the old one's Version)."""
    cluster = service.reschedule_my_appointment(
        calendar, _actor(principal), appointment_id, body.new_slot_id, expected_version=if_match
    )
    response.headers["Location"] = f"/calendar/appointments/{cluster.appointment.id}"
    return _appointment(response, cluster.appointment)


@router.get("/events/{event_id}", response_model=EventOut)
def get_event(event_id: uuid.UUID, principal: Agent, response: Response, pool: Pool) -> EventOut:
    """A calendar event of its owner, with its reminders."""
    event = service.get_event(pool, _actor(principal), event_id)
    return tagged(response, EventOut.model_validate(event), event.version)
