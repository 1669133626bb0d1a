"""Test data of the appointment-timeout worker: whole appointment clusters, written in bulk with COPY.

Defaults are consistent with the state they build (STYLE.md): a Pending appointment has its slot Booked
(AutoConfirm off), its calendar event Scheduled with two Pending reminders, and a PendingExpiresAt; an
AutoConfirm appointment is Confirmed with PendingExpiresAt null. A thousand clusters take well under a second.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now

SLOT_COLUMNS = (
    "id, tenant_id, agent_user_id, kind, start_at, end_at, time_zone, min_lead_time_minutes, auto_confirm, status,"
    " version, created_at, updated_at"
)
APPOINTMENT_COLUMNS = (
    "id, tenant_id, slot_id, agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,"
    " pending_expires_at, calendar_event_id, version, created_at, updated_at"
)
EVENT_COLUMNS = (
    "id, tenant_id, owner_user_id, origin, appointment_id, start_at, end_at, time_zone, status, version,"
    " created_at, updated_at"
)
REMINDER_COLUMNS = "id, calendar_event_id, remind_at, status, created_at, updated_at"


@dataclass(frozen=True)
class Cluster:
    """The ids and times of one seeded appointment cluster."""

    appointment_id: uuid.UUID
    slot_id: uuid.UUID
    event_id: uuid.UUID
    reminder_ids: tuple[uuid.UUID, uuid.UUID]
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    start_at: datetime
    end_at: datetime
    pending_expires_at: datetime | None
    min_lead_time_minutes: int


def db_now(pool: ConnectionPool[Conn]) -> datetime:
    """The database clock."""
    with pool.connection() as conn:
        return database_now(conn)


def seed_appointments(
    pool: ConnectionPool[Conn],
    count: int = 1,
    *,
    pending_expires_at: datetime | None = None,
    start_at: datetime | None = None,
    lead_minutes: int = 30,
    auto_confirm: bool = False,
    tenant_id: uuid.UUID | None = None,
    spread: timedelta = timedelta(milliseconds=1),
) -> list[Cluster]:
    """``count`` appointment clusters in one transaction; the i-th is due ``i * spread`` after the first.

    Pending (the default): due a minute ago unless ``pending_expires_at`` says otherwise, slot three days ahead.
    ``auto_confirm``: Confirmed at booking, PendingExpiresAt null (seed 000: never selected).
    """
    now = db_now(pool)
    start = start_at or now + timedelta(days=3)
    first_due = None if auto_confirm else (pending_expires_at or now - timedelta(minutes=1))
    clusters = [_cluster(start, first_due, i, spread, lead_minutes, tenant_id) for i in range(count)]
    created = now - timedelta(hours=1)
    slots, appointments, events, reminders = [], [], [], []
    for c in clusters:
        slots.append(_slot_row(c, auto_confirm, created))
        appointments.append(_appointment_row(c, auto_confirm, created))
        events.append(_event_row(c, created))
        for reminder_id, offset in zip(c.reminder_ids, (timedelta(hours=24), timedelta(hours=1)), strict=True):
            reminders.append((reminder_id, c.event_id, c.start_at - offset, "Pending", created, created))
    with pool.connection() as conn, conn.cursor() as cur:
        for table, columns, rows in (
            ("calendar.availability_slot", SLOT_COLUMNS, slots),
            ("calendar.appointment", APPOINTMENT_COLUMNS, appointments),
            ("calendar.calendar_event", EVENT_COLUMNS, events),
            ("calendar.event_reminder", REMINDER_COLUMNS, reminders),
        ):
            with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
    return clusters


def _cluster(  # noqa: PLR0917 - a private builder called once, positionally
    start: datetime,
    first_due: datetime | None,
    i: int,
    spread: timedelta,
    lead_minutes: int,
    tenant_id: uuid.UUID | None,
) -> Cluster:
    return Cluster(
        appointment_id=uuid.uuid4(),
        slot_id=uuid.uuid4(),
        event_id=uuid.uuid4(),
        reminder_ids=(uuid.uuid4(), uuid.uuid4()),
        tenant_id=tenant_id or uuid.uuid4(),
        agent_user_id=uuid.uuid4(),
        investor_user_id=uuid.uuid4(),
        start_at=start,
        end_at=start + timedelta(hours=1),
        pending_expires_at=None if first_due is None else first_due + i * spread,
        min_lead_time_minutes=lead_minutes,
    )


def _slot_row(c: Cluster, auto_confirm: bool, created: datetime) -> tuple[Any, ...]:
    return (c.slot_id, c.tenant_id, c.agent_user_id, "Showing", c.start_at, c.end_at, "Europe/Moscow",
            c.min_lead_time_minutes, auto_confirm, "Booked", 2, created, created)  # fmt: skip


def _appointment_row(c: Cluster, auto_confirm: bool, created: datetime) -> tuple[Any, ...]:
    status = "Confirmed" if auto_confirm else "Pending"
    return (c.appointment_id, c.tenant_id, c.slot_id, c.agent_user_id, c.investor_user_id, "Showing", c.start_at,
            c.end_at, "Europe/Moscow", status, c.pending_expires_at, c.event_id, 1, created, created)  # fmt: skip


def _event_row(c: Cluster, created: datetime) -> tuple[Any, ...]:
    return (c.event_id, c.tenant_id, c.agent_user_id, "Appointment", c.appointment_id, c.start_at, c.end_at,
            "Europe/Moscow", "Scheduled", 1, created, created)  # fmt: skip


# ------------------------------------------------------------------------------------------------- reading


def rows_by_id(pool: ConnectionPool[Conn], table: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """Rows of a calendar table by id."""
    with pool.connection() as conn:
        rows = conn.execute(f"SELECT * FROM calendar.{table} WHERE id = ANY(%s)", (ids,)).fetchall()
    return {row["id"]: dict(row) for row in rows}  # type: ignore[misc]


def statuses(pool: ConnectionPool[Conn], table: str, ids: list[uuid.UUID]) -> list[str]:
    """The status of each row, in the order of ``ids``."""
    rows = rows_by_id(pool, table, ids)
    return [str(rows[i]["status"]) for i in ids]


def outbox_rows(pool: ConnectionPool[Conn], event_type: str | None = None) -> list[dict[str, Any]]:
    """Outbox rows in id order, of one event type when given."""
    with pool.connection() as conn:
        if event_type is None:
            rows = conn.execute("SELECT * FROM outbox.message ORDER BY id").fetchall()
        else:
            rows = conn.execute(
                "SELECT * FROM outbox.message WHERE event_type = %s ORDER BY id", (event_type,)
            ).fetchall()
    return [dict(row) for row in rows]


def execute(pool: ConnectionPool[Conn], sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run one statement and commit."""
    with pool.connection() as conn:
        conn.execute(sql, params)


def slow_expiry(pool: ConnectionPool[Conn], seconds: float) -> None:
    """Every Pending -> Expired UPDATE of an appointment sleeps ``seconds`` holding its locks (widens races)."""
    execute(pool, f"CREATE FUNCTION public.test_slow_expiry() RETURNS trigger LANGUAGE plpgsql AS $$"
                  f" BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$")  # fmt: skip
    execute(pool, "CREATE TRIGGER test_slow_expiry BEFORE UPDATE ON calendar.appointment FOR EACH ROW"
                  " WHEN (OLD.status = 'Pending' AND NEW.status = 'Expired')"
                  " EXECUTE FUNCTION public.test_slow_expiry()")  # fmt: skip


def break_slot(pool: ConnectionPool[Conn], slot_id: uuid.UUID) -> None:
    """Poison: the slot of a Pending appointment becomes Available (an unexpected cascade state)."""
    execute(pool, "UPDATE calendar.availability_slot SET status = 'Available', version = version + 1 WHERE id = %s",
            (slot_id,))  # fmt: skip
