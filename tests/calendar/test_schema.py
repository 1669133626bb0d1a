"""The database half of the state machines and invariants: what it refuses even when code forgets."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import errors
from psycopg_pool import ConnectionPool

from pin.calendar import repository, service
from pin.calendar.domain import (
    AppointmentCluster,
    ConflictError,
    Kind,
    SlotNotAvailableError,
    SlotStatus,
    StoredState,
)
from pin.db import Conn, connect
from pin.outbox.writer import RELAY_POLICY, MessageContext

pytestmark = pytest.mark.integration


@pytest.fixture
def calendar(pool: ConnectionPool[Conn]) -> service.UseCaseContext:
    """The use cases on this test's database."""
    return service.UseCaseContext(pool, service.CalendarPolicy(), MessageContext("schema-test"), RELAY_POLICY)


def _booked(calendar: service.UseCaseContext) -> tuple[uuid.UUID, uuid.UUID]:
    tenant = uuid.uuid4()
    agent, investor = service.Actor(uuid.uuid4(), tenant), service.Actor(uuid.uuid4(), tenant)
    with calendar.pool.connection() as conn:
        now = conn.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]
    start = now + timedelta(days=2)
    slot = service.create_slot(
        calendar, agent, kind=Kind.CONSULTATION, start_at=start, end_at=start + timedelta(hours=1),
        time_zone="UTC", min_lead_time_minutes=0, auto_confirm=False,
    )  # fmt: skip
    cluster = service.book_slot(calendar, investor, slot.id)
    return cluster.appointment.id, slot.id


def _fails(database_url: str, sql: str, *params: object) -> psycopg.Error:
    with connect(database_url) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(sql, params)  # type: ignore[arg-type]
    return caught.value


@pytest.mark.parametrize(
    ("sql", "error", "constraint"),
    [
        (
            "UPDATE calendar.appointment SET status = 'Confirmed', version = version + 1 WHERE id = %s",
            errors.CheckViolation,
            "ck_appointment_status_transition",
        ),
        (
            "UPDATE calendar.appointment SET status = 'Pending', version = version + 1 WHERE id = %s",
            errors.CheckViolation,
            "ck_appointment_status_transition",
        ),
        (
            "UPDATE calendar.appointment SET cancel_reason = 'x', version = version + 5 WHERE id = %s",
            errors.CheckViolation,
            "ck_appointment_version_step",
        ),
    ],
    ids=["declined-to-confirmed", "declined-to-pending", "version-jump"],
)
def test_terminal_appointments_are_frozen(
    calendar: service.UseCaseContext, database_url: str, sql: str, error: type[psycopg.Error], constraint: str
) -> None:
    appointment_id, _ = _booked(calendar)
    actor = _agent_of(calendar, appointment_id)
    service.decline_appointment(calendar, actor, appointment_id, "no")
    failure = _fails(database_url, sql, appointment_id)
    assert isinstance(failure, error)
    assert failure.diag.constraint_name == constraint


def _agent_of(calendar: service.UseCaseContext, appointment_id: uuid.UUID) -> service.Actor:
    with calendar.pool.connection() as conn:
        row = conn.execute(
            "SELECT agent_user_id, tenant_id FROM calendar.appointment WHERE id = %s", (appointment_id,)
        ).fetchone()
    assert row is not None
    return service.Actor(row["agent_user_id"], row["tenant_id"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sql", "constraint"),
    [
        ("UPDATE calendar.appointment SET pending_expires_at = NULL, version = version + 1 WHERE id = %s",
         "ck_appointment_pending_has_expiry"),
        ("UPDATE calendar.appointment SET status = 'Cancelled', version = version + 1 WHERE id = %s",
         "ck_appointment_cancelled_has_actor"),
        ("UPDATE calendar.appointment SET status = 'Declined', cancelled_by = 'Agent', version = version + 1 "
         "WHERE id = %s", "ck_appointment_declined_expired_no_actor"),
        ("UPDATE calendar.appointment SET status = 'Expired', cancelled_by = 'System', version = version + 1 "
         "WHERE id = %s", "ck_appointment_declined_expired_no_actor"),
        ("UPDATE calendar.appointment SET end_at = start_at, version = version + 1 WHERE id = %s",
         "ck_appointment_end_after_start"),
    ],
)  # fmt: skip
def test_appointment_checks(calendar: service.UseCaseContext, database_url: str, sql: str, constraint: str) -> None:
    appointment_id, _ = _booked(calendar)
    failure = _fails(database_url, sql, appointment_id)
    assert isinstance(failure, errors.CheckViolation)
    assert failure.diag.constraint_name == constraint


def test_slot_checks_and_transitions(calendar: service.UseCaseContext, database_url: str) -> None:
    _, slot_id = _booked(calendar)
    for sql, constraint in [
        ("UPDATE calendar.availability_slot SET min_lead_time_minutes = -1, version = version + 1 WHERE id = %s",
         "ck_slot_min_lead_time"),
        ("UPDATE calendar.availability_slot SET end_at = start_at, version = version + 1 WHERE id = %s",
         "ck_slot_end_after_start"),
    ]:  # fmt: skip
        failure = _fails(database_url, sql, slot_id)
        assert failure.diag.constraint_name == constraint
    with connect(database_url) as conn:
        conn.execute(
            "UPDATE calendar.availability_slot SET status = 'Expired', version = version + 1 WHERE id = %s", (slot_id,)
        )
        conn.commit()
    failure = _fails(
        database_url,
        "UPDATE calendar.availability_slot SET status = 'Available', version = version + 1 WHERE id = %s",
        slot_id,
    )
    assert failure.diag.constraint_name == "ck_availability_slot_status_transition"


def test_at_most_one_active_appointment_per_slot(calendar: service.UseCaseContext, database_url: str) -> None:
    appointment_id, slot_id = _booked(calendar)
    failure = _fails(
        database_url,
        """INSERT INTO calendar.appointment (id, tenant_id, slot_id, agent_user_id, investor_user_id, kind,
               start_at, end_at, time_zone, status, pending_expires_at, calendar_event_id, created_at, updated_at)
           SELECT gen_random_uuid(), tenant_id, slot_id, agent_user_id, gen_random_uuid(), kind, start_at, end_at,
                  time_zone, 'Confirmed', NULL, calendar_event_id, now(), now()
             FROM calendar.appointment WHERE id = %s""",
        appointment_id,
    )
    assert isinstance(failure, errors.UniqueViolation)
    assert failure.diag.constraint_name == "ux_appointment_active_per_slot"
    del slot_id


def test_indexes_and_autovacuum(pool: ConnectionPool[Conn]) -> None:
    with pool.connection() as conn:
        indexes = {
            row["indexname"]: row["indexdef"]
            for row in conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'calendar'")
        }
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'calendar.appointment'::regclass"
        ).fetchone()
    claim = str(indexes["ix_appointments_pending_expires_at"])
    assert "(pending_expires_at, id)" in claim
    assert "WHERE (status = 'Pending'::text)" in claim
    active = str(indexes["ux_appointment_active_per_slot"])
    assert active.startswith("CREATE UNIQUE INDEX")
    assert "'Pending'::text" in active
    assert "'Confirmed'::text" in active
    assert options is not None
    assert "autovacuum_vacuum_scale_factor=0" in options["reloptions"]  # type: ignore[operator]


def test_guarded_save_of_a_stale_cluster_is_a_conflict(calendar: service.UseCaseContext, database_url: str) -> None:
    """A cluster loaded, then changed by someone else, is never silently overwritten."""
    appointment_id, _ = _booked(calendar)
    with connect(database_url) as conn:
        stale = repository.appointment_cluster_lock(conn, appointment_id)
        conn.commit()  # the lock is gone; another transaction may now change the rows
    assert stale is not None
    service.confirm_appointment(calendar, _agent_of(calendar, appointment_id), appointment_id)
    stale.decline("too late", stale.appointment.updated_at)
    with connect(database_url) as conn:
        with pytest.raises(ConflictError):
            repository.cluster_save(conn, stale, [])
        conn.rollback()
    with calendar.pool.connection() as conn:
        row = conn.execute("SELECT status FROM calendar.appointment WHERE id = %s", (appointment_id,)).fetchone()
    assert row is not None
    assert row["status"] == "Confirmed"


def test_unique_violation_of_the_active_index_is_slot_not_available(
    calendar: service.UseCaseContext, database_url: str
) -> None:
    """Should a code path ever skip the slot check, the database refuses and the adapter says why (never a 500)."""
    _, slot_id = _booked(calendar)
    with connect(database_url) as conn:
        slot = repository.slot_lock(conn, slot_id)
        assert slot is not None
        assert slot.status is SlotStatus.BOOKED
        slot.status = SlotStatus.AVAILABLE  # pretend: a buggy path believes the slot is free
        slot.loaded = StoredState(SlotStatus.BOOKED, slot.version)
        cluster = AppointmentCluster.book(
            slot, investor_user_id=uuid.uuid4(), now=datetime.now(UTC), pending_ttl=timedelta(hours=1)
        )
        with pytest.raises(SlotNotAvailableError):
            repository.cluster_save(conn, cluster, [])
        conn.rollback()
