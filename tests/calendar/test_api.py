"""The calendar HTTP API: resources, ETag and If-Match, and a problem document with a stable code for bad input."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.outbox.writer import RELAY_POLICY
from tests.calendar.conftest import CalendarApi, Person, fetch_one, outbox

pytestmark = pytest.mark.integration


def _people(api: CalendarApi) -> tuple[Person, Person]:
    agent = api.person("agent")
    return agent, api.person("investor", tenant_id=agent.tenant_id)


def _problem(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert (body["status"], body["code"], body["type"]) == (status, code, f"urn:pin:problem:{code}")
    assert "Traceback" not in response.text


def test_slot_resource_and_etag(api: CalendarApi) -> None:
    agent, investor = _people(api)
    slot = api.create_slot(agent, lead_minutes=15, auto_confirm=True, kind="Consultation")
    assert (slot["status"], slot["version"], slot["kind"], slot["autoConfirm"]) == (
        "Available",
        1,
        "Consultation",
        True,
    )
    assert set(slot) == {
        "id", "tenantId", "agentUserId", "kind", "startAt", "endAt", "timeZone", "minLeadTimeMinutes",
        "autoConfirm", "status", "version", "createdAt", "updatedAt",
    }  # fmt: skip
    read = api.get(f"/calendar/slots/{slot['id']}", investor)
    assert read.status_code == 200
    assert read.headers["ETag"] == '"1"'
    assert read.json() == slot


def test_booking_returns_the_appointment_and_its_event_with_reminders(api: CalendarApi) -> None:
    agent, investor = _people(api)
    slot = api.create_slot(agent)
    response = api.book(investor, slot["id"], **{"If-Match": '"1"'})
    assert response.status_code == 201, response.text
    appointment = response.json()
    assert response.headers["Location"] == f"/calendar/appointments/{appointment['id']}"
    assert (appointment["status"], appointment["version"], appointment["slotId"]) == ("Pending", 1, slot["id"])
    assert appointment["pendingExpiresAt"] is not None
    assert api.get(f"/calendar/slots/{slot['id']}", agent).json()["status"] == "Booked"
    event = api.get(f"/calendar/events/{appointment['calendarEventId']}", agent)
    assert event.status_code == 200, event.text
    body = event.json()
    assert (body["status"], body["origin"], body["appointmentId"], body["ownerUserId"]) == (
        "Scheduled",
        "Appointment",
        appointment["id"],
        str(agent.user_id),
    )
    assert [r["status"] for r in body["reminders"]] == ["Pending", "Pending"]
    assert event.headers["ETag"] == '"1"'
    for person in (agent, investor):
        read = api.get(f"/calendar/appointments/{appointment['id']}", person)
        assert read.status_code == 200
        assert read.json() == appointment


def test_auto_confirm_booking_is_confirmed(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor, auto_confirm=True)
    assert (appointment["status"], appointment["pendingExpiresAt"]) == ("Confirmed", None)
    created = outbox(pool, appointment["id"])[0]["payload"]
    assert (created["Status"], created["PendingExpiresAt"]) == ("Confirmed", None)


def test_confirm_then_conflicts(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    path = f"/calendar/appointments/{appointment['id']}"
    confirmed = api.post(f"{path}/confirm", agent)
    assert confirmed.status_code == 200
    assert (confirmed.json()["status"], confirmed.headers["ETag"]) == ("Confirmed", '"2"')
    _problem(api.post(f"{path}/confirm", agent), 409, "appointment-not-pending")
    _problem(api.post(f"{path}/decline", agent, json={"reason": "x"}), 409, "appointment-not-pending")
    payloads = [r["payload"] for r in outbox(pool, appointment["id"])]
    assert [p.get("Status") for p in payloads] == ["Pending", None]  # created, then confirmed: once
    confirmed_payload = payloads[1]
    assert set(confirmed_payload) == {
        "AppointmentId", "TenantId", "AgentUserId", "InvestorUserId", "Kind", "StartAt", "TimeZone",
        "MessageId", "ContractVersion", "OccurredAt",
    }  # fmt: skip


def test_expired_appointment_cannot_be_confirmed(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    from pin.calendar import service
    from pin.outbox.writer import MessageContext
    from pin.unit_of_work import UnitOfWork

    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    with UnitOfWork(pool, MessageContext("run"), outbox=RELAY_POLICY) as uow:
        row = fetch_one(
            pool, "SELECT pending_expires_at + interval '1 second' AS t FROM calendar.appointment WHERE id = %s",
            appointment["id"],
        )  # fmt: skip
        result = service.expire_appointment(uow, uuid.UUID(appointment["id"]), row["t"])
        uow.commit()
    assert result.status is service.ExpiryStatus.EXPIRED
    _problem(api.post(f"/calendar/appointments/{appointment['id']}/confirm", agent), 409, "appointment-not-pending")
    _problem(api.post(f"/calendar/appointments/{appointment['id']}/cancel", agent, json={"reason": "x"}), 409,
             "appointment-not-active")  # fmt: skip


def test_if_match(api: CalendarApi) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    path = f"/calendar/appointments/{appointment['id']}/confirm"
    _problem(api.post(path, agent, **{"If-Match": '"7"'}), 412, "version-mismatch")
    _problem(api.post(path, agent, **{"If-Match": "garbage"}), 400, "bad-if-match")
    assert api.post(path, agent, **{"If-Match": '"1"'}).status_code == 200
    slot = api.create_slot(agent)
    _problem(api.book(investor, slot["id"], **{"If-Match": '"2"'}), 412, "version-mismatch")
    assert api.get(f"/calendar/slots/{slot['id']}", agent).json()["status"] == "Available"


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"timeZone": "Mars/Olympus"}, 422, "invalid-time-zone"),
        ({"timeZone": "../../etc/passwd"}, 422, "invalid-time-zone"),
        ({"timeZone": "localtime"}, 422, "invalid-time-zone"),
        ({"timeZone": ""}, 422, "invalid-time-zone"),
        ({"timeZone": "Europe/\u0000"}, 422, "validation-error"),  # NUL is refused at the edge, in any string
        ({"timeZone": "x" * 65}, 422, "validation-error"),
        ({"endAt": "2030-01-01T09:00:00Z"}, 422, "end-before-start"),
        ({"startAt": "2020-01-01T10:00:00Z", "endAt": "2020-01-01T11:00:00Z"}, 422, "start-in-past"),
        ({"minLeadTimeMinutes": -5}, 422, "invalid-lead-time"),
        ({"minLeadTimeMinutes": 10**12}, 422, "validation-error"),
        ({"kind": "Party"}, 422, "validation-error"),
        ({"startAt": "2030-01-01T10:00:00"}, 422, "validation-error"),  # no offset
        ({"startAt": "0001-01-01T00:00:00Z"}, 422, "validation-error"),
        ({"startAt": "yesterday"}, 422, "validation-error"),
        ({"extra": 1}, 422, "validation-error"),
    ],
)
def test_create_slot_bad_input(api: CalendarApi, change: dict[str, Any], status: int, code: str) -> None:
    body = {
        "startAt": "2030-01-01T10:00:00Z",
        "endAt": "2030-01-01T11:00:00Z",
        "timeZone": "Europe/Moscow",
        "kind": "Showing",
        "minLeadTimeMinutes": 30,
        "autoConfirm": False,
        **change,
    }
    _problem(api.post("/calendar/slots", api.person("agent"), json=body), status, code)


def test_malformed_json_and_ids(api: CalendarApi) -> None:
    agent = api.person("agent")
    response = api.client.post(
        "/calendar/slots", content=b'{"startAt": ', headers={**agent.headers, "Content-Type": "application/json"}
    )
    _problem(response, 400, "malformed-json")
    _problem(api.post("/calendar/slots", agent, json=[1, 2]), 422, "validation-error")
    _problem(api.get("/calendar/slots/not-a-uuid", agent), 422, "validation-error")
    _problem(api.post("/calendar/appointments/123/confirm", agent), 422, "validation-error")
    investor = api.person("investor", tenant_id=agent.tenant_id)
    _problem(api.post(f"/calendar/my/appointments/{agent.user_id}/reschedule", investor, json={"newSlotId": "x"}),
             422, "validation-error")  # fmt: skip
    _problem(api.post(f"/calendar/my/appointments/{agent.user_id}/reschedule", investor, json={}), 422,
             "validation-error")  # fmt: skip
    _problem(api.get(f"/calendar/slots/{agent.user_id}", agent), 404, "slot-not-found")


@pytest.mark.parametrize("body", [None, {}, {"reason": ""}, {"reason": "   "}, {"reason": None}])
def test_decline_without_reason_is_422(api: CalendarApi, pool: ConnectionPool[Conn], body: Any) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    _problem(api.post(f"/calendar/appointments/{appointment['id']}/decline", agent, json=body), 422, "reason-required")
    row = fetch_one(pool, "SELECT status, version FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["version"]) == ("Pending", 1)
    assert len(outbox(pool, appointment["id"])) == 1


def test_booking_refusals(api: CalendarApi) -> None:
    agent, investor = _people(api)
    slot = api.create_slot(agent)
    assert api.book(investor, slot["id"]).status_code == 201
    other = api.person("investor", tenant_id=agent.tenant_id)
    _problem(api.book(other, slot["id"]), 409, "slot-not-available")
    soon = api.create_slot(agent, starts_in=timedelta(minutes=10), lead_minutes=30)
    _problem(api.book(investor, soon["id"]), 409, "lead-time-passed")
    assert api.get(f"/calendar/slots/{soon['id']}", agent).json()["status"] == "Available"


def test_investor_cancel_after_cutoff_is_409(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor, starts_in=timedelta(minutes=45), lead_minutes=0)
    _problem(api.post(f"/calendar/my/appointments/{appointment['id']}/cancel", investor), 409, "cancel-cutoff-passed")
    other_slot = api.create_slot(agent, starts_in=timedelta(days=2))
    _problem(
        api.post(f"/calendar/my/appointments/{appointment['id']}/reschedule", investor,
                 json={"newSlotId": other_slot["id"]}),
        409, "cancel-cutoff-passed",
    )  # fmt: skip
    row = fetch_one(pool, "SELECT status FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert row["status"] == "Pending"
    # the agent is not bound by the investor's cutoff
    cancelled = api.post(f"/calendar/appointments/{appointment['id']}/cancel", agent, json={"reason": "r"})
    assert cancelled.status_code == 200


def test_agent_cancel_after_lead_time_expires_the_slot(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    """INV-SLT-5 through the API: a slot that can no longer be sold becomes Expired, not Available."""
    agent, investor = _people(api)
    appointment = api.booked(agent, investor, starts_in=timedelta(minutes=45), lead_minutes=30)
    with pool.connection() as conn:  # the lead time passes (the slot's StartAt moves 20 minutes closer)
        conn.execute(
            "UPDATE calendar.availability_slot SET min_lead_time_minutes = 50, version = version + 1 WHERE id = %s",
            (appointment["slotId"],),
        )
    response = api.post(f"/calendar/appointments/{appointment['id']}/cancel", agent, json={"reason": "r"})
    assert response.status_code == 200, response.text
    assert api.get(f"/calendar/slots/{appointment['slotId']}", agent).json()["status"] == "Expired"


def test_reschedule_refusals(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    path = f"/calendar/my/appointments/{appointment['id']}/reschedule"
    _problem(api.post(path, investor, json={"newSlotId": appointment["slotId"]}), 422, "same-slot")
    taken = api.booked(agent, api.person("investor", tenant_id=agent.tenant_id))
    _problem(api.post(path, investor, json={"newSlotId": taken["slotId"]}), 409, "slot-not-available")
    foreign = api.create_slot(api.person("agent"))
    _problem(api.post(path, investor, json={"newSlotId": foreign["id"]}), 404, "slot-not-found")
    _problem(api.post(path, investor, json={"newSlotId": str(agent.user_id)}), 404, "slot-not-found")
    row = fetch_one(pool, "SELECT status, version FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["version"]) == ("Pending", 1)
    assert [r["topic"] for r in outbox(pool, appointment["id"])] == ["pin.calendar.appointment-created.v1"]
