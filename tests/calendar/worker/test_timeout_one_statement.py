"""appointment-timeout's short path: the claim locks the whole cluster, the cascade is written in one statement.

What the path must keep: a guard that matches nothing in the one-statement write raises ConflictError and the
item's transaction writes nothing; a missing slot or event is still a poison item; a row of the cluster held past
the lock timeout makes the item fall back to the claim alone, where it is skipped and counted; the cycle's one
connection goes back to the pool with its lock_timeout reset.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from psycopg_pool import ConnectionPool

from pin.calendar import expiry, repository, service
from pin.calendar.domain import ConflictError
from pin.calendar.expiry import CLAIM_SQL, AppointmentTimeoutConfig, AppointmentTimeoutJob, appointment_claim_next
from pin.db import Conn, connect, create_pool, database_now
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.unit_of_work import UnitOfWork
from tests.calendar.worker.factory import Cluster, execute, outbox_rows, seed_appointments, statuses

pytestmark = pytest.mark.integration


def make_job(pool: ConnectionPool[Conn], **config: object) -> AppointmentTimeoutJob:
    return AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(instance="test", **config))  # type: ignore[arg-type]


def assert_untouched(pool: ConnectionPool[Conn], c: Cluster) -> None:
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Pending"]
    assert statuses(pool, "availability_slot", [c.slot_id]) == ["Booked"]
    assert statuses(pool, "calendar_event", [c.event_id]) == ["Scheduled"]


# One concurrent change per guard of the one-statement write, made after the cluster was read.
CHANGES = {
    "appointment": "UPDATE calendar.appointment SET version = version + 1 WHERE id = %s",
    "slot": "UPDATE calendar.availability_slot SET version = version + 1 WHERE id = %s",
    "event": "UPDATE calendar.calendar_event SET version = version + 1 WHERE id = %s",
    "reminder": "UPDATE calendar.event_reminder SET status = 'Sent' WHERE id = %s",
}


@pytest.mark.parametrize("part", list(CHANGES))
def test_a_guard_matching_nothing_raises_conflict_and_writes_nothing(pool: ConnectionPool[Conn], part: str) -> None:
    (c,) = seed_appointments(pool, 1)
    with pool.connection() as conn:  # read under lock, then released: the cluster is what the worker would hold
        cluster = repository.appointment_cluster_lock(conn, c.appointment_id)
        as_of = database_now(conn)
    assert cluster is not None
    target = {"appointment": c.appointment_id, "slot": c.slot_id, "event": c.event_id, "reminder": c.reminder_ids[0]}
    execute(pool, CHANGES[part], (target[part],))

    with UnitOfWork(pool, MessageContext("run"), outbox=RELAY_POLICY) as uow, pytest.raises(ConflictError):
        service.expire_locked_cluster(uow, cluster, as_of)

    # the statement's other writes and its outbox rows were rolled back with the item
    assert_untouched(pool, c)
    expected_reminders = ["Sent", "Pending"] if part == "reminder" else ["Pending", "Pending"]
    assert statuses(pool, "event_reminder", list(c.reminder_ids)) == expected_reminders
    assert outbox_rows(pool) == []


def test_the_one_statement_write_expires_the_cluster(pool: ConnectionPool[Conn]) -> None:
    (c,) = seed_appointments(pool, 1)
    with UnitOfWork(pool, MessageContext("run"), outbox=RELAY_POLICY) as uow:
        cluster = repository.appointment_cluster_lock(uow.conn, c.appointment_id)
        assert cluster is not None
        result = service.expire_locked_cluster(uow, cluster, database_now(uow.conn))
        uow.commit()
    assert result.status is service.ExpiryStatus.EXPIRED
    assert statuses(pool, "appointment", [c.appointment_id]) == ["Expired"]
    assert statuses(pool, "calendar_event", [c.event_id]) == ["Cancelled"]
    assert statuses(pool, "event_reminder", list(c.reminder_ids)) == ["Skipped", "Skipped"]
    versions = {r["id"]: r["version"] for r in _rows(pool, "SELECT id, version FROM calendar.appointment")}
    assert versions[c.appointment_id] == 2
    assert sorted(r["event_type"] for r in outbox_rows(pool)) == [
        "pin.calendar.appointment-cancelled",
        "pin.calendar.event-status-changed",
    ]


def _rows(pool: ConnectionPool[Conn], sql: str) -> list[dict[str, object]]:
    with pool.connection() as conn:
        return list(conn.execute(sql).fetchall())


@pytest.mark.parametrize("missing", ["slot", "event"])
def test_missing_slot_or_event_is_still_poison(pool: ConnectionPool[Conn], missing: str) -> None:
    poison, healthy = seed_appointments(pool, 2)  # the poison item sorts first
    if missing == "slot":
        execute(pool, "ALTER TABLE calendar.appointment DROP CONSTRAINT appointment_slot_id_fkey")
        execute(pool, "DELETE FROM calendar.availability_slot WHERE id = %s", (poison.slot_id,))
    else:
        execute(pool, "ALTER TABLE calendar.appointment DROP CONSTRAINT fk_appointment_calendar_event")
        execute(pool, "DELETE FROM calendar.event_reminder WHERE calendar_event_id = %s", (poison.event_id,))
        execute(pool, "DELETE FROM calendar.calendar_event WHERE id = %s", (poison.event_id,))

    result = make_job(pool).run_once()

    assert (result.expired_count, result.failed_count) == (1, 1)
    assert statuses(pool, "appointment", [poison.appointment_id, healthy.appointment_id]) == ["Pending", "Expired"]
    failure = _rows(pool, "SELECT item_id, last_error FROM jobs.item_failure")
    name = "SlotMissingError" if missing == "slot" else "CalendarEventMissingError"
    assert [(f["item_id"], str(f["last_error"]).split(":")[0]) for f in failure] == [(poison.appointment_id, name)]
    assert {r["message_key"] for r in outbox_rows(pool, "pin.calendar.appointment-cancelled")} == {
        str(healthy.appointment_id)
    }


@pytest.mark.parametrize("held", ["event", "reminder"])
def test_event_or_reminder_held_past_the_lock_timeout_is_skipped_and_counted(
    pool: ConnectionPool[Conn], database_url: str, held: str
) -> None:
    """The claim's lock of the cluster times out: the item falls back to the claim alone, and is skipped."""
    c_held, c_free = seed_appointments(pool, 2)
    blocker = connect(database_url)
    try:
        if held == "event":
            sql = "SELECT 1 FROM calendar.calendar_event WHERE id = %s FOR NO KEY UPDATE"
            blocker.execute(sql, (c_held.event_id,))
        else:
            sql = "SELECT 1 FROM calendar.event_reminder WHERE id = %s FOR NO KEY UPDATE"
            blocker.execute(sql, (c_held.reminder_ids[1],))
        result = make_job(pool, item_lock_timeout_seconds=0.3).run_once()
    finally:
        blocker.rollback()
        blocker.close()

    assert (result.expired_count, result.skipped_locked, result.failed_count) == (1, 1, 0)
    assert_untouched(pool, c_held)
    assert statuses(pool, "event_reminder", list(c_held.reminder_ids)) == ["Pending", "Pending"]
    assert statuses(pool, "appointment", [c_free.appointment_id]) == ["Expired"]
    # the next cycle, with the rows free again, expires it
    assert make_job(pool).run_once().expired_count == 1


def test_the_cycle_runs_on_one_connection_and_resets_its_lock_timeout(database_url: str) -> None:
    pool = create_pool(database_url, min_size=1, max_size=1, name="one", timeout=5.0)
    try:
        poison, *_ = seed_appointments(pool, 3)
        execute(pool, "UPDATE calendar.availability_slot SET status = 'Available', version = version + 1"
                      " WHERE id = %s", (poison.slot_id,))  # fmt: skip
        result = make_job(pool, item_lock_timeout_seconds=1.5).run_once()
        assert (result.expired_count, result.failed_count) == (2, 1)
        with pool.connection() as conn:
            row = conn.execute("SELECT current_setting('lock_timeout') AS v").fetchone()
        assert row is not None
        assert row["v"] == "0"
        assert pool.get_stats()["pool_size"] == 1
    finally:
        pool.close()


def test_claim_locks_and_returns_the_whole_cluster(pool: ConnectionPool[Conn], database_url: str) -> None:
    (c,) = seed_appointments(pool, 1)
    with pool.connection() as conn:
        as_of = database_now(conn) + timedelta(seconds=1)
        claim = appointment_claim_next(conn, as_of=as_of, after=None)
        assert claim.row is not None
        cluster = repository.cluster_from_locked_row(claim.row)
        # every row of the cluster is locked: another transaction cannot take any of them without waiting
        with connect(database_url) as other:
            for table, row_id in (
                ("appointment", c.appointment_id),
                ("availability_slot", c.slot_id),
                ("calendar_event", c.event_id),
                ("event_reminder", c.reminder_ids[0]),
                ("event_reminder", c.reminder_ids[1]),
            ):
                sql = f"SELECT id FROM calendar.{table} WHERE id = %s FOR NO KEY UPDATE SKIP LOCKED"
                assert other.execute(sql, (row_id,)).fetchone() is None, table  # type: ignore[arg-type]
    assert cluster.appointment.id == c.appointment_id
    assert cluster.slot.id == c.slot_id
    assert cluster.event.id == c.event_id
    assert sorted(r.id for r in cluster.event.reminders) == sorted(c.reminder_ids)


def test_without_exported_spans_the_outbox_carries_the_cycle_trace(
    pool: ConnectionPool[Conn], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No span processor: no span per item; every outbox row of the cycle carries the cycle span's traceparent."""
    provider = TracerProvider()  # records spans (valid traceparents) but exports none, like the roles by default
    monkeypatch.setattr(expiry, "tracer", lambda: provider.get_tracer("pin"))
    seed_appointments(pool, 3)

    assert make_job(pool).run_once().expired_count == 3

    parents = {str(row["headers"]["traceparent"]) for row in outbox_rows(pool)}
    assert len(parents) == 1  # one span (the cycle's) for the six rows
    (parent,) = parents
    assert parent.startswith("00-")
    assert len(parent.split("-")) == 4


def test_the_claim_statement_is_short_enough_for_psycopg_to_cache_its_conversion() -> None:
    """psycopg converts a query of more than 4,096 bytes again on every execute: the claim runs once per item."""
    assert len(CLAIM_SQL.encode()) <= 4096
