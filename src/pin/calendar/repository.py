"""SQL for the calendar aggregates, in the caller's transaction: reads, locks in the calendar's one lock order
(docs/design/claims.md), guarded writes (zero rows is a ConflictError), driver errors translated to domain errors.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, LiteralString

from psycopg import errors as pg_errors

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
    APPOINTMENT_COLUMNS,
    APPOINTMENT_NAMES,
    EVENT_COLUMNS,
    EVENT_NAMES,
    REMINDER_COLUMNS,
    SLOT_COLUMNS,
    SLOT_NAMES,
    appointment_from_row,
    appointment_from_values,
    as_row,
    event_from_rows,
    event_from_values,
    params,
    slot_from_row,
    slot_from_values,
    slot_params,
)
from pin.db import Conn
from pin.outbox.writer import OutboxRow, insert_values_params, insert_values_sql

ACTIVE_PER_SLOT_INDEX = "ux_appointment_active_per_slot"

# ------------------------------------------------------------------------------------------------ queries

SLOT_GET: LiteralString = f"SELECT {SLOT_COLUMNS} FROM calendar.availability_slot WHERE id = %s"
SLOT_LOCK: LiteralString = SLOT_GET + " FOR NO KEY UPDATE"
SLOTS_LOCK: LiteralString = (
    f"SELECT {SLOT_COLUMNS} FROM calendar.availability_slot WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE"
)
APPOINTMENT_GET: LiteralString = f"SELECT {APPOINTMENT_COLUMNS} FROM calendar.appointment WHERE id = %s"
APPOINTMENT_LOCK: LiteralString = APPOINTMENT_GET + " FOR NO KEY UPDATE"
APPOINTMENT_LOCK_SKIP_LOCKED: LiteralString = APPOINTMENT_LOCK + " SKIP LOCKED"
# Due for appointment-timeout (seed 000: Status = Pending && PendingExpiresAt < AsOf), on calendar.appointment AS a.
APPOINTMENT_IS_DUE: LiteralString = "a.status = 'Pending' AND a.pending_expires_at < %(as_of)s"
EVENT_GET: LiteralString = f"SELECT {EVENT_COLUMNS} FROM calendar.calendar_event WHERE id = %s"
EVENT_LOCK: LiteralString = EVENT_GET + " FOR NO KEY UPDATE"
REMINDERS_GET: LiteralString = (
    f"SELECT {REMINDER_COLUMNS} FROM calendar.event_reminder WHERE calendar_event_id = %s ORDER BY id"
)
REMINDERS_LOCK: LiteralString = REMINDERS_GET + " FOR NO KEY UPDATE"


def _insert(table: LiteralString, columns: LiteralString, names: Sequence[str]) -> LiteralString:
    """The INSERT of one row into ``table``, each column bound by its own name (``%(column)s``)."""
    values = ", ".join(f"%({name})s" for name in names)
    return f"INSERT INTO {table} ({columns})\nVALUES ({values})"


def _update_guarded(table: LiteralString, changed: Sequence[str]) -> LiteralString:
    """The UPDATE of ``changed`` on one row, only while it is still at the version and status it was loaded with."""
    assignments = ", ".join(f"{name} = %({name})s" for name in changed)
    return (
        f"UPDATE {table}\n   SET {assignments}\n"
        " WHERE id = %(id)s AND version = %(expected_version)s AND status = %(expected_status)s\nRETURNING id"
    )


SLOT_INSERT = _insert("calendar.availability_slot", SLOT_COLUMNS, SLOT_NAMES)
SLOT_UPDATE_GUARDED = _update_guarded("calendar.availability_slot", ("status", "version", "updated_at"))
APPOINTMENT_INSERT = _insert("calendar.appointment", APPOINTMENT_COLUMNS, APPOINTMENT_NAMES)
APPOINTMENT_UPDATE_GUARDED = _update_guarded(
    "calendar.appointment",
    ("status", "cancelled_by", "cancel_reason", "rescheduled_to_appointment_id", "version", "updated_at"),
)
EVENT_INSERT = _insert("calendar.calendar_event", EVENT_COLUMNS, EVENT_NAMES)
EVENT_UPDATE_GUARDED = _update_guarded("calendar.calendar_event", ("status", "cancel_reason", "version", "updated_at"))
REMINDER_INSERT: LiteralString = """
INSERT INTO calendar.event_reminder (id, calendar_event_id, remind_at, status, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s)
"""
REMINDER_UPDATE_GUARDED: LiteralString = """
UPDATE calendar.event_reminder SET status = %s, updated_at = %s
 WHERE id = %s AND status = %s
RETURNING id
"""


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


def slot_get(conn: Conn, slot_id: uuid.UUID) -> AvailabilitySlot | None:
    """A slot without locking it."""
    row = conn.execute(SLOT_GET, (slot_id,)).fetchone()
    return slot_from_row(as_row(row)) if row is not None else None


def slot_lock(conn: Conn, slot_id: uuid.UUID) -> AvailabilitySlot | None:
    """A slot, row-locked until the end of the transaction (booking: INV-SLT-3)."""
    with translated_errors():
        row = conn.execute(SLOT_LOCK, (slot_id,)).fetchone()
    return slot_from_row(as_row(row)) if row is not None else None


def appointment_get(conn: Conn, appointment_id: uuid.UUID) -> Appointment | None:
    """An appointment without locking it."""
    row = conn.execute(APPOINTMENT_GET, (appointment_id,)).fetchone()
    return appointment_from_row(as_row(row)) if row is not None else None


def event_get(conn: Conn, event_id: uuid.UUID) -> CalendarEvent | None:
    """A calendar event with its reminders, without locking."""
    row = conn.execute(EVENT_GET, (event_id,)).fetchone()
    if row is None:
        return None
    reminders = [as_row(r) for r in conn.execute(REMINDERS_GET, (event_id,)).fetchall()]
    return event_from_rows(as_row(row), reminders)


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
        query = APPOINTMENT_LOCK_SKIP_LOCKED if skip_locked else APPOINTMENT_LOCK
        row = conn.execute(query, (appointment_id,)).fetchone()
        if row is None:
            if skip_locked and conn.execute(APPOINTMENT_GET, (appointment_id,)).fetchone() is not None:
                return None, None
            raise AppointmentNotFoundError
        appointment = appointment_from_row(as_row(row))
        slot_ids = sorted({appointment.slot_id, *([other_slot_id] if other_slot_id else [])})
        slots = {s.id: s for s in (slot_from_row(as_row(r)) for r in conn.execute(SLOTS_LOCK, (slot_ids,)).fetchall())}
        slot = slots.get(appointment.slot_id)
        if slot is None:
            raise SlotMissingError
        event_row = conn.execute(EVENT_LOCK, (appointment.calendar_event_id,)).fetchone()
        if event_row is None:
            raise CalendarEventMissingError
        reminder_rows = [as_row(r) for r in conn.execute(REMINDERS_LOCK, (appointment.calendar_event_id,)).fetchall()]
    event = event_from_rows(as_row(event_row), reminder_rows)
    other = slots.get(other_slot_id) if other_slot_id is not None else None
    return AppointmentCluster(appointment, slot, event), other


# ------------------------------------------------------------------- the cluster locked in one statement


# Where each part of the cluster is in the claim's row (pin.calendar.claims: the appointment's columns, the slot's,
# the event's, the reminders' three arrays, then passed_over).
_SLOT_AT = len(APPOINTMENT_NAMES)
_EVENT_AT = _SLOT_AT + len(SLOT_NAMES)
_REMINDERS_AT = _EVENT_AT + len(EVENT_NAMES)


def cluster_from_locked_row(row: Sequence[Any]) -> AppointmentCluster:
    """The cluster a one-statement lock returned (the appointment present); a broken cluster raises.

    SlotMissingError or CalendarEventMissingError, as :func:`appointment_cluster_lock` (a poison item).
    """
    appointment = appointment_from_values(row[:_SLOT_AT])
    if row[_SLOT_AT] is None:
        raise SlotMissingError
    slot = slot_from_values(row[_SLOT_AT:_EVENT_AT])
    event_id = row[_EVENT_AT]
    if event_id is None:
        raise CalendarEventMissingError
    ids, remind_ats, statuses = (values or [] for values in row[_REMINDERS_AT : _REMINDERS_AT + 3])
    reminders = [(i, event_id, at, st) for i, at, st in zip(ids, remind_ats, statuses, strict=True)]
    event = event_from_values(row[_EVENT_AT:_REMINDERS_AT], reminders)
    return AppointmentCluster(appointment, slot, event)


# ------------------------------------------------------------------------------------------------- writes


def slot_insert(conn: Conn, slot: AvailabilitySlot) -> None:
    """Insert a new slot."""
    with translated_errors():
        conn.execute(SLOT_INSERT, slot_params(slot))
    slot.loaded = StoredState(slot.status, slot.version)


def cluster_save(conn: Conn, cluster: AppointmentCluster) -> None:
    """Insert the new parts of a cluster and write its changed parts with guarded UPDATEs.

    A guarded UPDATE that matches no row (another transaction changed the Version or status first) raises
    ConflictError; the caller's transaction must then be rolled back.
    """
    with translated_errors():
        # the root first: its guard is the one that usually trips
        _part_save(conn, cluster.appointment, APPOINTMENT_INSERT, APPOINTMENT_UPDATE_GUARDED, APPOINTMENT_NAMES)
        _part_save(conn, cluster.slot, SLOT_INSERT, SLOT_UPDATE_GUARDED, SLOT_NAMES)
        _part_save(conn, cluster.event, EVENT_INSERT, EVENT_UPDATE_GUARDED, EVENT_NAMES)
        _reminders_save(conn, cluster.event)


def _part_save(
    conn: Conn,
    part: Appointment | AvailabilitySlot | CalendarEvent,
    insert: LiteralString,
    update: LiteralString,
    names: tuple[str, ...],
) -> None:
    """Insert a new part, or write a changed one with its guarded UPDATE (ConflictError when it matched nothing)."""
    values = params(part, names)
    if part.loaded is None:
        conn.execute(insert, values)
    elif (part.status, part.version) != (part.loaded.status, part.loaded.version):
        _guarded(conn, update, {**values, **_expected(part.loaded)})
    part.loaded = StoredState(part.status, part.version)


def _reminders_save(conn: Conn, event: CalendarEvent) -> None:
    for reminder in event.reminders:
        if reminder.loaded is None:
            conn.execute(
                REMINDER_INSERT,
                (reminder.id, event.id, reminder.remind_at, reminder.status, event.updated_at, event.updated_at),
            )
        elif reminder.status != reminder.loaded.status:
            row = conn.execute(
                REMINDER_UPDATE_GUARDED, (reminder.status, event.updated_at, reminder.id, reminder.loaded.status)
            ).fetchone()
            if row is None:
                raise ConflictError
        reminder.loaded = StoredState(reminder.status, 0)


def cluster_save_with_outbox(conn: Conn, cluster: AppointmentCluster, rows: Sequence[OutboxRow]) -> None:
    """:func:`cluster_save` and the outbox rows of the same transaction, in one statement.

    A data-modifying CTE runs the guarded UPDATEs of the appointment, the slot, the event and the reminders
    (those that changed; the values are the domain objects') and inserts ``rows``; it returns how many rows each
    guard matched. One that matched fewer than it had to (another transaction changed the Version or status
    first) raises ConflictError: the caller's transaction, with everything the statement wrote, must then be
    rolled back. Only rows that exist are written: a cluster with a new part is a ValueError (use cluster_save).
    """
    appointment, slot, event = cluster.appointment, cluster.slot, cluster.event
    parts: tuple[Appointment | AvailabilitySlot | CalendarEvent, ...] = (appointment, slot, event)
    if any(part.loaded is None for part in parts) or any(r.loaded is None for r in event.reminders):
        raise ValueError("cluster_save_with_outbox writes loaded rows only; a new part is saved by cluster_save")
    values: dict[str, Any] = {}
    expected: dict[str, int] = {}
    for prefix, part in (("a", appointment), ("s", slot), ("e", event)):
        assert part.loaded is not None
        changed = (part.status, part.version) != (part.loaded.status, part.loaded.version)
        expected[prefix] = 1 if changed else 0
        values.update(zip(_WRITTEN_KEYS[prefix], params(part, _WRITTEN[prefix]).values(), strict=True))
        values[f"{prefix}_expected_status"] = str(part.loaded.status)
        values[f"{prefix}_expected_version"] = part.loaded.version
        if not changed:
            values[f"{prefix}_id"] = None  # matches no row: nothing to write
    changed_reminders = [r for r in event.reminders if r.loaded is not None and r.status != r.loaded.status]
    expected["r"] = len(changed_reminders)
    values["r_ids"] = [r.id for r in changed_reminders]
    values["r_statuses"] = [str(r.status) for r in changed_reminders]
    values["r_expected_statuses"] = [str(r.loaded.status) for r in changed_reminders if r.loaded is not None]
    values["r_updated_at"] = event.updated_at
    values.update(insert_values_params(rows))
    with translated_errors():
        matched = as_row(conn.execute(_cluster_write_sql(len(rows)), values).fetchone())
    if any(matched[prefix] != count for prefix, count in expected.items()):
        raise ConflictError
    for part in parts:
        part.loaded = StoredState(part.status, part.version)
    for reminder in event.reminders:
        reminder.loaded = StoredState(reminder.status, 0)


# What the one-statement write sets, per part (the guarded UPDATEs above set the same columns).
_WRITTEN: dict[str, tuple[str, ...]] = {
    "a": ("id", "status", "cancelled_by", "cancel_reason", "rescheduled_to_appointment_id", "version", "updated_at"),
    "s": ("id", "status", "version", "updated_at"),
    "e": ("id", "status", "cancel_reason", "version", "updated_at"),
}
# the parameter of each written column, per part: the names built once, not per item
_WRITTEN_KEYS = {prefix: tuple(f"{prefix}_{name}" for name in names) for prefix, names in _WRITTEN.items()}


_CLUSTER_WRITE = """
WITH a_written AS (
    UPDATE calendar.appointment
       SET status = %(a_status)s, cancelled_by = %(a_cancelled_by)s, cancel_reason = %(a_cancel_reason)s,
           rescheduled_to_appointment_id = %(a_rescheduled_to_appointment_id)s,
           version = %(a_version)s, updated_at = %(a_updated_at)s
     WHERE id = %(a_id)s AND version = %(a_expected_version)s AND status = %(a_expected_status)s
    RETURNING 1
),
s_written AS (
    UPDATE calendar.availability_slot
       SET status = %(s_status)s, version = %(s_version)s, updated_at = %(s_updated_at)s
     WHERE id = %(s_id)s AND version = %(s_expected_version)s AND status = %(s_expected_status)s
    RETURNING 1
),
e_written AS (
    UPDATE calendar.calendar_event
       SET status = %(e_status)s, cancel_reason = %(e_cancel_reason)s, version = %(e_version)s,
           updated_at = %(e_updated_at)s
     WHERE id = %(e_id)s AND version = %(e_expected_version)s AND status = %(e_expected_status)s
    RETURNING 1
),
r_written AS (
    UPDATE calendar.event_reminder AS r
       SET status = u.status, updated_at = %(r_updated_at)s
      FROM unnest(%(r_ids)s::uuid[], %(r_statuses)s::text[], %(r_expected_statuses)s::text[])
           AS u (id, status, expected_status)
     WHERE r.id = u.id AND r.status = u.expected_status
    RETURNING 1
){outbox}
SELECT (SELECT count(*) FROM a_written) AS a, (SELECT count(*) FROM s_written) AS s,
       (SELECT count(*) FROM e_written) AS e, (SELECT count(*) FROM r_written) AS r
"""


@functools.cache
def _cluster_write_sql(outbox_rows: int) -> str:
    """The one-statement write with ``outbox_rows`` outbox rows inserted (the same text for the same count)."""
    if outbox_rows == 0:
        return _CLUSTER_WRITE.format(outbox="")
    return _CLUSTER_WRITE.format(outbox=f",\nm_written AS (\n{insert_values_sql(outbox_rows)}\n)")


def _guarded(conn: Conn, query: LiteralString, params: dict[str, Any]) -> None:
    if conn.execute(query, params).fetchone() is None:
        raise ConflictError


def _expected(loaded: StoredState) -> dict[str, Any]:
    return {"expected_status": str(loaded.status), "expected_version": loaded.version}
