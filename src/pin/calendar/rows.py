"""The calendar's rows: each table's columns, written once, and the one row format of each aggregate.

A row is the tuple of its table's columns in the order given here (what every statement of ``queries.sql``
selects, its column lists filled in from these tuples); an aggregate's dataclass fields begin with exactly those
columns (checked here, once), so a row is its constructor's arguments, an enum column as its member.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from enum import Enum
from typing import Any

from pin.calendar.domain import (
    Appointment,
    AppointmentStatus,
    AvailabilitySlot,
    CalendarEvent,
    CancelledBy,
    EventReminder,
    EventStatus,
    Kind,
    Origin,
    ReminderStatus,
    SlotStatus,
    StoredState,
)

SLOT_NAMES = (
    "id", "tenant_id", "agent_user_id", "kind", "start_at", "end_at", "time_zone", "min_lead_time_minutes",
    "auto_confirm", "status", "version", "created_at", "updated_at",
)  # fmt: skip
APPOINTMENT_NAMES = (
    "id", "tenant_id", "slot_id", "agent_user_id", "investor_user_id", "kind", "start_at", "end_at", "time_zone",
    "status", "pending_expires_at", "calendar_event_id", "cancelled_by", "cancel_reason",
    "rescheduled_to_appointment_id", "rescheduled_from_appointment_id", "version", "created_at", "updated_at",
)  # fmt: skip
EVENT_NAMES = (
    "id", "tenant_id", "owner_user_id", "origin", "appointment_id", "start_at", "end_at", "time_zone", "status",
    "cancel_reason", "version", "created_at", "updated_at",
)  # fmt: skip
# A reminder as an aggregate reads it; its row also has created_at and updated_at (the event's UpdatedAt).
REMINDER_NAMES = ("id", "calendar_event_id", "remind_at", "status")

# What a guarded write of a loaded row sets (status and Version always; the rest of a row never changes).
SLOT_CHANGES = ("status", "version", "updated_at")
APPOINTMENT_CHANGES = (
    "status", "cancelled_by", "cancel_reason", "rescheduled_to_appointment_id", "version", "updated_at",
)  # fmt: skip
EVENT_CHANGES = ("status", "cancel_reason", "version", "updated_at")


def columns(names: Sequence[str], alias: str | None = None) -> str:
    """A column list for a statement of ``queries.sql``: ``names``, each qualified by ``alias`` when given."""
    return ", ".join(f"{alias}.{name}" for name in names) if alias else ", ".join(names)


# The enum of each column that holds one, per table (a NULL stays None).
_SLOT_ENUMS: dict[str, type[Enum]] = {"kind": Kind, "status": SlotStatus}
_APPOINTMENT_ENUMS: dict[str, type[Enum]] = {"kind": Kind, "status": AppointmentStatus, "cancelled_by": CancelledBy}
_EVENT_ENUMS: dict[str, type[Enum]] = {"origin": Origin, "status": EventStatus}


def _positions(cls: type, names: tuple[str, ...], enums: dict[str, type[Enum]]) -> tuple[tuple[int, type[Enum]], ...]:
    """The enum columns by position; the aggregate's fields must begin with exactly its table's columns."""
    if tuple(f.name for f in fields(cls))[: len(names)] != names:
        raise TypeError(f"{cls.__name__}'s fields do not begin with its table's columns")
    return tuple((names.index(name), kind) for name, kind in enums.items())


def _members(values: Sequence[Any], enums: tuple[tuple[int, type[Enum]], ...]) -> list[Any]:
    """``values`` with each enum column's value as its member (a NULL stays None)."""
    out = list(values)
    for position, kind in enums:
        if out[position] is not None:
            out[position] = kind(out[position])
    return out


_SLOT_POSITIONS = _positions(AvailabilitySlot, SLOT_NAMES, _SLOT_ENUMS)
_APPOINTMENT_POSITIONS = _positions(Appointment, APPOINTMENT_NAMES, _APPOINTMENT_ENUMS)
_EVENT_POSITIONS = _positions(CalendarEvent, EVENT_NAMES, _EVENT_ENUMS)


def slot_from_row(row: Sequence[Any]) -> AvailabilitySlot:
    """An AvailabilitySlot from its row (the values of SLOT_NAMES, in their order), as loaded."""
    slot = AvailabilitySlot(*_members(row, _SLOT_POSITIONS))
    slot.loaded = StoredState(slot.status, slot.version)
    return slot


def appointment_from_row(row: Sequence[Any]) -> Appointment:
    """An Appointment from its row (the values of APPOINTMENT_NAMES, in their order), as loaded."""
    appointment = Appointment(*_members(row, _APPOINTMENT_POSITIONS))
    appointment.loaded = StoredState(appointment.status, appointment.version)
    return appointment


def event_from_row(row: Sequence[Any], reminder_rows: Iterable[Sequence[Any]]) -> CalendarEvent:
    """A CalendarEvent from its row (EVENT_NAMES) and its reminders' (REMINDER_NAMES), as loaded."""
    reminders = []
    for reminder_id, event_id, remind_at, status in reminder_rows:
        reminder = EventReminder(reminder_id, event_id, remind_at, ReminderStatus(status))
        reminder.loaded = StoredState(reminder.status, 0)
        reminders.append(reminder)
    event = CalendarEvent(*_members(row, _EVENT_POSITIONS))
    event.reminders = sorted(reminders, key=lambda item: item.remind_at)
    event.loaded = StoredState(event.status, event.version)
    return event


def values(part: AvailabilitySlot | Appointment | CalendarEvent, names: tuple[str, ...]) -> list[Any]:
    """The values of a part's columns ``names`` for a statement's parameters: its attributes, enums as values."""
    return [_db_value(getattr(part, name)) for name in names]


def _db_value(value: object) -> object:
    return value.value if isinstance(value, Enum) else value
