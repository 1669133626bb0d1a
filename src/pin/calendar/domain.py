"""The calendar domain (SPEC section 2): slots, appointments, calendar events and reminders. No IO.

A transition checks its invariant, bumps Version and records the domain events it raises; every way an
appointment ends goes through one cascade, :meth:`AppointmentCluster.end`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import Any, Self, TypedDict, Union, Unpack
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pin.domain_errors import Contended, DocumentedError

# --------------------------------------------------------------------------------------------------- errors


class DomainError(DocumentedError):
    """A calendar rule was broken."""


class NotFoundError(DomainError):
    """The record does not exist or is not visible to the caller."""


class SlotNotFoundError(NotFoundError):
    """The slot does not exist."""


class AppointmentNotFoundError(NotFoundError):
    """The appointment does not exist."""


class CalendarEventNotFoundError(NotFoundError):
    """The calendar event does not exist."""


class InvalidTimeZoneError(DomainError):
    """The time zone is not a known IANA time zone."""


class EndNotAfterStartError(DomainError):
    """EndAt must be after StartAt."""


class StartInPastError(DomainError):
    """StartAt must be in the future."""


class InvalidLeadTimeError(DomainError):
    """MinLeadTimeMinutes must be zero or more."""


class SlotNotAvailableError(DomainError):
    """The slot is not Available for booking."""


class LeadTimePassedError(DomainError):
    """The slot can no longer be booked: its minimum lead time has passed."""


class InvalidTransitionError(DomainError):
    """This status change is not allowed by the state machine."""


class AppointmentNotPendingError(InvalidTransitionError):
    """The appointment is not Pending."""


class AppointmentNotActiveError(InvalidTransitionError):
    """The appointment is neither Pending nor Confirmed."""


class CancelCutoffPassedError(DomainError):
    """The appointment can no longer be cancelled or rescheduled by the investor: the cutoff has passed."""


class ReasonRequiredError(DomainError):
    """A reason is required."""


class SameSlotError(DomainError):
    """The appointment is already on this slot."""


class NotDueYetError(DomainError):
    """The appointment's PendingExpiresAt has not passed yet."""


class ConflictError(DomainError, Contended):
    """The record was changed by a concurrent operation; re-read it and try again."""


class VersionMismatchError(DomainError):
    """The record's Version is not the one the caller expected (If-Match)."""


class CascadeInconsistentError(DomainError):
    """The appointment's slot, calendar event or reminders are in a state the cascade cannot handle."""


class SlotNotBookedError(CascadeInconsistentError):
    """The slot of an active appointment is not Booked."""


class SlotMissingError(CascadeInconsistentError):
    """The slot of the appointment does not exist."""


class CalendarEventMissingError(CascadeInconsistentError):
    """The calendar event of the appointment does not exist."""


class CalendarEventNotScheduledError(CascadeInconsistentError):
    """The calendar event of an active appointment is not Scheduled."""


class CalendarEventMismatchError(CascadeInconsistentError):
    """The calendar event does not belong to the appointment."""


# ---------------------------------------------------------------------------------------------------- enums


class Kind(StrEnum):
    """EventKind: what the meeting is."""

    SHOWING = "Showing"
    CONSULTATION = "Consultation"


class SlotStatus(StrEnum):
    """AvailabilitySlot.Status."""

    AVAILABLE = "Available"
    BOOKED = "Booked"
    EXPIRED = "Expired"


class AppointmentStatus(StrEnum):
    """Appointment.Status."""

    PENDING = "Pending"
    CONFIRMED = "Confirmed"
    DECLINED = "Declined"
    CANCELLED = "Cancelled"
    EXPIRED = "Expired"
    COMPLETED = "Completed"


class EventStatus(StrEnum):
    """CalendarEvent.Status."""

    SCHEDULED = "Scheduled"
    CANCELLED = "Cancelled"


class ReminderStatus(StrEnum):
    """EventReminder.Status."""

    PENDING = "Pending"
    SENT = "Sent"
    SKIPPED = "Skipped"


class Origin(StrEnum):
    """CalendarEvent.Origin."""

    APPOINTMENT = "Appointment"
    MANUAL = "Manual"


class CancelledBy(StrEnum):
    """AppointmentCancelledBy; System is reserved (no operation in v1)."""

    INVESTOR = "Investor"
    AGENT = "Agent"
    SYSTEM = "System"


class Reason(StrEnum):
    """AppointmentCancelReason: why an appointment will not take place (seed 003)."""

    DECLINED_BY_AGENT = "DeclinedByAgent"
    CANCELLED_BY_INVESTOR = "CancelledByInvestor"
    CANCELLED_BY_AGENT = "CancelledByAgent"
    EXPIRED = "Expired"


class SlotOutcome(StrEnum):
    """What releasing a slot did to it (INV-SLT-5)."""

    RELEASED = "released"
    EXPIRED = "expired"


# The state machines. schema.sql repeats them as triggers: a change the code forgets is still refused.
SLOT_TRANSITIONS: Mapping[SlotStatus, frozenset[SlotStatus]] = {
    SlotStatus.AVAILABLE: frozenset({SlotStatus.BOOKED}),
    SlotStatus.BOOKED: frozenset({SlotStatus.AVAILABLE, SlotStatus.EXPIRED}),
    SlotStatus.EXPIRED: frozenset(),
}
APPOINTMENT_TRANSITIONS: Mapping[AppointmentStatus, frozenset[AppointmentStatus]] = {
    AppointmentStatus.PENDING: frozenset(
        {
            AppointmentStatus.CONFIRMED,
            AppointmentStatus.DECLINED,
            AppointmentStatus.CANCELLED,
            AppointmentStatus.EXPIRED,
        }
    ),
    AppointmentStatus.CONFIRMED: frozenset({AppointmentStatus.CANCELLED, AppointmentStatus.COMPLETED}),
    AppointmentStatus.DECLINED: frozenset(),
    AppointmentStatus.CANCELLED: frozenset(),
    AppointmentStatus.EXPIRED: frozenset(),
    AppointmentStatus.COMPLETED: frozenset(),
}
EVENT_TRANSITIONS: Mapping[EventStatus, frozenset[EventStatus]] = {
    EventStatus.SCHEDULED: frozenset({EventStatus.CANCELLED}),
    EventStatus.CANCELLED: frozenset(),
}
REMINDER_TRANSITIONS: Mapping[ReminderStatus, frozenset[ReminderStatus]] = {
    ReminderStatus.PENDING: frozenset({ReminderStatus.SENT, ReminderStatus.SKIPPED}),
    ReminderStatus.SENT: frozenset(),
    ReminderStatus.SKIPPED: frozenset(),
}
ACTIVE_APPOINTMENT = frozenset({AppointmentStatus.PENDING, AppointmentStatus.CONFIRMED})

# Reminders before StartAt that booking creates, when still in the future.
REMINDER_OFFSETS = (timedelta(hours=24), timedelta(hours=1))

# CalendarEvent.CancelReason per ending: free text that stays inside calendar (never in a payload).
EVENT_CANCEL_TEXT: Mapping[Reason, str] = {
    Reason.DECLINED_BY_AGENT: "Запись отклонена агентом",
    Reason.CANCELLED_BY_AGENT: "Запись отменена агентом",
    Reason.CANCELLED_BY_INVESTOR: "Запись отменена инвестором",
    Reason.EXPIRED: "Запись не подтверждена агентом в срок",
}
RESCHEDULED_EVENT_TEXT = "Запись перенесена инвестором"


# Names the tz database ships that are not places: never a slot's time zone.
_NOT_TIME_ZONES = frozenset({"Factory", "localtime", "posixrules"})


@cache
def _iana_time_zones() -> frozenset[str]:
    return frozenset(available_timezones()) - _NOT_TIME_ZONES


def check_time_zone(name: str) -> str:
    """The name itself when it is a known IANA time zone."""
    if name not in _iana_time_zones():
        raise InvalidTimeZoneError
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidTimeZoneError from exc
    return name


def _stripped_reason(text: str | None) -> str | None:
    stripped = (text or "").strip()
    return stripped or None


def _required_reason(text: str | None) -> str:
    reason = _stripped_reason(text)
    if reason is None:
        raise ReasonRequiredError
    return reason


# --------------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, kw_only=True)
class AppointmentEvent:
    """What every appointment event says about its appointment; each kind adds its own fields."""

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: datetime
    time_zone: str
    occurred_at: datetime

    @classmethod
    def of(cls, appointment: Appointment, occurred_at: datetime, **details: Any) -> Self:
        """The event about ``appointment`` at ``occurred_at``, with ``details`` in the fields of its kind."""
        return cls(
            appointment_id=appointment.id,
            tenant_id=appointment.tenant_id,
            agent_user_id=appointment.agent_user_id,
            investor_user_id=appointment.investor_user_id,
            kind=appointment.kind,
            start_at=appointment.start_at,
            time_zone=appointment.time_zone,
            occurred_at=occurred_at,
            **details,
        )


@dataclass(frozen=True, kw_only=True)
class AppointmentCreated(AppointmentEvent):
    """An appointment was booked (or created by a reschedule)."""

    slot_id: uuid.UUID
    end_at: datetime
    status: AppointmentStatus
    pending_expires_at: datetime | None
    rescheduled_from_appointment_id: uuid.UUID | None


@dataclass(frozen=True, kw_only=True)
class AppointmentConfirmed(AppointmentEvent):
    """The agent confirmed a Pending appointment."""


@dataclass(frozen=True, kw_only=True)
class AppointmentCancelled(AppointmentEvent):
    """The appointment will not take place (Declined, Cancelled or Expired)."""

    reason: Reason
    cancelled_by: CancelledBy | None
    rescheduled_to_appointment_id: uuid.UUID | None


@dataclass(frozen=True)
class CalendarEventStatusChanged:
    """A calendar event was scheduled or cancelled."""

    calendar_event_id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: Origin
    appointment_id: uuid.UUID | None
    status: EventStatus
    start_at: datetime
    end_at: datetime
    time_zone: str
    version: int
    occurred_at: datetime


DomainEvent = Union[AppointmentCreated, AppointmentConfirmed, AppointmentCancelled, CalendarEventStatusChanged]  # noqa: UP007


# ----------------------------------------------------------------------------------------------- aggregates


@dataclass
class StoredState:
    """Status and Version as read from the database: what a guarded UPDATE expects to find."""

    status: str
    version: int


class SlotTerms(TypedDict):
    """What an agent offers when creating a slot."""

    kind: Kind
    start_at: datetime
    end_at: datetime
    time_zone: str
    min_lead_time_minutes: int
    auto_confirm: bool


@dataclass
class AvailabilitySlot:
    """A window an agent offers for one appointment."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    kind: Kind
    start_at: datetime
    end_at: datetime
    time_zone: str
    min_lead_time_minutes: int
    auto_confirm: bool
    status: SlotStatus
    version: int
    created_at: datetime
    updated_at: datetime
    loaded: StoredState | None = field(default=None, repr=False, compare=False)

    @classmethod
    def create(
        cls,
        *,
        tenant_id: uuid.UUID,
        agent_user_id: uuid.UUID,
        now: datetime,
        slot_id: uuid.UUID | None = None,
        **terms: Unpack[SlotTerms],
    ) -> AvailabilitySlot:
        """A new Available slot on the agent's ``terms``."""
        check_time_zone(terms["time_zone"])
        if terms["end_at"] <= terms["start_at"]:
            raise EndNotAfterStartError
        if terms["start_at"] <= now:
            raise StartInPastError
        if terms["min_lead_time_minutes"] < 0:
            raise InvalidLeadTimeError
        return cls(
            id=slot_id or uuid.uuid4(),
            tenant_id=tenant_id,
            agent_user_id=agent_user_id,
            **terms,
            status=SlotStatus.AVAILABLE,
            version=1,
            created_at=now,
            updated_at=now,
        )

    @property
    def bookable_until(self) -> datetime:
        """StartAt - MinLeadTimeMinutes: the last moment the slot may be booked."""
        return self.start_at - timedelta(minutes=self.min_lead_time_minutes)

    def book(self, now: datetime) -> None:
        """Available -> Booked, while the lead time allows it."""
        if self.status is not SlotStatus.AVAILABLE:
            raise SlotNotAvailableError
        if now > self.bookable_until:
            raise LeadTimePassedError
        self._move(SlotStatus.BOOKED, now)

    def release(self, as_of: datetime) -> SlotOutcome:
        """Booked -> Available if it can still be sold, else Booked -> Expired (INV-SLT-5)."""
        if self.status is not SlotStatus.BOOKED:
            raise SlotNotBookedError
        if as_of <= self.bookable_until:
            self._move(SlotStatus.AVAILABLE, as_of)
            return SlotOutcome.RELEASED
        self._move(SlotStatus.EXPIRED, as_of)
        return SlotOutcome.EXPIRED

    def _move(self, target: SlotStatus, as_of: datetime) -> None:
        if target not in SLOT_TRANSITIONS[self.status]:
            raise InvalidTransitionError
        self.status = target
        self.version += 1
        self.updated_at = as_of


@dataclass
class EventReminder:
    """A reminder of a calendar event."""

    id: uuid.UUID
    calendar_event_id: uuid.UUID
    remind_at: datetime
    status: ReminderStatus
    loaded: StoredState | None = field(default=None, repr=False, compare=False)

    def skip(self) -> bool:
        """Pending -> Skipped (reminder rule 3); whether it changed."""
        if self.status is not ReminderStatus.PENDING:
            return False
        self.status = ReminderStatus.SKIPPED
        return True


@dataclass
class CalendarEvent:
    """An entry in the agent's calendar; Origin = Appointment for a booking's event."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: Origin
    appointment_id: uuid.UUID | None
    start_at: datetime
    end_at: datetime
    time_zone: str
    status: EventStatus
    cancel_reason: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    reminders: list[EventReminder] = field(default_factory=list)
    events: list[DomainEvent] = field(default_factory=list, repr=False, compare=False)
    loaded: StoredState | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_appointment(cls, appointment: Appointment, now: datetime) -> CalendarEvent:
        """The Scheduled event of a new appointment, with its reminders still in the future."""
        event = cls(
            id=appointment.calendar_event_id,
            tenant_id=appointment.tenant_id,
            owner_user_id=appointment.agent_user_id,
            origin=Origin.APPOINTMENT,
            appointment_id=appointment.id,
            start_at=appointment.start_at,
            end_at=appointment.end_at,
            time_zone=appointment.time_zone,
            status=EventStatus.SCHEDULED,
            cancel_reason=None,
            version=1,
            created_at=now,
            updated_at=now,
        )
        for offset in REMINDER_OFFSETS:
            remind_at = appointment.start_at - offset
            if remind_at > now:
                event.reminders.append(EventReminder(uuid.uuid4(), event.id, remind_at, ReminderStatus.PENDING))
        event._record_status(now)
        return event

    def cancel_by_appointment(self, appointment_id: uuid.UUID, cancel_reason: str, as_of: datetime) -> None:
        """Scheduled -> Cancelled through its appointment's cascade (INV-CAL-3); Pending reminders Skipped."""
        if self.origin is not Origin.APPOINTMENT or self.appointment_id != appointment_id:
            raise CalendarEventMismatchError
        if self.status is not EventStatus.SCHEDULED:
            raise CalendarEventNotScheduledError
        self.status = EventStatus.CANCELLED
        self.cancel_reason = cancel_reason
        self.version += 1
        self.updated_at = as_of
        for reminder in self.reminders:
            reminder.skip()  # reminder rule 3
        self._record_status(as_of)

    def _record_status(self, as_of: datetime) -> None:
        self.events.append(
            CalendarEventStatusChanged(
                calendar_event_id=self.id,
                tenant_id=self.tenant_id,
                owner_user_id=self.owner_user_id,
                origin=self.origin,
                appointment_id=self.appointment_id,
                status=self.status,
                start_at=self.start_at,
                end_at=self.end_at,
                time_zone=self.time_zone,
                version=self.version,
                occurred_at=as_of,
            )
        )


@dataclass
class Appointment:
    """An investor's booking of a slot (a snapshot of the slot's times and kind)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    slot_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: datetime
    end_at: datetime
    time_zone: str
    status: AppointmentStatus
    pending_expires_at: datetime | None
    calendar_event_id: uuid.UUID
    cancelled_by: CancelledBy | None
    cancel_reason: str | None
    rescheduled_to_appointment_id: uuid.UUID | None
    rescheduled_from_appointment_id: uuid.UUID | None
    version: int
    created_at: datetime
    updated_at: datetime
    events: list[DomainEvent] = field(default_factory=list, repr=False, compare=False)
    loaded: StoredState | None = field(default=None, repr=False, compare=False)

    def _move(self, target: AppointmentStatus, as_of: datetime) -> None:
        if target not in APPOINTMENT_TRANSITIONS[self.status]:
            if self.status not in ACTIVE_APPOINTMENT:
                raise AppointmentNotActiveError
            raise AppointmentNotPendingError
        self.status = target
        self.version += 1
        self.updated_at = as_of

    def is_due(self, as_of: datetime) -> bool:
        """Pending and PendingExpiresAt < AsOf: the appointment-timeout worker may expire it (INV-APT-6)."""
        expires_at = self.pending_expires_at
        return self.status is AppointmentStatus.PENDING and expires_at is not None and expires_at < as_of

    def cancellable_by_investor_until(self, cancel_cutoff: timedelta) -> datetime:
        """StartAt - CancelCutoff (INV-APT-3)."""
        return self.start_at - cancel_cutoff


@dataclass
class AppointmentCluster:
    """An appointment with its slot and calendar event (with reminders): what one ending changes atomically."""

    appointment: Appointment
    slot: AvailabilitySlot
    event: CalendarEvent

    @classmethod
    def book(
        cls,
        slot: AvailabilitySlot,
        *,
        investor_user_id: uuid.UUID,
        now: datetime,
        pending_ttl: timedelta,
        rescheduled_from_appointment_id: uuid.UUID | None = None,
    ) -> AppointmentCluster:
        """Book the slot: a Pending appointment (Confirmed with AutoConfirm), its event and reminders."""
        slot.book(now)
        if slot.auto_confirm:
            status, expires_at = AppointmentStatus.CONFIRMED, None
        else:
            # PendingExpiresAt = min(CreatedAt + PendingTtl, StartAt - MinLeadTimeMinutes)
            status, expires_at = AppointmentStatus.PENDING, min(now + pending_ttl, slot.bookable_until)
        appointment = Appointment(
            id=uuid.uuid4(),
            tenant_id=slot.tenant_id,
            slot_id=slot.id,
            agent_user_id=slot.agent_user_id,
            investor_user_id=investor_user_id,
            kind=slot.kind,
            start_at=slot.start_at,
            end_at=slot.end_at,
            time_zone=slot.time_zone,
            status=status,
            pending_expires_at=expires_at,
            calendar_event_id=uuid.uuid4(),
            cancelled_by=None,
            cancel_reason=None,
            rescheduled_to_appointment_id=None,
            rescheduled_from_appointment_id=rescheduled_from_appointment_id,
            version=1,
            created_at=now,
            updated_at=now,
        )
        event = CalendarEvent.for_appointment(appointment, now)
        appointment.events.append(
            AppointmentCreated.of(
                appointment,
                now,
                slot_id=appointment.slot_id,
                end_at=appointment.end_at,
                status=appointment.status,
                pending_expires_at=appointment.pending_expires_at,
                rescheduled_from_appointment_id=rescheduled_from_appointment_id,
            )
        )
        return cls(appointment, slot, event)

    # -- the operations of SPEC section 2 -------------------------------------------------------------------

    def confirm(self, as_of: datetime) -> None:
        """The agent confirms: Pending -> Confirmed; records appointment-confirmed."""
        appointment = self.appointment
        if appointment.status is not AppointmentStatus.PENDING:
            raise AppointmentNotPendingError
        self._check_cascade()
        appointment._move(AppointmentStatus.CONFIRMED, as_of)
        appointment.events.append(AppointmentConfirmed.of(appointment, as_of))

    def decline(self, reason_text: str | None, as_of: datetime) -> SlotOutcome:
        """The agent declines a Pending appointment, with a reason: Declined, CancelledBy null."""
        text = _required_reason(reason_text)
        if self.appointment.status is not AppointmentStatus.PENDING:
            raise AppointmentNotPendingError
        return self.end(AppointmentStatus.DECLINED, Reason.DECLINED_BY_AGENT, None, as_of, cancel_reason=text)

    def cancel_by_agent(self, reason_text: str | None, as_of: datetime) -> SlotOutcome:
        """The agent cancels a Pending or Confirmed appointment, with a reason."""
        text = _required_reason(reason_text)
        return self.end(
            AppointmentStatus.CANCELLED, Reason.CANCELLED_BY_AGENT, CancelledBy.AGENT, as_of, cancel_reason=text
        )

    def cancel_by_investor(self, reason_text: str | None, as_of: datetime, cancel_cutoff: timedelta) -> SlotOutcome:
        """The investor cancels until StartAt - CancelCutoff (INV-APT-3); the reason is optional."""
        self._check_investor_cutoff(as_of, cancel_cutoff)
        return self.end(
            AppointmentStatus.CANCELLED,
            Reason.CANCELLED_BY_INVESTOR,
            CancelledBy.INVESTOR,
            as_of,
            cancel_reason=_stripped_reason(reason_text),
        )

    def reschedule(
        self, new_slot: AvailabilitySlot, as_of: datetime, *, cancel_cutoff: timedelta, pending_ttl: timedelta
    ) -> AppointmentCluster:
        """INV-APT-5: cancel this appointment and book ``new_slot``, as one pair; returns the new cluster."""
        if new_slot.id == self.slot.id:
            raise SameSlotError
        self._check_investor_cutoff(as_of, cancel_cutoff)
        if new_slot.tenant_id != self.appointment.tenant_id:
            raise SlotNotAvailableError
        new = AppointmentCluster.book(
            new_slot,
            investor_user_id=self.appointment.investor_user_id,
            now=as_of,
            pending_ttl=pending_ttl,
            rescheduled_from_appointment_id=self.appointment.id,
        )
        self.end(
            AppointmentStatus.CANCELLED,
            Reason.CANCELLED_BY_INVESTOR,
            CancelledBy.INVESTOR,
            as_of,
            rescheduled_to=new.appointment.id,
        )
        return new

    def expire(self, as_of: datetime) -> SlotOutcome:
        """The appointment-timeout worker: Pending -> Expired once PendingExpiresAt < AsOf (INV-APT-6)."""
        appointment = self.appointment
        if appointment.status is not AppointmentStatus.PENDING:
            raise AppointmentNotPendingError
        if not appointment.is_due(as_of):
            raise NotDueYetError
        return self.end(AppointmentStatus.EXPIRED, Reason.EXPIRED, None, as_of)

    # -- the one cascade -------------------------------------------------------------------------------------

    def end(
        self,
        status: AppointmentStatus,
        reason: Reason,
        cancelled_by: CancelledBy | None,
        as_of: datetime,
        *,
        cancel_reason: str | None = None,
        rescheduled_to: uuid.UUID | None = None,
    ) -> SlotOutcome:
        """End the appointment with its full cascade; returns what happened to the slot (INV-SLT-5).

        Appointment -> terminal status, slot released (INV-SLT-5), calendar event Cancelled (INV-CAL-3),
        Pending reminders Skipped (reminder rule 3), one AppointmentCancelled and one CalendarEventStatusChanged.
        """
        appointment = self.appointment
        if appointment.status not in ACTIVE_APPOINTMENT:
            raise AppointmentNotActiveError
        self._check_cascade()
        appointment._move(status, as_of)
        appointment.cancelled_by = cancelled_by
        appointment.cancel_reason = cancel_reason
        appointment.rescheduled_to_appointment_id = rescheduled_to
        outcome = self.slot.release(as_of)
        event_text = RESCHEDULED_EVENT_TEXT if rescheduled_to is not None else EVENT_CANCEL_TEXT[reason]
        self.event.cancel_by_appointment(appointment.id, event_text, as_of)
        appointment.events.append(
            AppointmentCancelled.of(
                appointment,
                as_of,
                reason=reason,
                cancelled_by=cancelled_by,
                rescheduled_to_appointment_id=rescheduled_to,
            )
        )
        return outcome

    def pull_events(self) -> list[DomainEvent]:
        """The recorded events, appointment's first, and forget them."""
        events = [*self.appointment.events, *self.event.events]
        self.appointment.events.clear()
        self.event.events.clear()
        return events

    def _check_investor_cutoff(self, as_of: datetime, cancel_cutoff: timedelta) -> None:
        if self.appointment.status not in ACTIVE_APPOINTMENT:
            raise AppointmentNotActiveError
        if as_of > self.appointment.cancellable_by_investor_until(cancel_cutoff):  # INV-APT-3
            raise CancelCutoffPassedError

    def _check_cascade(self) -> None:
        """An active appointment has a Booked slot and a Scheduled event of its own (poison otherwise)."""
        appointment = self.appointment
        if self.slot.id != appointment.slot_id:
            raise SlotMissingError
        if self.slot.status is not SlotStatus.BOOKED:
            raise SlotNotBookedError
        if self.event.id != appointment.calendar_event_id or self.event.appointment_id != appointment.id:
            raise CalendarEventMismatchError
        if self.event.status is not EventStatus.SCHEDULED:
            raise CalendarEventNotScheduledError
