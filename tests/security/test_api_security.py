"""Security of the HTTP API on a real PostgreSQL: authentication on every route, tenant isolation, ownership
within a tenant, hostile input in every field. "Unchanged data" is checked by a snapshot of every business
table (and the outbox) before and after.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from fastapi import FastAPI
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.conftest import JWT_SECRET

# Starlette warns at import when its test client runs on httpx rather than httpx2 (not installed); scoped here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration]

PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
TOP_1D = "6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004"
TABLES = (
    "calendar.availability_slot",
    "calendar.appointment",
    "calendar.calendar_event",
    "calendar.event_reminder",
    "promotion.purchase",
    "promotion.purchase_target",
    "catalog.card",
    "news.post",
    "outbox.message",
)


def snapshot(pool: ConnectionPool[Conn]) -> dict[str, str]:
    """A fingerprint (row count and md5 of every row in order) of every business table and the outbox."""
    query = " UNION ALL ".join(
        f"SELECT '{table}' AS t, count(*)::text || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '')"
        f" AS f FROM {table} AS x"
        for table in TABLES
    )
    with pool.connection() as conn:
        return {row["t"]: row["f"] for row in conn.execute(query)}


@dataclass
class Users:
    """One tenant's users, each with a token holding one role."""

    tenant: uuid.UUID
    agent: uuid.UUID
    agent2: uuid.UUID
    investor: uuid.UUID
    investor2: uuid.UUID
    manager: uuid.UUID
    admin: uuid.UUID

    @classmethod
    def new(cls) -> Users:
        """Fresh ids."""
        return cls(*(uuid.uuid4() for _ in range(7)))

    def bearer(self, user: uuid.UUID, *roles: str) -> dict[str, str]:
        """An Authorization header for ``user`` of this tenant."""
        claims = {"sub": str(user), "tenant_id": str(self.tenant), "roles": list(roles), "exp": int(time.time()) + 600}
        return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}

    def everyone(self) -> dict[str, str]:
        """A token of this tenant holding every role (reaches every route's handler)."""
        return self.bearer(self.admin, "admin", "agent", "investor", "manager")


@dataclass
class World:
    """Records of tenant A (slots, appointments, a purchase, a card, a post), made through the API."""

    a: Users
    b: Users
    slot: str
    free_slot: str
    appointment: str
    confirmed: str
    event: str
    purchase: str
    card: str
    post: str


def _slot(client: TestClient, users: Users, agent: uuid.UUID, hours: int, *, auto: bool = False) -> str:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=hours)
    body = {"startAt": start.isoformat(), "endAt": (start + timedelta(minutes=30)).isoformat(),
            "timeZone": "Europe/Moscow", "kind": "Showing", "autoConfirm": auto}  # fmt: skip
    response = client.post("/calendar/slots", json=body, headers=users.bearer(agent, "agent"))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def world(client: TestClient) -> World:
    """Tenant A's records, and tenant B (which has none of them)."""
    a, b = Users.new(), Users.new()
    slot = _slot(client, a, a.agent, 5)
    free_slot = _slot(client, a, a.agent, 6)
    booked = client.post(f"/calendar/slots/{slot}/book", headers=a.bearer(a.investor, "investor"))
    assert booked.status_code == 201, booked.text
    auto = _slot(client, a, a.agent, 7, auto=True)
    confirmed = client.post(f"/calendar/slots/{auto}/book", headers=a.bearer(a.investor, "investor"))
    assert confirmed.status_code == 201, confirmed.text
    card = str(uuid.uuid4())
    assert client.put(
        f"/catalog/cards/Project/{card}", json={"published": True}, headers=a.bearer(a.admin, "admin")
    ).is_success
    post = str(uuid.uuid4())
    assert client.put(f"/news/posts/{post}", json={"published": True}, headers=a.bearer(a.admin, "admin")).is_success
    purchase = client.post(
        "/promotions",
        json={"packageId": TOP_1D, "targets": [{"targetKind": "Project", "targetId": card}]},
        headers=a.bearer(a.manager, "manager"),
    )
    assert purchase.status_code == 201, purchase.text
    return World(a, b, slot, free_slot, booked.json()["id"], confirmed.json()["id"],
                 booked.json()["calendarEventId"], purchase.json()["id"], card, post)  # fmt: skip


def api_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path template) of the API's OpenAPI document except the public probes."""
    routes = [
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if path not in PUBLIC
        for method in operations
    ]
    assert len(routes) >= 17, routes
    return routes


def fill(path: str, world: World | None, *, foreign: bool = True) -> str:
    """A path template with tenant A's ids (``foreign``) or fresh random ids."""
    ids: dict[str, str] = {"kind": "Project"}
    if world is not None and foreign:
        ids |= {"slot_id": world.slot, "appointment_id": world.appointment, "event_id": world.event,
                "purchase_id": world.purchase, "card_id": world.card, "post_id": world.post,
                "investorUserId": str(world.a.investor)}  # fmt: skip
    out = path
    for name in (
        "slot_id",
        "appointment_id",
        "event_id",
        "purchase_id",
        "card_id",
        "post_id",
        "investorUserId",
        "kind",
    ):
        out = out.replace("{" + name + "}", ids.get(name, str(uuid.uuid4())))
    assert "{" not in out, out
    return out


def body_for(method: str, path: str, world: World | None) -> dict[str, Any] | None:
    """A valid body for the routes that take one."""
    if path.endswith("/slots") and method == "POST":
        start = datetime.now(UTC) + timedelta(hours=9)
        return {"startAt": start.isoformat(), "endAt": (start + timedelta(minutes=30)).isoformat(),
                "timeZone": "Europe/Moscow", "kind": "Showing"}  # fmt: skip
    if path.endswith("/reschedule"):
        return {"newSlotId": world.free_slot if world else str(uuid.uuid4())}
    if path.endswith(("/decline", "/cancel")) and path.startswith("/calendar"):
        return {"reason": "no"}
    if path == "/promotions" and method == "POST":
        target = world.card if world else str(uuid.uuid4())
        return {"packageId": TOP_1D, "targets": [{"targetKind": "Project", "targetId": target}]}
    if method == "PUT":
        return {"published": False}
    return None


# ------------------------------------------------------------------------------------------- authentication


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def bad_tokens() -> dict[str, dict[str, str]]:
    """Authorization headers that must all be refused with 401."""
    now = int(time.time())
    claims = {"sub": str(uuid.uuid4()), "tenant_id": str(uuid.uuid4()),
              "roles": ["admin", "agent", "investor", "manager"], "exp": now + 600}  # fmt: skip

    def signed(payload: dict[str, Any], key: str = JWT_SECRET) -> dict[str, str]:
        return {"Authorization": f"Bearer {jwt.encode(payload, key, algorithm='HS256')}"}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns that the key is short for SHA-512: the point is the alg
        hs512 = jwt.encode(claims, JWT_SECRET, algorithm="HS512")
    unsigned = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64(claims)}."
    headers = {
        "no token": {},
        "empty bearer": {"Authorization": "Bearer "},
        "basic scheme": {"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode()},
        "garbage": {"Authorization": "Bearer not.a.token"},
        "expired": signed({**claims, "exp": now - 10}),
        "wrong signature": signed(claims, "another-secret-of-16-chars-or-more"),
        "alg none": {"Authorization": f"Bearer {unsigned}"},
        "alg none no dot": {"Authorization": f"Bearer {unsigned[:-1]}"},
        "hs512": {"Authorization": f"Bearer {hs512}"},
        "tenant not a uuid": signed({**claims, "tenant_id": "' OR 1=1 --"}),
        "sub not a uuid": signed({**claims, "sub": "admin"}),
        "roles not a list": signed({**claims, "roles": "admin"}),
    }
    for claim in ("sub", "tenant_id", "roles", "exp"):
        headers[f"missing {claim}"] = signed({k: v for k, v in claims.items() if k != claim})
    return headers


def test_every_route_refuses_every_bad_token_with_401(app: FastAPI, client: TestClient, pool: ConnectionPool[Conn],
                                                       world: World) -> None:  # fmt: skip
    """No token, expired, wrong signature, alg none, missing claims, ...: 401 problem on every route, no change."""
    before = snapshot(pool)
    failures = []
    for method, path in api_routes(app):
        url = fill(path, world)
        for name, headers in bad_tokens().items():
            response = client.request(method, url, headers=headers, json=body_for(method, path, world))
            if response.status_code != 401 or response.headers["content-type"] != "application/problem+json":
                failures.append(f"{method} {path} [{name}] -> {response.status_code}")
    assert not failures, failures
    assert snapshot(pool) == before


# ----------------------------------------------------------------------------------------------- tenancy


def test_another_tenants_ids_answer_404_on_every_route_and_change_nothing(
    app: FastAPI, client: TestClient, pool: ConnectionPool[Conn], world: World
) -> None:
    """Tenant B, holding every role, uses tenant A's ids on every route: 404 (never A's data), nothing changes;
    a PUT (ids are scoped by tenant) creates B's own card or post, as on an id nobody holds, and leaves A's."""
    before = snapshot(pool)
    failures = []
    checked = 0
    # the PUTs last: after B's PUT, B's GET of that id is B's own record
    for method, path in sorted(api_routes(app), key=lambda route: route[0] == "PUT"):
        if "{" not in path:
            continue  # routes without ids are scoped to the caller's tenant by construction (checked below)
        checked += 1
        url = fill(path, world)
        response = client.request(method, url, headers=world.b.everyone(), json=body_for(method, path, world))
        if path.startswith("/crm/leads/"):
            # the feed of an investor id in B's tenant: empty, never A's entries
            ok = response.status_code == 200 and response.json()["entries"] == []
        elif method == "PUT":
            # ids are scoped by tenant: B's PUT creates B's own record, exactly as on an id nobody holds
            ok = response.status_code == 201 and response.json()["version"] == 1
            before = snapshot(pool) if ok else before  # B's new row is the one intended change; A's are checked below
        else:
            ok = response.status_code == 404
        if not ok:
            failures.append(f"{method} {url} -> {response.status_code} {response.text[:200]}")
    assert checked >= 12
    assert not failures, failures
    assert snapshot(pool) == before
    # B's own lists show nothing of A
    assert client.get("/notifications", headers=world.b.everyone()).json()["items"] == []
    # A's card and post are as A left them
    for url in (f"/catalog/cards/Project/{world.card}", f"/news/posts/{world.post}"):
        mine = client.get(url, headers=world.a.everyone()).json()
        assert (mine["published"], mine["version"]) == (True, 1), mine


def test_reschedule_to_another_tenants_slot_is_404(
    client: TestClient, pool: ConnectionPool[Conn], world: World
) -> None:
    """An investor of B moving B's appointment onto A's slot: 404, nothing changes."""
    b = world.b
    own = _slot(client, b, b.agent, 8)
    booked = client.post(f"/calendar/slots/{own}/book", headers=b.bearer(b.investor, "investor"))
    assert booked.status_code == 201
    before = snapshot(pool)
    response = client.post(
        f"/calendar/my/appointments/{booked.json()['id']}/reschedule",
        json={"newSlotId": world.free_slot},
        headers=b.bearer(b.investor, "investor"),
    )
    assert response.status_code == 404, response.text
    assert snapshot(pool) == before


def test_an_agent_cannot_act_on_another_agents_appointment(client: TestClient, pool: ConnectionPool[Conn],
                                                           world: World) -> None:  # fmt: skip
    """Same tenant, another agent: confirm, decline, cancel, read -> 404 or 403; an investor likewise."""
    a = world.a
    before = snapshot(pool)
    other_agent = a.bearer(a.agent2, "agent")
    other_investor = a.bearer(a.investor2, "investor")
    attempts = [
        ("POST", f"/calendar/appointments/{world.appointment}/confirm", other_agent, None),
        ("POST", f"/calendar/appointments/{world.appointment}/decline", other_agent, {"reason": "x"}),
        ("POST", f"/calendar/appointments/{world.confirmed}/cancel", other_agent, {"reason": "x"}),
        ("GET", f"/calendar/appointments/{world.appointment}", other_agent, None),
        ("GET", f"/calendar/events/{world.event}", other_agent, None),
        ("GET", f"/calendar/slots/{world.slot}", other_agent, None),
        ("POST", f"/calendar/my/appointments/{world.appointment}/cancel", other_investor, None),
        ("POST", f"/calendar/my/appointments/{world.appointment}/reschedule", other_investor,
         {"newSlotId": world.free_slot}),
        ("GET", f"/calendar/appointments/{world.appointment}", other_investor, None),
    ]  # fmt: skip
    failures = []
    for method, url, headers, body in attempts:
        response = client.request(method, url, headers=headers, json=body)
        if response.status_code not in (403, 404):
            failures.append(f"{method} {url} -> {response.status_code}")
    assert not failures, failures
    assert snapshot(pool) == before


# ------------------------------------------------------------------------------------------- hostile input

HOSTILE_STRINGS = [
    "' OR '1'='1",
    "'; DROP TABLE calendar.appointment; --",
    "\x00",
    "a\x00b",
    "\x1b[31m\r\n\t\x07",
    "\u202e\ufeff\ud7ff",
    "😀" * 10,
    "A" * 100_000,
    "../../etc/passwd",
    "${jndi:ldap://x}",
    "{{7*7}}",
    "NaN",
    "-1",
    "99999999999999999999999",
]
WRONG_TYPES: list[Any] = [None, True, 0, -1, 2**63, 1.5, [], {}, ["x"], {"$gt": ""}]


def _body_fields(method: str, path: str, world: World) -> list[tuple[str, dict[str, Any]]]:
    body = body_for(method, path, world)
    return [(field, body) for field in body] if body else []


def test_hostile_values_in_every_field_are_refused_and_change_nothing(  # noqa: PLR0912 - one loop per kind of input
    app: FastAPI, client: TestClient, pool: ConnectionPool[Conn], world: World
) -> None:
    """SQL, NUL and control characters, very long strings, wrong types in every body field, path id and query
    parameter: never a 5xx; a 4xx changes nothing. Free-text fields (reason) may accept a string: then it is
    stored verbatim and only the one intended change happens."""
    failures: list[str] = []
    a = world.a
    headers = a.everyone()
    for method, path in api_routes(app):
        # path ids
        before = snapshot(pool)
        for value in ["' OR 1=1 --", "1 UNION SELECT 1", "%00", "A" * 5000, "-1"]:
            if "{" not in path:
                continue
            url = fill(path, world).replace(world.slot, value).replace(world.appointment, value)
            url = url.replace(world.purchase, value).replace(world.card, value).replace(world.post, value)
            url = url.replace(world.event, value).replace(str(a.investor), value).replace("Project", value)
            response = client.request(method, url, headers=headers, json=body_for(method, path, world))
            if not 400 <= response.status_code < 500 or snapshot(pool) != before:
                failures.append(f"{method} {url[:80]} -> {response.status_code}")
        # body fields
        for field, body in _body_fields(method, path, world):
            before = snapshot(pool)
            for value in [*HOSTILE_STRINGS, *WRONG_TYPES]:
                if type(value) is type(body[field]) and not isinstance(value, str):
                    continue  # a value of the field's own type (published=True) is not hostile
                response = client.request(method, fill(path, world), headers=headers, json={**body, field: value})
                after = snapshot(pool)
                if response.status_code >= 500:
                    failures.append(f"{method} {path} {field}={str(value)[:30]!r} -> {response.status_code}")
                elif response.status_code < 400 and not (field == "reason" and isinstance(value, str)):
                    failures.append(f"{method} {path} {field}={str(value)[:30]!r} accepted -> {response.status_code}")
                elif response.status_code >= 400 and after != before:
                    failures.append(f"{method} {path} {field}={str(value)[:30]!r} refused but changed data")
                before = after  # an accepted free-text reason changed one appointment on purpose
        # query parameters
        if path in ("/notifications", "/crm/leads/{investorUserId}/feed"):
            for value in ["0", "-1", "501", "1e9", "' OR 1=1", "A" * 1000]:
                response = client.request(method, fill(path, world) + f"?limit={value}", headers=headers)
                if response.status_code != 422:
                    failures.append(f"{method} {path}?limit={value[:20]} -> {response.status_code}")
    # a reason that reached the database is the exact string sent (bound, never interpolated)
    with pool.connection() as conn:
        reasons = {r["cancel_reason"] for r in conn.execute("SELECT cancel_reason FROM calendar.appointment")}
        tables = {r["n"] for r in conn.execute("SELECT count(*) AS n FROM calendar.appointment")}
    assert reasons <= {None, *[s for s in HOSTILE_STRINGS if len(s) <= 2000], "no"}, reasons
    assert min(tables) >= 2
    assert not failures, failures


def test_a_malformed_json_body_is_a_400_problem(client: TestClient, world: World) -> None:
    """Not JSON at all, or JSON of the wrong shape: a problem document, not a stack trace."""
    headers = {**world.a.bearer(world.a.agent, "agent"), "Content-Type": "application/json"}
    for raw in [b"{", b"\xff\xfe", b'{"startAt": ', b"[]", b"null", b'"x"', b"{}" * 1000]:
        response = client.post("/calendar/slots", content=raw, headers=headers)
        assert 400 <= response.status_code < 500, (raw, response.status_code)
        assert response.headers["content-type"] == "application/problem+json"
        assert "Traceback" not in response.text
