"""The calendar's rows and aggregates: each table's columns, a row to its aggregate, an aggregate to parameters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from enum import Enum
from typing import Any, LiteralString, cast

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

SLOT_COLUMNS: LiteralString = """id, tenant_id, agent_user_id, kind, start_at, end_at, time_zone,
    min_lead_time_minutes, auto_confirm, status, version, created_at, updated_at"""
APPOINTMENT_COLUMNS: LiteralString = """id, tenant_id, slot_id, agent_user_id, investor_user_id, kind,
    start_at, end_at, time_zone, status, pending_expires_at, calendar_event_id, cancelled_by, cancel_reason,
    rescheduled_to_appointment_id, rescheduled_from_appointment_id, version, created_at, updated_at"""
EVENT_COLUMNS: LiteralString = """id, tenant_id, owner_user_id, origin, appointment_id, start_at, end_at,
    time_zone, status, cancel_reason, version, created_at, updated_at"""
REMINDER_COLUMNS: LiteralString = "id, calendar_event_id, remind_at, status"


def _names(columns: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in columns.split(","))


SLOT_NAMES = _names(SLOT_COLUMNS)
APPOINTMENT_NAMES = _names(APPOINTMENT_COLUMNS)
EVENT_NAMES = _names(EVENT_COLUMNS)


def as_row(row: object) -> dict[str, Any]:
    return cast(dict[str, Any], row)


# The enum of each column that holds one, per table (a NULL stays None).
_SLOT_ENUMS: dict[str, type[Enum]] = {"kind": Kind, "status": SlotStatus}
_APPOINTMENT_ENUMS: dict[str, type[Enum]] = {"kind": Kind, "status": AppointmentStatus, "cancelled_by": CancelledBy}
_EVENT_ENUMS: dict[str, type[Enum]] = {"origin": Origin, "status": EventStatus}


def _fields(row: dict[str, Any], names: tuple[str, ...], enums: dict[str, type[Enum]]) -> dict[str, Any]:
    """The constructor arguments of an aggregate from its row: each column, an enum column as its member."""
    return {name: enums[name](row[name]) if name in enums and row[name] is not None else row[name] for name in names}


def _positions(cls: type, names: tuple[str, ...], enums: dict[str, type[Enum]]) -> tuple[tuple[int, type[Enum]], ...]:
    """The enum columns by position, for an aggregate built from its columns' values in order: its fields must
    begin with exactly those columns (checked here, once)."""
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


def slot_from_row(row: dict[str, Any]) -> AvailabilitySlot:
    """An AvailabilitySlot as read from the database."""
    return slot_from_values([row[name] for name in SLOT_NAMES])


def slot_from_values(values: Sequence[Any]) -> AvailabilitySlot:
    """An AvailabilitySlot from the values of SLOT_COLUMNS, in their order (a tuple row)."""
    slot = AvailabilitySlot(*_members(values, _SLOT_POSITIONS))
    slot.loaded = StoredState(slot.status, slot.version)
    return slot


def appointment_from_row(row: dict[str, Any]) -> Appointment:
    """An Appointment as read from the database."""
    return appointment_from_values([row[name] for name in APPOINTMENT_NAMES])


def appointment_from_values(values: Sequence[Any]) -> Appointment:
    """An Appointment from the values of APPOINTMENT_COLUMNS, in their order (a tuple row)."""
    appointment = Appointment(*_members(values, _APPOINTMENT_POSITIONS))
    appointment.loaded = StoredState(appointment.status, appointment.version)
    return appointment


def event_from_rows(row: dict[str, Any], reminder_rows: list[dict[str, Any]]) -> CalendarEvent:
    """A CalendarEvent with its reminders as read from the database."""
    reminders = [(r["id"], r["calendar_event_id"], r["remind_at"], r["status"]) for r in reminder_rows]
    return event_from_values([row[name] for name in EVENT_NAMES], reminders)


def event_from_values(values: Sequence[Any], reminder_values: Iterable[Sequence[Any]]) -> CalendarEvent:
    """A CalendarEvent from the values of EVENT_COLUMNS in their order, and its reminders' of REMINDER_COLUMNS."""
    reminders = []
    for reminder_id, event_id, remind_at, status in reminder_values:
        reminder = EventReminder(reminder_id, event_id, remind_at, ReminderStatus(status))
        reminder.loaded = StoredState(reminder.status, 0)
        reminders.append(reminder)
    event = CalendarEvent(*_members(values, _EVENT_POSITIONS))
    event.reminders = sorted(reminders, key=lambda item: item.remind_at)
    event.loaded = StoredState(event.status, event.version)
    return event


def params(part: AvailabilitySlot | Appointment | CalendarEvent, names: tuple[str, ...]) -> dict[str, Any]:
    """The query parameters of an aggregate's columns ``names``: its attributes, enums as their values."""
    return {name: _db_value(getattr(part, name)) for name in names}


def slot_params(slot: AvailabilitySlot) -> dict[str, Any]:
    """Every column of a slot as query parameters."""
    return params(slot, SLOT_NAMES)


def _db_value(value: object) -> object:
    return value.value if isinstance(value, Enum) else value
