"""Every state-changing route writes its outbox rows with the caller's correlation id, by one rule for all routers."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn
from pin.settings import Settings
from tests.promotion.support import STANDARD_7D

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration

TENANT = uuid.uuid4()
ROLES = ("agent", "investor", "manager")


class Caller:
    """Requests as one user per role of one tenant; each answers the correlation ids of the rows it wrote."""

    def __init__(self, client: TestClient, pool: ConnectionPool[Conn], token: Callable[..., str]) -> None:
        self.client, self.pool = client, pool
        self.auth = {role: {"Authorization": f"Bearer {token(uuid.uuid4(), TENANT, role)}"} for role in ROLES}

    def send(self, role: str, path: str, body: Any = None, **headers: str) -> tuple[Any, set[str]]:
        """POST ``path``; the answer's JSON and the correlation ids of the outbox rows it wrote."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT coalesce(max(id), 0) AS last FROM outbox.message").fetchone()
        assert row is not None
        response = self.client.post(path, json=body, headers={**self.auth[role], **headers})
        assert response.status_code in {200, 201}, response.text
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT headers->>'correlation-id' AS id FROM outbox.message WHERE id > %s", (row["last"],)
            ).fetchall()
        assert rows, f"{path} wrote no outbox row"
        return response.json(), {str(r["id"]) for r in rows}

    def slot(self, hour: int) -> str:
        """A new slot of the agent (its own rows are not looked at here)."""
        body = {
            "startAt": f"2031-01-01T{hour:02d}:00:00Z",
            "endAt": f"2031-01-01T{hour:02d}:30:00Z",
            "timeZone": "UTC",
            "kind": "Showing",
        }
        response = self.client.post("/calendar/slots", json=body, headers=self.auth["agent"])
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def appointment(self, hour: int) -> str:
        """A new Pending appointment."""
        response = self.client.post(f"/calendar/slots/{self.slot(hour)}/book", headers=self.auth["investor"])
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def purchase(self) -> str:
        """A new Active purchase."""
        body = {"packageId": str(STANDARD_7D), "targets": [{"targetKind": "Project", "targetId": str(uuid.uuid4())}]}
        response = self.client.post("/promotions", json=body, headers=self.auth["manager"])
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


# each state-changing route: (who calls it, the path and body it is called with, given a fresh Caller)
ROUTES: dict[str, Callable[[Caller], tuple[str, str, Any]]] = {
    "book": lambda c: ("investor", f"/calendar/slots/{c.slot(9)}/book", None),
    "confirm": lambda c: ("agent", f"/calendar/appointments/{c.appointment(9)}/confirm", None),
    "decline": lambda c: ("agent", f"/calendar/appointments/{c.appointment(9)}/decline", {"reason": "busy"}),
    "cancel": lambda c: ("agent", f"/calendar/appointments/{c.appointment(9)}/cancel", {"reason": "ill"}),
    "cancel-my": lambda c: ("investor", f"/calendar/my/appointments/{c.appointment(9)}/cancel", None),
    "reschedule": lambda c: (
        "investor",
        f"/calendar/my/appointments/{c.appointment(9)}/reschedule",
        {"newSlotId": c.slot(10)},
    ),
    "activate": lambda c: (
        "manager",
        "/promotions",
        {"packageId": str(STANDARD_7D), "targets": [{"targetKind": "Post", "targetId": str(uuid.uuid4())}]},
    ),
    "cancel-purchase": lambda c: ("manager", f"/promotions/{c.purchase()}/cancel", None),
}


@pytest.fixture
def caller(
    pool: ConnectionPool[Conn], make_settings: Callable[..., Settings], token: Callable[..., str]
) -> Iterator[Caller]:
    with TestClient(build_app(make_settings(), pool), raise_server_exceptions=False) as client:
        yield Caller(client, pool, token)


@pytest.mark.parametrize("header", ["X-Correlation-Id", "X-Request-Id"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_route_writes_the_callers_correlation_id(caller: Caller, route: str, header: str) -> None:
    """Either header is the caller's correlation id, on every router."""
    role, path, body = ROUTES[route](caller)

    _, correlation_ids = caller.send(role, path, body, **{header: f"req-{route}:1.a_b"})

    assert correlation_ids == {f"req-{route}:1.a_b"}


@pytest.mark.parametrize("given", ["", "has space", "x" * 129, "a/b", "<script>"])
@pytest.mark.parametrize("route", ["cancel", "cancel-purchase"])
def test_a_correlation_id_that_is_not_a_short_token_is_replaced(caller: Caller, route: str, given: str) -> None:
    """Free text or an over-long value never reaches a message header: the rows get a new UUID instead."""
    role, path, body = ROUTES[route](caller)

    _, correlation_ids = caller.send(role, path, body, **{"X-Correlation-Id": given})

    (correlation_id,) = correlation_ids
    assert str(uuid.UUID(correlation_id)) == correlation_id
