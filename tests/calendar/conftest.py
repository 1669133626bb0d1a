"""Fixtures of the calendar tests: the API on a fresh database, people of two tenants, outbox and row readers."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now

# Starlette 1.x warns at import when the test client runs on httpx rather than httpx2 (not installed here);
# the client works the same. Scoped to this import so that every other warning still fails the tests.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


@dataclass(frozen=True)
class Person:
    """A user of a tenant with one role, and their bearer token."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID
    role: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header of this person."""
        return {"Authorization": f"Bearer {self.token}"}


class CalendarApi:
    """Calls of the calendar API with a person's token; returns the httpx response."""

    def __init__(self, client: TestClient, pool: ConnectionPool[Conn], mint: Callable[..., str]) -> None:
        self.client = client
        self.pool = pool
        self._mint = mint

    def person(self, role: str, *, tenant_id: uuid.UUID | None = None, user_id: uuid.UUID | None = None) -> Person:
        """A new (or given) user with ``role`` in a new (or given) tenant."""
        user_id, tenant_id = user_id or uuid.uuid4(), tenant_id or uuid.uuid4()
        return Person(user_id, tenant_id, role, self._mint(user_id, tenant_id, role))

    def now(self) -> datetime:
        """The database clock (the one the use cases use), whole seconds."""
        with self.pool.connection() as conn:
            return database_now(conn).astimezone(UTC).replace(microsecond=0)

    def create_slot(
        self,
        agent: Person,
        *,
        starts_in: timedelta = timedelta(days=3),
        duration: timedelta = timedelta(hours=1),
        lead_minutes: int = 30,
        auto_confirm: bool = False,
        kind: str = "Showing",
        time_zone: str = "Europe/Moscow",
    ) -> dict[str, Any]:
        """A new Available slot of ``agent`` (asserts 201)."""
        start = self.now() + starts_in
        body = {
            "startAt": start.isoformat(),
            "endAt": (start + duration).isoformat(),
            "timeZone": time_zone,
            "kind": kind,
            "minLeadTimeMinutes": lead_minutes,
            "autoConfirm": auto_confirm,
        }
        response = self.client.post("/calendar/slots", json=body, headers=agent.headers)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def book(self, investor: Person, slot_id: str, **headers: str) -> Any:
        """POST /calendar/slots/{id}/book."""
        return self.client.post(f"/calendar/slots/{slot_id}/book", headers={**investor.headers, **headers})

    def booked(self, agent: Person, investor: Person, **slot_options: Any) -> dict[str, Any]:
        """A slot of ``agent`` booked by ``investor``: the appointment (asserts 201)."""
        slot = self.create_slot(agent, **slot_options)
        response = self.book(investor, slot["id"])
        assert response.status_code == 201, response.text
        return dict(response.json())

    def post(self, path: str, person: Person | None, json: Any = None, **headers: str) -> Any:
        """POST with a person's token (None: no token)."""
        auth = person.headers if person else {}
        return self.client.post(path, json=json, headers={**auth, **headers})

    def get(self, path: str, person: Person | None) -> Any:
        """GET with a person's token (None: no token)."""
        return self.client.get(path, headers=person.headers if person else {})


@pytest.fixture
def api(client: TestClient, pool: ConnectionPool[Conn], token: Callable[..., str]) -> CalendarApi:
    """The calendar API helper."""
    return CalendarApi(client, pool, token)


def fetch_one(pool: ConnectionPool[Conn], query: str, *params: object) -> dict[str, Any]:
    """One row (asserts it exists)."""
    with pool.connection() as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    assert row is not None, query
    return dict(row)


def fetch_all(pool: ConnectionPool[Conn], query: str, *params: object) -> list[dict[str, Any]]:
    """All rows."""
    with pool.connection() as conn:
        return [dict(row) for row in conn.execute(query, params).fetchall()]  # type: ignore[arg-type]


def outbox(pool: ConnectionPool[Conn], key: str | None = None) -> list[dict[str, Any]]:
    """Outbox rows in id order (of one key when given)."""
    if key is None:
        return fetch_all(pool, "SELECT * FROM outbox.message ORDER BY id")
    return fetch_all(pool, "SELECT * FROM outbox.message WHERE message_key = %s ORDER BY id", key)


def iso(value: datetime) -> str:
    """How contracts write a time."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
