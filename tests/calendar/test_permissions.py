"""The permission matrix of every calendar route: role x own/other user x own/other tenant.

Wrong role -> 403; a record of another user or another tenant -> 404 (its existence is not revealed);
no or a bad token -> 401. A refused state-changing call changes nothing and writes no outbox row.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.calendar.conftest import CalendarApi, Person, fetch_one, outbox

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Scenario:
    """Agent A and investor I of tenant T: an Available slot, a Pending appointment, a spare slot."""

    agent: Person
    investor: Person
    slot: dict[str, Any]
    appointment: dict[str, Any]
    spare_slot: dict[str, Any]


def _scenario(api: CalendarApi) -> Scenario:
    agent = api.person("agent")
    investor = api.person("investor", tenant_id=agent.tenant_id)
    return Scenario(
        agent, investor, api.create_slot(agent), api.booked(agent, investor), api.create_slot(agent, lead_minutes=0)
    )


# caller name -> how to make that caller from a scenario (None: no token)
CALLERS: dict[str, Callable[[CalendarApi, Scenario], Person | None]] = {
    "agent-owner": lambda api, s: api.person("agent", tenant_id=s.agent.tenant_id, user_id=s.agent.user_id),
    "agent-other-user": lambda api, s: api.person("agent", tenant_id=s.agent.tenant_id),
    "agent-own-user-other-tenant": lambda api, s: api.person("agent", user_id=s.agent.user_id),
    "agent-other-user-other-tenant": lambda api, s: api.person("agent"),
    "investor-owner": lambda api, s: api.person("investor", tenant_id=s.agent.tenant_id, user_id=s.investor.user_id),
    "investor-other-user": lambda api, s: api.person("investor", tenant_id=s.agent.tenant_id),
    "investor-own-user-other-tenant": lambda api, s: api.person("investor", user_id=s.investor.user_id),
    "investor-other-user-other-tenant": lambda api, s: api.person("investor"),
    "manager-owner-user": lambda api, s: api.person("manager", tenant_id=s.agent.tenant_id, user_id=s.agent.user_id),
    "admin-owner-user": lambda api, s: api.person("admin", tenant_id=s.agent.tenant_id, user_id=s.agent.user_id),
    "anonymous": lambda api, s: None,
}

AGENTS = [c for c in CALLERS if c.startswith("agent-")]
INVESTORS = [c for c in CALLERS if c.startswith("investor-")]


def _expect(*layers: dict[str, int]) -> dict[str, int]:
    """Expected status per caller: 403 (wrong role) unless a later layer says otherwise; 401 anonymous."""
    table = dict.fromkeys(CALLERS, 403)
    table["anonymous"] = 401
    for layer in layers:
        table.update(layer)
    return table


def _all(callers: list[str], status: int) -> dict[str, int]:
    return dict.fromkeys(callers, status)


def _agent_route(owner_status: int) -> dict[str, int]:
    return _expect(_all(AGENTS, 404), {"agent-owner": owner_status})


def _investor_route(owner_status: int) -> dict[str, int]:
    return _expect(_all(INVESTORS, 404), {"investor-owner": owner_status})


def _appointment(s: Scenario) -> str:
    return str(s.appointment["id"])


ROUTES: dict[str, tuple[Callable[[CalendarApi, Scenario, Person | None], Any], dict[str, int]]] = {
    "POST /calendar/slots": (
        lambda api, s, p: api.post(
            "/calendar/slots",
            p,
            json={
                "startAt": "2030-01-01T10:00:00Z",
                "endAt": "2030-01-01T11:00:00Z",
                "timeZone": "UTC",
                "kind": "Showing",
                "minLeadTimeMinutes": 0,
                "autoConfirm": False,
            },
        ),
        _expect(_all(AGENTS, 201)),
    ),
    "GET /calendar/slots/{id}": (
        lambda api, s, p: api.get(f"/calendar/slots/{s.slot['id']}", p),
        _expect(
            _all(AGENTS + INVESTORS, 404),
            # an investor browses the tenant's slots
            {"agent-owner": 200, "investor-owner": 200, "investor-other-user": 200},
        ),
    ),
    "POST /calendar/slots/{id}/book": (
        lambda api, s, p: api.post(f"/calendar/slots/{s.slot['id']}/book", p),
        _expect(_all(INVESTORS, 404), {"investor-owner": 201, "investor-other-user": 201}),
    ),
    "GET /calendar/appointments/{id}": (
        lambda api, s, p: api.get(f"/calendar/appointments/{_appointment(s)}", p),
        _expect(_all(AGENTS + INVESTORS, 404), {"agent-owner": 200, "investor-owner": 200}),
    ),
    "POST /calendar/appointments/{id}/confirm": (
        lambda api, s, p: api.post(f"/calendar/appointments/{_appointment(s)}/confirm", p),
        _agent_route(200),
    ),
    "POST /calendar/appointments/{id}/decline": (
        lambda api, s, p: api.post(f"/calendar/appointments/{_appointment(s)}/decline", p, json={"reason": "r"}),
        _agent_route(200),
    ),
    "POST /calendar/appointments/{id}/cancel": (
        lambda api, s, p: api.post(f"/calendar/appointments/{_appointment(s)}/cancel", p, json={"reason": "r"}),
        _agent_route(200),
    ),
    "POST /calendar/my/appointments/{id}/cancel": (
        lambda api, s, p: api.post(f"/calendar/my/appointments/{_appointment(s)}/cancel", p, json={}),
        _investor_route(200),
    ),
    "POST /calendar/my/appointments/{id}/reschedule": (
        lambda api, s, p: api.post(
            f"/calendar/my/appointments/{_appointment(s)}/reschedule", p, json={"newSlotId": s.spare_slot["id"]}
        ),
        _investor_route(201),
    ),
    "GET /calendar/events/{id}": (
        lambda api, s, p: api.get(f"/calendar/events/{s.appointment['calendarEventId']}", p),
        _agent_route(200),
    ),
}


def _state(pool: ConnectionPool[Conn], s: Scenario) -> tuple[Any, ...]:
    appointment = fetch_one(pool, "SELECT status, version FROM calendar.appointment WHERE id = %s", _appointment(s))
    slots = fetch_one(
        pool,
        "SELECT array_agg(status || version ORDER BY id) AS s FROM calendar.availability_slot WHERE id = ANY(%s)",
        [uuid.UUID(s.slot["id"]), uuid.UUID(s.spare_slot["id"])],
    )
    return appointment["status"], appointment["version"], tuple(slots["s"]), len(outbox(pool))


@pytest.mark.parametrize("route", list(ROUTES))
def test_permission_matrix(api: CalendarApi, pool: ConnectionPool[Conn], route: str) -> None:
    call, expected = ROUTES[route]
    seen: dict[str, int] = {}
    scenario = _scenario(api)
    for caller, make in CALLERS.items():
        person = make(api, scenario)
        before = _state(pool, scenario)
        response = call(api, scenario, person)
        seen[caller] = response.status_code
        if response.status_code >= 400:
            assert response.headers["content-type"].startswith("application/problem+json"), response.text
            assert _state(pool, scenario) == before, f"{caller} was refused but changed something"
        elif _state(pool, scenario) != before:
            scenario = _scenario(api)  # the next caller meets the records untouched
    assert seen == expected


def test_a_bad_or_expired_token_is_401(api: CalendarApi, token: Callable[..., str]) -> None:
    agent = api.person("agent")
    for header in (
        "Bearer garbage",
        "Basic abc",
        f"Bearer {token(agent.user_id, agent.tenant_id, 'agent', ttl_seconds=-60)}",
    ):
        response = api.client.get(f"/calendar/slots/{uuid.uuid4()}", headers={"Authorization": header})
        assert response.status_code == 401
        assert response.json()["code"] == "invalid-token"
