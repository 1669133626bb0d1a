"""The calendar's integration-event contracts (SPEC section 6): exactly the fields of each table, never CancelReason.

``python -m pin.calendar.contracts [DIR]`` writes their JSON Schemas and AsyncAPI document (default docs/contracts).
"""

from __future__ import annotations

import sys
import uuid
from typing import Any, ClassVar

from pin.calendar import domain
from pin.calendar.domain import AppointmentStatus, CancelledBy, EventStatus, Kind, Origin, Reason
from pin.messaging import topics
from pin.messaging.contract_docs import ContractSet
from pin.messaging.contracts import Contract, UtcDateTime


class AppointmentSummary(Contract):
    """The appointment as appointment-cancelled and appointment-confirmed describe it; Key = AppointmentId."""

    KEY_FIELD: ClassVar[str] = "appointment_id"

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcDateTime
    time_zone: str


class AppointmentCancelledEvent(AppointmentSummary):
    """pin.calendar.appointment-cancelled: the appointment will not take place (seed 003)."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CANCELLED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-cancelled"

    reason: Reason
    # optional (seed 003): a reader copes with their absence; this producer always sends them, null or not
    cancelled_by: CancelledBy | None = None
    rescheduled_to_appointment_id: uuid.UUID | None = None


class AppointmentCreatedEvent(Contract):
    """pin.calendar.appointment-created: a booking or the second half of a reschedule."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CREATED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-created"
    KEY_FIELD: ClassVar[str] = "appointment_id"

    # not an AppointmentSummary: its published field order puts SlotId third
    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    slot_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcDateTime
    end_at: UtcDateTime
    time_zone: str
    status: AppointmentStatus
    pending_expires_at: UtcDateTime | None = None
    rescheduled_from_appointment_id: uuid.UUID | None = None


class AppointmentConfirmedEvent(AppointmentSummary):
    """pin.calendar.appointment-confirmed: the agent confirmed a Pending appointment."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CONFIRMED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-confirmed"


class CalendarEventStatusChangedEvent(Contract):
    """pin.calendar.event-status-changed: a calendar event was scheduled or cancelled."""

    TOPIC: ClassVar[str] = topics.EVENT_STATUS_CHANGED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.event-status-changed"
    KEY_FIELD: ClassVar[str] = "calendar_event_id"

    calendar_event_id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: Origin
    appointment_id: uuid.UUID | None = None
    status: EventStatus
    start_at: UtcDateTime
    end_at: UtcDateTime
    time_zone: str
    version: int


CALENDAR_CONTRACTS: tuple[type[Contract], ...] = (
    AppointmentCancelledEvent,
    AppointmentCreatedEvent,
    AppointmentConfirmedEvent,
    CalendarEventStatusChangedEvent,
)

_CONTRACT_OF: dict[type[Any], type[Contract]] = {
    domain.AppointmentCancelled: AppointmentCancelledEvent,
    domain.AppointmentCreated: AppointmentCreatedEvent,
    domain.AppointmentConfirmed: AppointmentConfirmedEvent,
    domain.CalendarEventStatusChanged: CalendarEventStatusChangedEvent,
}


def payload_of(event: domain.DomainEvent) -> tuple[type[Contract], str, dict[str, Any]]:
    """The contract type, Kafka key and payload of a domain event: the one builder of the calendar's contracts.
    Every field of the event but OccurredAt (the envelope's), built straight from the event's fields (the domain
    types them as the contract does) by :meth:`~pin.messaging.contracts.Contract.payload_from`, without building
    and dumping the model; tests/calendar/test_contract_payloads.py checks it against the committed schemas."""
    contract_type = _CONTRACT_OF[type(event)]
    fields = vars(event)  # OccurredAt is not a field of the contract: ignored
    return contract_type, str(fields[contract_type.KEY_FIELD]), contract_type.payload_from(fields)


# ------------------------------------------------------------------------------------ published documents


def _key_field(contract: type[Contract]) -> str:
    return "CalendarEventId" if contract is CalendarEventStatusChangedEvent else "AppointmentId"


DOCUMENTS = ContractSet("calendar", "PIN calendar integration events", CALENDAR_CONTRACTS, _key_field)


if __name__ == "__main__":
    raise SystemExit(DOCUMENTS.main(sys.argv[1:]))
