"""Races that really happen: concurrent HTTP requests, each on its own thread, client and database connection.

To make the race certain rather than likely, a third connection holds the contested row lock while both requests
start; the test waits until PostgreSQL shows both requests blocked on that lock, then lets them go. The requests are
queued in a known order (the second starts only once the first is waiting), so both outcomes of a race are covered.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from psycopg_pool import ConnectionPool

from pin.calendar import service
from pin.calendar.domain import ConflictError
from pin.db import Conn, ConnectionPolicy, connect, create_pool
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.settings import Settings
from tests.calendar.conftest import CalendarApi, Person, TestClient, fetch_all, fetch_one, outbox

pytestmark = pytest.mark.integration

LOCK_WAIT_DEADLINE_SECONDS = 15


def _lock_waiters(database_url: str) -> int:
    with connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    assert row is not None
    return int(row["n"])  # type: ignore[call-overload]


def _wait_for_waiters(database_url: str, count: int) -> None:
    deadline = time.monotonic() + LOCK_WAIT_DEADLINE_SECONDS
    while _lock_waiters(database_url) < count:
        assert time.monotonic() < deadline, f"fewer than {count} requests are waiting for the row lock"
        time.sleep(0.005)


@contextmanager
def _row_locked(database_url: str, table: str, row_id: str) -> Iterator[None]:
    """Hold ``FOR NO KEY UPDATE`` on one row until the block ends."""
    conn = connect(database_url)
    try:
        conn.execute(f"SELECT 1 FROM calendar.{table} WHERE id = %s FOR NO KEY UPDATE", (row_id,))  # type: ignore[arg-type]
        yield
    finally:
        conn.rollback()
        conn.close()


class Racer:
    """Runs requests on their own threads, each with its own test client (and so its own pooled connection)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._executor = ThreadPoolExecutor(max_workers=4)

    def post(self, path: str, person: Person, json: Any = None, **headers: str) -> Future[Any]:
        """POST on another thread."""

        def _call() -> Any:
            with TestClient(self._app, raise_server_exceptions=False) as client:
                return client.post(path, json=json, headers={**person.headers, **headers})

        return self._executor.submit(_call)

    def close(self) -> None:
        """Wait for every request."""
        self._executor.shutdown(wait=True)


@pytest.fixture
def racer(app: FastAPI) -> Iterator[Racer]:
    """A racer on this test's API."""
    r = Racer(app)
    yield r
    r.close()


def _race(
    database_url: str, table: str, row_id: str, first: Callable[[], Future[Any]], second: Callable[[], Future[Any]]
) -> tuple[Any, Any]:
    """Start ``first``, then ``second``, both blocked on one row lock; release it; their responses."""
    with _row_locked(database_url, table, row_id):
        waiting = _lock_waiters(database_url)
        one = first()
        _wait_for_waiters(database_url, waiting + 1)
        two = second()
        _wait_for_waiters(database_url, waiting + 2)
    return one.result(timeout=30), two.result(timeout=30)


def _people(api: CalendarApi) -> tuple[Person, Person]:
    agent = api.person("agent")
    return agent, api.person("investor", tenant_id=agent.tenant_id)


@pytest.mark.parametrize("round_", range(3))
def test_two_investors_book_one_slot(
    api: CalendarApi, racer: Racer, pool: ConnectionPool[Conn], database_url: str, round_: int
) -> None:
    agent, first = _people(api)
    second = api.person("investor", tenant_id=agent.tenant_id)
    slot = api.create_slot(agent)
    path = f"/calendar/slots/{slot['id']}/book"
    one, two = _race(
        database_url, "availability_slot", slot["id"], lambda: racer.post(path, first), lambda: racer.post(path, second)
    )
    assert (one.status_code, two.status_code) == (201, 409), (one.text, two.text)
    assert two.json()["code"] == "slot-not-available"
    appointments = fetch_all(
        pool, "SELECT investor_user_id, status FROM calendar.appointment WHERE slot_id = %s", slot["id"]
    )
    assert appointments == [{"investor_user_id": first.user_id, "status": "Pending"}]
    slot_row = fetch_one(pool, "SELECT status, version FROM calendar.availability_slot WHERE id = %s", slot["id"])
    assert (slot_row["status"], slot_row["version"]) == ("Booked", 2)
    created = [r for r in outbox(pool) if r["topic"] == "pin.calendar.appointment-created.v1"]
    assert len(created) == 1
    del round_


@pytest.mark.parametrize("confirm_first", [True, False], ids=["confirm-first", "decline-first"])
def test_confirm_races_decline(
    api: CalendarApi, racer: Racer, pool: ConnectionPool[Conn], database_url: str, confirm_first: bool
) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    base = f"/calendar/appointments/{appointment['id']}"

    def confirm() -> Future[Any]:
        return racer.post(f"{base}/confirm", agent)

    def decline() -> Future[Any]:
        return racer.post(f"{base}/decline", agent, json={"reason": "busy"})

    first, second = (confirm, decline) if confirm_first else (decline, confirm)
    one, two = _race(database_url, "appointment", appointment["id"], first, second)
    assert (one.status_code, two.status_code) == (200, 409), (one.text, two.text)
    assert two.json()["code"] == "appointment-not-pending"
    row = fetch_one(pool, "SELECT status, version FROM calendar.appointment WHERE id = %s", appointment["id"])
    topics = [r["topic"] for r in outbox(pool, appointment["id"])]
    if confirm_first:
        assert (row["status"], row["version"]) == ("Confirmed", 2)
        assert topics == ["pin.calendar.appointment-created.v1", "pin.calendar.appointment-confirmed.v1"]
    else:
        assert (row["status"], row["version"]) == ("Declined", 2)
        assert topics == ["pin.calendar.appointment-created.v1", "pin.calendar.appointment-cancelled.v1"]
        assert len(outbox(pool, appointment["calendarEventId"])) == 2  # Scheduled, Cancelled: once


@pytest.mark.parametrize("confirm_first", [True, False], ids=["confirm-first", "cancel-first"])
@pytest.mark.parametrize("canceller", ["agent", "investor"])
def test_confirm_races_cancel_with_the_same_version(
    *,
    api: CalendarApi,
    racer: Racer,
    pool: ConnectionPool[Conn],
    database_url: str,
    confirm_first: bool,
    canceller: str,
) -> None:
    """Both callers saw Version 1 (If-Match: "1"): exactly one transition, the other is refused."""
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    base = f"/calendar/appointments/{appointment['id']}"
    cancel_path = f"{base}/cancel" if canceller == "agent" else f"/calendar/my/appointments/{appointment['id']}/cancel"
    cancel_person = agent if canceller == "agent" else investor

    def confirm() -> Future[Any]:
        return racer.post(f"{base}/confirm", agent, **{"If-Match": '"1"'})

    def cancel() -> Future[Any]:
        return racer.post(cancel_path, cancel_person, json={"reason": "r"}, **{"If-Match": '"1"'})

    first, second = (confirm, cancel) if confirm_first else (cancel, confirm)
    one, two = _race(database_url, "appointment", appointment["id"], first, second)
    assert one.status_code == 200, one.text
    assert two.status_code == 412, two.text
    row = fetch_one(pool, "SELECT status, version FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert row["version"] == 2
    assert row["status"] == ("Confirmed" if confirm_first else "Cancelled")
    topics = [r["topic"] for r in outbox(pool, appointment["id"])]
    assert len(topics) == 2  # created + exactly one of confirmed / cancelled


@pytest.mark.parametrize("reschedule_first", [True, False], ids=["reschedule-first", "booking-first"])
def test_reschedule_to_a_slot_being_booked(
    api: CalendarApi, racer: Racer, pool: ConnectionPool[Conn], database_url: str, reschedule_first: bool
) -> None:
    """INV-APT-5: the pair (old Cancelled + new appointment) commits whole, or nothing of it does."""
    agent, investor = _people(api)
    rival = api.person("investor", tenant_id=agent.tenant_id)
    old = api.booked(agent, investor)
    target = api.create_slot(agent, lead_minutes=0)

    def reschedule() -> Future[Any]:
        return racer.post(
            f"/calendar/my/appointments/{old['id']}/reschedule", investor, json={"newSlotId": target["id"]}
        )

    def book() -> Future[Any]:
        return racer.post(f"/calendar/slots/{target['id']}/book", rival)

    first, second = (reschedule, book) if reschedule_first else (book, reschedule)
    one, two = _race(database_url, "availability_slot", target["id"], first, second)
    assert (one.status_code, two.status_code) == (201, 409), (one.text, two.text)
    assert two.json()["code"] == "slot-not-available"

    old_row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", old["id"])
    old_slot = fetch_one(pool, "SELECT status FROM calendar.availability_slot WHERE id = %s", old["slotId"])
    on_target = fetch_all(
        pool, "SELECT id, investor_user_id, status FROM calendar.appointment WHERE slot_id = %s", target["id"]
    )
    assert len(on_target) == 1
    assert (
        fetch_one(pool, "SELECT status FROM calendar.availability_slot WHERE id = %s", target["id"])["status"]
        == "Booked"
    )
    old_topics = [r["topic"] for r in outbox(pool, old["id"])]
    if reschedule_first:  # the whole pair
        new_id = uuid.UUID(one.json()["id"])
        assert (old_row["status"], old_row["rescheduled_to_appointment_id"]) == ("Cancelled", new_id)
        assert old_slot["status"] == "Available"
        assert on_target == [{"id": new_id, "investor_user_id": investor.user_id, "status": "Pending"}]
        assert old_topics == ["pin.calendar.appointment-created.v1", "pin.calendar.appointment-cancelled.v1"]
        assert [r["topic"] for r in outbox(pool, str(new_id))] == ["pin.calendar.appointment-created.v1"]
    else:  # nothing of it
        assert (old_row["status"], old_row["version"], old_row["rescheduled_to_appointment_id"]) == ("Pending", 1, None)
        assert old_slot["status"] == "Booked"
        assert on_target[0]["investor_user_id"] == rival.user_id
        assert old_topics == ["pin.calendar.appointment-created.v1"]
        event = fetch_one(pool, "SELECT status FROM calendar.calendar_event WHERE id = %s", old["calendarEventId"])
        assert event["status"] == "Scheduled"


def test_a_request_never_waits_forever_for_a_held_row(
    api: CalendarApi, make_settings: Callable[..., Settings], database_url: str
) -> None:
    """A row held longer than the lock timeout (a stuck transaction) is a 409 conflict, not a hung request."""
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    policy = ConnectionPolicy.from_settings(make_settings(api_lock_timeout_seconds=0.2), "api")
    with create_pool(database_url, name="api", policy=policy) as api_pool:  # the API's sessions, a 0.2 s wait
        calendar = service.UseCaseContext(api_pool, service.CalendarPolicy(), MessageContext("t"), RELAY_POLICY)
        actor = service.Actor(agent.user_id, agent.tenant_id)
        with _row_locked(database_url, "appointment", appointment["id"]), pytest.raises(ConflictError):
            service.confirm_appointment(calendar, actor, uuid.UUID(appointment["id"]))
        assert service.confirm_appointment(calendar, actor, uuid.UUID(appointment["id"])).status == "Confirmed"
