"""Seed 003, «Когда публикуется»: one test per row, checking the appointment, the slot, the event, the reminders
and the exact outbox rows (payload fields, no free text, envelope, headers)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.calendar import service
from pin.db import Conn
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.unit_of_work import UnitOfWork
from tests.calendar.conftest import CalendarApi, Person, fetch_all, fetch_one, iso, outbox

pytestmark = pytest.mark.integration

CANCELLED_FIELDS = {
    "AppointmentId",
    "TenantId",
    "AgentUserId",
    "InvestorUserId",
    "Kind",
    "StartAt",
    "TimeZone",
    "Reason",
    "CancelledBy",
    "RescheduledToAppointmentId",
    "MessageId",
    "ContractVersion",
    "OccurredAt",
}
FREE_TEXT = "у агента заболел ребёнок"  # a reason text that must never leave calendar


def _people(api: CalendarApi) -> tuple[Person, Person]:
    agent = api.person("agent")
    return agent, api.person("investor", tenant_id=agent.tenant_id)


def _confirm(api: CalendarApi, agent: Person, appointment: dict[str, Any]) -> None:
    response = api.post(f"/calendar/appointments/{appointment['id']}/confirm", agent)
    assert response.status_code == 200, response.text


def _assert_cancelled_message(
    pool: ConnectionPool[Conn],
    appointment: dict[str, Any],
    *,
    reason: str,
    cancelled_by: str | None,
    rescheduled_to: str | None = None,
    correlation_id: str | None = None,
) -> None:
    rows = [r for r in outbox(pool, appointment["id"]) if r["topic"] == "pin.calendar.appointment-cancelled.v1"]
    assert len(rows) == 1, "exactly one appointment-cancelled per appointment"
    row = rows[0]
    payload = row["payload"]
    assert set(payload) == CANCELLED_FIELDS
    assert payload == {
        "AppointmentId": appointment["id"],
        "TenantId": appointment["tenantId"],
        "AgentUserId": appointment["agentUserId"],
        "InvestorUserId": appointment["investorUserId"],
        "Kind": appointment["kind"],
        "StartAt": appointment["startAt"],
        "TimeZone": appointment["timeZone"],
        "Reason": reason,
        "CancelledBy": cancelled_by,
        "RescheduledToAppointmentId": rescheduled_to,
        "MessageId": str(row["message_id"]),
        "ContractVersion": 1,
        "OccurredAt": iso(row["occurred_at"]),
    }
    uuid.UUID(payload["MessageId"])
    assert row["message_key"] == appointment["id"]
    assert row["event_type"] == "pin.calendar.appointment-cancelled"
    assert row["contract_version"] == 1
    if correlation_id is not None:
        assert row["headers"]["correlation-id"] == correlation_id
    assert "CancelReason" not in payload
    assert FREE_TEXT not in json.dumps(payload, ensure_ascii=False)
    assert FREE_TEXT not in json.dumps(row["headers"], ensure_ascii=False)


def _assert_event_cancelled(pool: ConnectionPool[Conn], appointment: dict[str, Any], text: str) -> None:
    event = fetch_one(pool, "SELECT * FROM calendar.calendar_event WHERE id = %s", appointment["calendarEventId"])
    assert event["status"] == "Cancelled"
    assert event["cancel_reason"] == text
    assert event["version"] == 2
    reminders = fetch_all(pool, "SELECT status FROM calendar.event_reminder WHERE calendar_event_id = %s", event["id"])
    assert len(reminders) == 2
    assert {r["status"] for r in reminders} == {"Skipped"}
    rows = outbox(pool, appointment["calendarEventId"])
    assert [r["payload"]["Status"] for r in rows] == ["Scheduled", "Cancelled"]
    cancelled = rows[1]
    assert cancelled["topic"] == "pin.calendar.event-status-changed.v1"
    assert cancelled["event_type"] == "pin.calendar.event-status-changed"
    assert set(cancelled["payload"]) == {
        "CalendarEventId",
        "TenantId",
        "OwnerUserId",
        "Origin",
        "AppointmentId",
        "Status",
        "StartAt",
        "EndAt",
        "TimeZone",
        "Version",
        "MessageId",
        "ContractVersion",
        "OccurredAt",
    }
    assert cancelled["payload"]["Version"] == 2
    assert cancelled["payload"]["Origin"] == "Appointment"
    assert cancelled["payload"]["AppointmentId"] == appointment["id"]
    assert text not in json.dumps(cancelled["payload"], ensure_ascii=False)


def _slot(pool: ConnectionPool[Conn], slot_id: str) -> dict[str, Any]:
    return fetch_one(pool, "SELECT * FROM calendar.availability_slot WHERE id = %s", slot_id)


def test_agent_declines_pending(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    response = api.post(
        f"/calendar/appointments/{appointment['id']}/decline",
        agent,
        json={"reason": FREE_TEXT},
        **{"X-Correlation-ID": "req-decline-1"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["cancelledBy"], body["version"]) == ("Declined", None, 2)
    assert response.headers["ETag"] == '"2"'
    row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["cancelled_by"], row["cancel_reason"]) == ("Declined", None, FREE_TEXT)
    slot = _slot(pool, appointment["slotId"])
    assert (slot["status"], slot["version"]) == ("Available", 3)  # Available -> Booked -> Available
    _assert_event_cancelled(pool, appointment, "Запись отклонена агентом")
    _assert_cancelled_message(
        pool, appointment, reason="DeclinedByAgent", cancelled_by=None, correlation_id="req-decline-1"
    )


@pytest.mark.parametrize("confirmed", [False, True], ids=["pending", "confirmed"])
def test_investor_cancels_before_cutoff(api: CalendarApi, pool: ConnectionPool[Conn], confirmed: bool) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    if confirmed:
        _confirm(api, agent, appointment)
    response = api.post(f"/calendar/my/appointments/{appointment['id']}/cancel", investor, json={"reason": FREE_TEXT})
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["cancelledBy"]) == ("Cancelled", "Investor")
    row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["cancelled_by"], row["rescheduled_to_appointment_id"]) == (
        "Cancelled",
        "Investor",
        None,
    )
    assert row["version"] == (3 if confirmed else 2)
    assert _slot(pool, appointment["slotId"])["status"] == "Available"
    _assert_event_cancelled(pool, appointment, "Запись отменена инвестором")
    _assert_cancelled_message(pool, appointment, reason="CancelledByInvestor", cancelled_by="Investor")
    topics = [r["topic"] for r in outbox(pool, appointment["id"])]
    expected = ["pin.calendar.appointment-created.v1"]
    expected += ["pin.calendar.appointment-confirmed.v1"] if confirmed else []
    assert topics == [*expected, "pin.calendar.appointment-cancelled.v1"]


def test_investor_reschedules(api: CalendarApi, pool: ConnectionPool[Conn]) -> None:
    agent, investor = _people(api)
    old = api.booked(agent, investor)
    _confirm(api, agent, old)
    new_slot = api.create_slot(agent, starts_in=timedelta(days=4), auto_confirm=True)
    response = api.post(
        f"/calendar/my/appointments/{old['id']}/reschedule", investor, json={"newSlotId": new_slot["id"]}
    )
    assert response.status_code == 201, response.text
    new = response.json()
    assert (new["status"], new["slotId"], new["rescheduledFromAppointmentId"]) == (
        "Confirmed",
        new_slot["id"],
        old["id"],
    )
    assert new["pendingExpiresAt"] is None
    old_row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", old["id"])
    assert (old_row["status"], old_row["cancelled_by"], str(old_row["rescheduled_to_appointment_id"])) == (
        "Cancelled",
        "Investor",
        new["id"],
    )
    assert _slot(pool, old["slotId"])["status"] == "Available"
    assert _slot(pool, new_slot["id"])["status"] == "Booked"
    _assert_event_cancelled(pool, old, "Запись перенесена инвестором")
    _assert_cancelled_message(
        pool, old, reason="CancelledByInvestor", cancelled_by="Investor", rescheduled_to=new["id"]
    )
    created = outbox(pool, new["id"])
    assert [r["topic"] for r in created] == ["pin.calendar.appointment-created.v1"]
    assert created[0]["payload"]["RescheduledFromAppointmentId"] == old["id"]
    assert created[0]["payload"]["Status"] == "Confirmed"
    assert created[0]["payload"]["PendingExpiresAt"] is None
    new_event = outbox(pool, new["calendarEventId"])
    assert [r["payload"]["Status"] for r in new_event] == ["Scheduled"]


@pytest.mark.parametrize("confirmed", [False, True], ids=["pending", "confirmed"])
def test_agent_cancels(api: CalendarApi, pool: ConnectionPool[Conn], confirmed: bool) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    if confirmed:
        _confirm(api, agent, appointment)
    response = api.post(f"/calendar/appointments/{appointment['id']}/cancel", agent, json={"reason": FREE_TEXT})
    assert response.status_code == 200, response.text
    row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["cancelled_by"], row["cancel_reason"]) == ("Cancelled", "Agent", FREE_TEXT)
    assert _slot(pool, appointment["slotId"])["status"] == "Available"
    _assert_event_cancelled(pool, appointment, "Запись отменена агентом")
    _assert_cancelled_message(pool, appointment, reason="CancelledByAgent", cancelled_by="Agent")


def _expire(pool: ConnectionPool[Conn], appointment_id: str, as_of: datetime) -> service.ExpiryResult:
    with UnitOfWork(pool, MessageContext("run-1"), outbox=RELAY_POLICY) as uow:
        result = service.expire_appointment(uow, uuid.UUID(appointment_id), as_of)
        uow.commit()
    return result


@pytest.mark.parametrize(
    ("after_expiry", "slot_status"),
    [(timedelta(seconds=1), "Available"), (timedelta(days=3), "Expired")],
    ids=["slot-released", "lead-time-passed"],
)
def test_worker_expires_pending(
    api: CalendarApi, pool: ConnectionPool[Conn], after_expiry: timedelta, slot_status: str
) -> None:
    agent, investor = _people(api)
    appointment = api.booked(agent, investor)
    expires_at = datetime.fromisoformat(appointment["pendingExpiresAt"])
    as_of = expires_at + after_expiry

    assert _expire(pool, appointment["id"], expires_at).status is service.ExpiryStatus.NOT_DUE  # never early
    result = _expire(pool, appointment["id"], as_of)
    assert result.status is service.ExpiryStatus.EXPIRED
    assert result.slot_outcome == ("released" if slot_status == "Available" else "expired")
    row = fetch_one(pool, "SELECT * FROM calendar.appointment WHERE id = %s", appointment["id"])
    assert (row["status"], row["cancelled_by"], row["updated_at"]) == ("Expired", None, as_of)
    slot = _slot(pool, appointment["slotId"])
    assert (slot["status"], slot["updated_at"]) == (slot_status, as_of)
    _assert_event_cancelled(pool, appointment, "Запись не подтверждена агентом в срок")
    _assert_cancelled_message(pool, appointment, reason="Expired", cancelled_by=None, correlation_id="run-1")

    # a second pass over an appointment that is no longer Pending publishes nothing
    before = len(outbox(pool))
    assert _expire(pool, appointment["id"], as_of).status is service.ExpiryStatus.NOT_DUE
    assert len(outbox(pool)) == before
