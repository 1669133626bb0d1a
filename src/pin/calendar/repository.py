"""SQL for the calendar aggregates, in the caller's transaction: reads, locks in the calendar's one lock order
(docs/design/claims.md), the one write of a cluster with its outbox rows (a guard matching nothing is a
ConflictError), driver errors translated to domain errors. The statements are named in ``queries.sql``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from pin.calendar.domain import (
    Appointment,
    AppointmentCluster,
    AppointmentNotFoundError,
    AvailabilitySlot,
    CalendarEvent,
    CalendarEventMissingError,
    ConflictError,
    InvalidTransitionError,
    SlotMissingError,
    SlotNotAvailableError,
    StoredState,
)
from pin.calendar.rows import (
    APPOINTMENT_CHANGES,
    APPOINTMENT_NAMES,
    EVENT_CHANGES,
    EVENT_NAMES,
    REMINDER_NAMES,
    SLOT_CHANGES,
    SLOT_NAMES,
    appointment_from_row,
    columns,
    event_from_row,
    slot_from_row,
    values,
)
from pin.db import Conn, kept_cursor, load_queries
from pin.outbox.writer import OutboxRow, insert_values_params, insert_values_sql

ACTIVE_PER_SLOT_INDEX = "ux_appointment_active_per_slot"

_QUERIES = load_queries(__package__)


def _query(name: str) -> LiteralString:
    """A named statement with the tables' column lists filled in."""
    return _QUERIES[name].format(
        slot_columns=columns(SLOT_NAMES),
        appointment_columns=columns(APPOINTMENT_NAMES),
        event_columns=columns(EVENT_NAMES),
        reminder_columns=columns(REMINDER_NAMES),
    )


SLOT_GET = _query("slot_get")
SLOT_LOCK = _query("slot_lock")
SLOTS_LOCK = _query("slots_lock")
APPOINTMENT_GET = _query("appointment_get")
APPOINTMENT_LOCK = _query("appointment_lock")
APPOINTMENT_LOCK_SKIP_LOCKED = _query("appointment_lock_skip_locked")
EVENT_GET = _query("event_get")
EVENT_LOCK = _query("event_lock")
REMINDERS_GET = _query("reminders_get")
REMINDERS_LOCK = _query("reminders_lock")


# ------------------------------------------------------------------------------------------------- errors


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn driver errors with a known meaning into domain errors (the adapter's one job with them)."""
    try:
        yield
    except pg_errors.UniqueViolation as exc:
        if exc.diag.constraint_name == ACTIVE_PER_SLOT_INDEX:  # INV-SLT-3, the database's own check
            raise SlotNotAvailableError from exc
        raise
    except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure, pg_errors.LockNotAvailable) as exc:
        raise ConflictError from exc
    except pg_errors.CheckViolation as exc:
        if (exc.diag.constraint_name or "").endswith(("_status_transition", "_version_step")):
            raise InvalidTransitionError from exc
        raise


# -------------------------------------------------------------------------------------------------- reads


def _one(conn: Conn, query: LiteralString, params: Sequence[object]) -> tuple[Any, ...] | None:
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchone()


def _all(conn: Conn, query: LiteralString, params: Sequence[object]) -> list[tuple[Any, ...]]:
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchall()


def slot_get(conn: Conn, slot_id: uuid.UUID) -> AvailabilitySlot | None:
    """A slot without locking it."""
    row = _one(conn, SLOT_GET, (slot_id,))
    return slot_from_row(row) if row is not None else None


def slot_lock(conn: Conn, slot_id: uuid.UUID) -> AvailabilitySlot | None:
    """A slot, row-locked until the end of the transaction (booking: INV-SLT-3)."""
    with translated_errors():
        row = _one(conn, SLOT_LOCK, (slot_id,))
    return slot_from_row(row) if row is not None else None


def appointment_get(conn: Conn, appointment_id: uuid.UUID) -> Appointment | None:
    """An appointment without locking it."""
    row = _one(conn, APPOINTMENT_GET, (appointment_id,))
    return appointment_from_row(row) if row is not None else None


def event_get(conn: Conn, event_id: uuid.UUID) -> CalendarEvent | None:
    """A calendar event with its reminders, without locking."""
    row = _one(conn, EVENT_GET, (event_id,))
    if row is None:
        return None
    return event_from_row(row, _all(conn, REMINDERS_GET, (event_id,)))


# -------------------------------------------------------------------------------------------------- locks


def appointment_cluster_lock(
    conn: Conn, appointment_id: uuid.UUID, *, skip_locked: bool = False
) -> AppointmentCluster | None:
    """Lock and load an appointment, its slot, its event and the event's reminders, in that order.

    Raises AppointmentNotFoundError when there is no such appointment; SlotMissingError or
    CalendarEventMissingError when the appointment's cluster is broken (a poison item for the worker). With
    ``skip_locked`` the appointment row is taken with SKIP LOCKED and None means another transaction holds it.
    """
    cluster, _ = _cluster_lock(conn, appointment_id, skip_locked=skip_locked, other_slot_id=None)
    return cluster


def appointment_cluster_lock_with_slot(
    conn: Conn, appointment_id: uuid.UUID, other_slot_id: uuid.UUID
) -> tuple[AppointmentCluster, AvailabilitySlot | None]:
    """As :func:`appointment_cluster_lock`, also locking ``other_slot_id`` (a reschedule's target slot).

    The two slots are locked in id order, so two reschedules in opposite directions cannot deadlock.
    """
    cluster, other = _cluster_lock(conn, appointment_id, skip_locked=False, other_slot_id=other_slot_id)
    assert cluster is not None
    return cluster, other


def _cluster_lock(
    conn: Conn, appointment_id: uuid.UUID, *, skip_locked: bool, other_slot_id: uuid.UUID | None
) -> tuple[AppointmentCluster | None, AvailabilitySlot | None]:
    with translated_errors():
        row = _one(conn, APPOINTMENT_LOCK_SKIP_LOCKED if skip_locked else APPOINTMENT_LOCK, (appointment_id,))
        if row is None:
            if skip_locked and _one(conn, APPOINTMENT_GET, (appointment_id,)) is not None:
                return None, None
            raise AppointmentNotFoundError
        appointment = appointment_from_row(row)
        slot_ids = sorted({appointment.slot_id, *([other_slot_id] if other_slot_id else [])})
        slots = {s.id: s for s in map(slot_from_row, _all(conn, SLOTS_LOCK, (slot_ids,)))}
        slot = slots.get(appointment.slot_id)
        if slot is None:
            raise SlotMissingError
        event_row = _one(conn, EVENT_LOCK, (appointment.calendar_event_id,))
        if event_row is None:
            raise CalendarEventMissingError
        reminder_rows = _all(conn, REMINDERS_LOCK, (appointment.calendar_event_id,))
    other = slots.get(other_slot_id) if other_slot_id is not None else None
    return AppointmentCluster(appointment, slot, event_from_row(event_row, reminder_rows)), other


# Where each part of the cluster is in the claim's row (pin.calendar.expiry: the appointment's columns, the slot's,
# the event's, the reminders' three arrays, then passed_over).
_SLOT_AT = len(APPOINTMENT_NAMES)
_EVENT_AT = _SLOT_AT + len(SLOT_NAMES)
_REMINDERS_AT = _EVENT_AT + len(EVENT_NAMES)


def cluster_from_locked_row(row: Sequence[Any]) -> AppointmentCluster:
    """The cluster a one-statement lock returned (the appointment present); a broken cluster raises.

    SlotMissingError or CalendarEventMissingError, as :func:`appointment_cluster_lock` (a poison item).
    """
    appointment = appointment_from_row(row[:_SLOT_AT])
    if row[_SLOT_AT] is None:
        raise SlotMissingError
    slot = slot_from_row(row[_SLOT_AT:_EVENT_AT])
    event_id = row[_EVENT_AT]
    if event_id is None:
        raise CalendarEventMissingError
    ids, remind_ats, statuses = (values or [] for values in row[_REMINDERS_AT : _REMINDERS_AT + 3])
    reminders = [(i, event_id, at, st) for i, at, st in zip(ids, remind_ats, statuses, strict=True)]
    return AppointmentCluster(appointment, slot, event_from_row(row[_EVENT_AT:_REMINDERS_AT], reminders))


# ------------------------------------------------------------------------------------------------- writes


def slot_insert(conn: Conn, slot: AvailabilitySlot) -> None:
    """Insert a new slot."""
    with translated_errors():
        conn.execute(_SLOT_INSERT, dict(zip(_SLOT.insert_keys, values(slot, SLOT_NAMES), strict=True)))
    slot.loaded = StoredState(slot.status, slot.version)


def cluster_save(conn: Conn, cluster: AppointmentCluster, outbox_rows: Sequence[OutboxRow]) -> None:
    """Write a cluster and the outbox rows of its transaction in one statement (the one way a cluster is saved).

    Each part is inserted when it is new, or written by its guarded UPDATE when it changed since it was loaded;
    new reminders are inserted and changed ones written under their own guard; then ``outbox_rows`` are inserted.
    A guard that matched nothing (another transaction changed the Version or status first) raises ConflictError:
    the caller's transaction, with everything the statement wrote, must then be rolled back.
    """
    appointment, slot, event = cluster.appointment, cluster.slot, cluster.event
    params: dict[str, Any] = {}
    expected: dict[str, int] = {}
    for part, table in ((appointment, _APPOINTMENT), (slot, _SLOT), (event, _EVENT)):
        prefix = table.prefix
        if part.loaded is None:
            params.update(zip(table.insert_keys, values(part, table.names), strict=True))
            expected[prefix] = 1
            continue
        changed = (part.status, part.version) != (part.loaded.status, part.loaded.version)
        params.update(zip(table.update_keys, values(part, table.changes), strict=True))
        params[f"{prefix}_id"] = part.id if changed else None  # None matches no row: nothing to write
        params[f"{prefix}_expected_status"] = str(part.loaded.status)
        params[f"{prefix}_expected_version"] = part.loaded.version
        expected[prefix] = int(changed)
    new = [r for r in event.reminders if r.loaded is None]
    changed_reminders = [r for r in event.reminders if r.loaded is not None and r.status != r.loaded.status]
    expected["r"] = len(new) + len(changed_reminders)
    params["r_ids"] = [r.id for r in changed_reminders]
    params["r_statuses"] = [str(r.status) for r in changed_reminders]
    params["r_expected_statuses"] = [str(r.loaded.status) for r in changed_reminders if r.loaded is not None]
    params["r_updated_at"] = event.updated_at
    if new:
        params["r_event_id"] = event.id
        params["r_new_ids"] = [r.id for r in new]
        params["r_new_remind_ats"] = [r.remind_at for r in new]
        params["r_new_statuses"] = [str(r.status) for r in new]
    params.update(insert_values_params(outbox_rows))
    shape = (appointment.loaded is None, slot.loaded is None, event.loaded is None, bool(new), len(outbox_rows))
    with translated_errors():
        matched = kept_cursor(conn).execute(cluster_write_sql(*shape), params).fetchone()
    assert matched is not None
    if tuple(matched) != (expected["a"], expected["s"], expected["e"], expected["r"]):
        raise ConflictError
    for part in (appointment, slot, event):
        part.loaded = StoredState(part.status, part.version)
    for reminder in event.reminders:
        reminder.loaded = StoredState(reminder.status, 0)


# ------------------------------------------------------------------- the one generator of a cluster write


@dataclass(frozen=True)
class _Table:
    """A table of the cluster as its write sees it: its name, its parameters' prefix, its columns and changes."""

    name: str
    prefix: str
    names: tuple[str, ...]
    changes: tuple[str, ...]

    @functools.cached_property
    def insert_keys(self) -> tuple[str, ...]:
        """The parameter of each column of a new row (built once, not per item)."""
        return tuple(f"{self.prefix}_{name}" for name in self.names)

    @functools.cached_property
    def update_keys(self) -> tuple[str, ...]:
        """The parameter of each changed column of a loaded row."""
        return tuple(f"{self.prefix}_{name}" for name in self.changes)


_APPOINTMENT = _Table("calendar.appointment", "a", APPOINTMENT_NAMES, APPOINTMENT_CHANGES)
_SLOT = _Table("calendar.availability_slot", "s", SLOT_NAMES, SLOT_CHANGES)
_EVENT = _Table("calendar.calendar_event", "e", EVENT_NAMES, EVENT_CHANGES)


def _part_write(table: _Table, *, new: bool) -> LiteralString:
    """A part's write inside cluster_write: its INSERT when new, else its guarded UPDATE."""
    if new:
        placeholders = ", ".join(f"%({key})s" for key in table.insert_keys)
        return _QUERIES["row_insert"].format(table=table.name, columns=columns(table.names), values=placeholders)
    assignments = ", ".join(f"{name} = %({key})s" for name, key in zip(table.changes, table.update_keys, strict=True))
    return _QUERIES["row_update_guarded"].format(table=table.name, assignments=assignments, prefix=table.prefix)


@functools.cache
def cluster_write_sql(
    new_appointment: bool, new_slot: bool, new_event: bool, new_reminders: bool, outbox_rows: int
) -> LiteralString:
    """The one-statement write of a cluster of this shape (the same text for the same shape: prepared once)."""
    outbox = f",\nm_written AS (\n{insert_values_sql(outbox_rows)}\n)" if outbox_rows else ""
    return _QUERIES["cluster_write"].format(
        appointment=_part_write(_APPOINTMENT, new=new_appointment),
        slot=_part_write(_SLOT, new=new_slot),
        event=_part_write(_EVENT, new=new_event),
        reminders_inserted="\n" + _QUERIES["reminders_insert"] if new_reminders else "",
        reminders_inserted_count=_QUERIES["reminders_inserted_count"] + " " if new_reminders else "",
        outbox=outbox,
    )


_SLOT_INSERT: LiteralString = _part_write(_SLOT, new=True)
