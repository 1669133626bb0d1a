"""Hostile input against the real API on a real PostgreSQL: no input reaches a 500, every refusal is a 4xx
problem document.

Body validation runs in process (the FastAPI test client); what belongs to the server layer (keep-alive after
an error, header limits) runs against a real `pin api` over a real socket, spoken with h11 so that nothing
reconnects behind the test's back. Sections follow the cases of the hostile-input issue: NUL in text (4), the
connection after a 500 (5), tokens and header limits (7), loose types and tenant-scoped ids (8).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn
from pin.local.tcp_ports import free_port
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.support.api import ApiServer, RawConnection, Tenant, bearer, header, slot_body, start_api, wait_ready
from tests.support.infra import TestDatabases
from tests.support.processes import RoleProcess

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration]

PROBLEM_JSON = "application/problem+json"
TOP_1D = "6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004"  # a package on offer (promotion seed data)


def assert_problem(response: httpx.Response, status: int, code: str | None = None) -> None:
    """``response`` is a problem document with ``status`` (and ``code``)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON, response.headers
    if code is not None:
        assert response.json()["code"] == code, response.json()


def pending_appointment(client: TestClient, tenant: Tenant, hours: int = 5) -> str:
    """A Pending appointment of ``tenant``'s agent and investor."""
    slot = client.post("/calendar/slots", json=slot_body(hours), headers=tenant.agent)
    assert slot.status_code == 201, slot.text
    booked = client.post(f"/calendar/slots/{slot.json()['id']}/book", headers=tenant.investor)
    assert booked.status_code == 201, booked.text
    assert booked.json()["status"] == "Pending"
    return str(booked.json()["id"])


# ------------------------------------------------------------------------------ 4: NUL in free text


@pytest.mark.parametrize(
    ("route", "side"),
    [
        ("/calendar/appointments/{id}/decline", "agent"),
        ("/calendar/appointments/{id}/cancel", "agent"),
        ("/calendar/my/appointments/{id}/cancel", "investor"),
    ],
)
@pytest.mark.parametrize("reason", ["a\x00b", "\x00", "a\ud800b"])
def test_a_reason_postgresql_cannot_store_is_a_422_and_changes_nothing(
    client: TestClient, route: str, side: str, reason: str
) -> None:
    """NUL (or an unpaired surrogate) in a reason: 422 problem at the edge, never the database's 500."""
    tenant = Tenant.new()
    appointment = pending_appointment(client, tenant)
    # json.dumps escapes the text as JSON allows ("\u0000", "\ud800"): what a hostile client sends on the wire
    headers = {**getattr(tenant, side), "Content-Type": "application/json"}
    response = client.post(route.format(id=appointment), content=json.dumps({"reason": reason}), headers=headers)
    assert_problem(response, 422, "validation-error")
    after = client.get(f"/calendar/appointments/{appointment}", headers=tenant.agent)
    assert (after.json()["status"], after.json()["version"]) == ("Pending", 1)


def test_nul_in_any_string_of_any_body_is_a_422(client: TestClient) -> None:
    """Every string field, nested ones and unknown keys included, refuses NUL the same way."""
    tenant = Tenant.new()
    card = uuid.uuid4()
    cases = [
        ("POST", "/calendar/slots", slot_body(timeZone="Europe/Mos\x00cow"), tenant.agent),
        ("POST", "/calendar/slots", slot_body(kind="Show\x00ing"), tenant.agent),
        ("POST", "/calendar/slots", {**slot_body(), "x\x00": 1}, tenant.agent),
        ("POST", "/calendar/slots", {**slot_body(), "x\ud800": 1}, tenant.agent),
        ("POST", "/promotions", {"packageId": TOP_1D, "targets": [{"targetKind": "Pro\x00ject",
                                                                    "targetId": str(card)}]}, tenant.manager),
        ("PUT", f"/catalog/cards/Project/{card}", {"published": True, "projectId": "\x00"}, tenant.admin),
    ]  # fmt: skip
    failures = []
    for method, url, body, headers in cases:
        sent = {**headers, "Content-Type": "application/json"}
        response = client.request(method, url, content=json.dumps(body), headers=sent)
        if (response.status_code, response.headers["content-type"]) != (422, PROBLEM_JSON):
            failures.append(f"{method} {url} {body} -> {response.status_code}")
        elif response.json()["code"] != "validation-error":
            failures.append(f"{method} {url} {body} -> {response.json()['code']}")
    assert not failures, failures


def test_json_nested_as_deep_as_the_decoder_allows_is_a_4xx(client: TestClient) -> None:
    """The edge's walk over every string must not overflow where the JSON decoder did not: 422, or 400 beyond it."""
    tenant = Tenant.new()
    appointment = pending_appointment(client, tenant)
    headers = {**tenant.agent, "Content-Type": "application/json"}
    for depth in (950, 5_000):
        body = '{"reason": ' + "[" * depth + '"\\u0000"' + "]" * depth + "}"
        response = client.post(f"/calendar/appointments/{appointment}/decline", content=body, headers=headers)
        assert 400 <= response.status_code < 500, (depth, response.text[:200])
        assert response.headers["content-type"] == PROBLEM_JSON


@pytest.mark.parametrize("etag", ['"2147483648"', '"99999999999999999999"', 'W/"12345678901"'])
def test_an_if_match_beyond_any_version_is_a_400(client: TestClient, etag: str) -> None:
    """Versions are database integers: an If-Match beyond them is a 400 problem, never the database's 500."""
    tenant = Tenant.new()
    record = uuid.uuid4()
    appointment = pending_appointment(client, tenant)
    for method, url, headers, body in [
        ("PUT", f"/catalog/cards/Project/{record}", tenant.admin, {"published": True}),
        ("PUT", f"/news/posts/{record}", tenant.admin, {"published": True}),
        ("POST", f"/calendar/appointments/{appointment}/confirm", tenant.agent, None),
    ]:
        response = client.request(method, url, json=body, headers={**headers, "If-Match": etag})
        assert_problem(response, 400, "bad-if-match")


# ----------------------------------------------------------------- a real `pin api` over a real socket


@pytest.fixture
def api_server(spawn_role: Callable[..., RoleProcess]) -> ApiServer:
    """A real `pin api`, answering /healthz."""
    return start_api(spawn_role)


@pytest.fixture(scope="module")
def shared_api_server(test_databases: TestDatabases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One `pin api` for the module's edge tests that change nothing in the database (oversized headers and
    bodies): started once instead of once per test (seconds each)."""
    url = test_databases.create()
    port = free_port()
    env = {"PIN_DATABASE_URL": url, "PIN_JWT_SECRET": JWT_SECRET, "PIN_LOG_FORMAT": "json"}
    process = RoleProcess(["api", "--port", str(port)], env, tmp_path_factory.mktemp("api") / "api.log")
    try:
        yield wait_ready(process, port)
    finally:
        process.close()
        test_databases.drop(url)


# ----------------------------------------------------------------------- 5: the connection after a 500


def test_after_a_500_the_same_connection_serves_the_next_request(database_url: str, api_server: ApiServer) -> None:
    """An internal error (here a table gone from under the API) is a 500 problem document, and the client's next,
    unrelated POST on the same keep-alive connection is served (or the 500 said Connection: close)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE notifications.notification RENAME TO notification_gone")
    tenant = Tenant.new()
    connection = RawConnection(api_server.port)
    try:
        failed, body = connection.request("GET", "/notifications", tenant.agent)
        assert failed.status_code == 500, body
        assert header(failed, "content-type") == PROBLEM_JSON
        assert b'"internal-error"' in body
        if header(failed, "connection") == "close":
            return  # told: a client opens a new connection (not what this server does, but allowed)
        created, body = connection.request("POST", "/calendar/slots", tenant.agent, json.dumps(slot_body()).encode())
        assert created.status_code == 201, body
    finally:
        connection.close()
    assert "Traceback" in api_server.process.output()  # the error was logged, with its stack, on the server


# ------------------------------------------------------------------------------- 7: tokens


@pytest.mark.parametrize(
    "claims",
    [
        lambda now: {"exp": 10**20},
        lambda now: {"exp": "100000000000000000000"},
        lambda now: {"exp": now + 86_400 + 600},
        lambda now: {"iat": now - 60, "exp": now + 86_400},
    ],
    ids=["exp 10^20", "exp as digits", "exp beyond a day", "exp - iat beyond a day"],
)
def test_a_token_living_longer_than_the_maximum_lifetime_is_a_401(
    client: TestClient, claims: Callable[[int], dict[str, Any]]
) -> None:
    """exp must be within PIN_JWT_MAX_LIFETIME_SECONDS (one day by default) of iat, or of now without iat (the
    times are taken when the test runs, not when it is collected: a suite may run for many minutes)."""
    tenant = uuid.uuid4()
    response = client.get("/notifications", headers=bearer(tenant, uuid.uuid4(), "agent", **claims(int(time.time()))))
    assert_problem(response, 401, "invalid-token")
    within = {"iat": int(time.time()) - 60, "exp": int(time.time()) + 86_000}
    assert client.get("/notifications", headers=bearer(tenant, uuid.uuid4(), "agent", **within)).status_code == 200


def test_the_maximum_lifetime_is_a_setting(make_settings: Callable[..., Settings], pool: ConnectionPool[Conn]) -> None:
    """PIN_JWT_MAX_LIFETIME_SECONDS=600: a token for an hour is refused, one for five minutes accepted."""
    with TestClient(build_app(make_settings(jwt_max_lifetime_seconds=600), pool)) as client:
        hour = bearer(uuid.uuid4(), uuid.uuid4(), "agent", exp=int(time.time()) + 3600)
        assert_problem(client.get("/notifications", headers=hour), 401, "invalid-token")
        minutes = bearer(uuid.uuid4(), uuid.uuid4(), "agent", exp=int(time.time()) + 300)
        assert client.get("/notifications", headers=minutes).status_code == 200


@pytest.mark.parametrize("roles", [[], ["superuser"], ["root", "Admin"]], ids=["no role", "unknown", "miscased"])
def test_a_token_without_a_known_role_is_a_403_even_on_the_any_role_routes(client: TestClient,
                                                                          roles: list[str]) -> None:  # fmt: skip
    """A user with no role the API knows is nobody it serves: 403 on "any role" routes too, never data."""
    tenant = Tenant.new()
    card, post = uuid.uuid4(), uuid.uuid4()
    assert client.put(f"/catalog/cards/Project/{card}", json={"published": True}, headers=tenant.admin).is_success
    assert client.put(f"/news/posts/{post}", json={"published": True}, headers=tenant.admin).is_success
    headers = bearer(tenant.id, uuid.uuid4(), *roles)
    for url in (
        "/notifications",
        f"/catalog/cards/Project/{card}",
        f"/news/posts/{post}",
        f"/calendar/slots/{uuid.uuid4()}",
    ):
        assert_problem(client.get(url, headers=headers), 403, "forbidden")


def test_pin_token_refuses_a_ttl_beyond_the_maximum_lifetime() -> None:
    """`pin token --ttl` above PIN_JWT_MAX_LIFETIME_SECONDS would mint a token the API refuses: exit 2, one line."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIN_")}, "PIN_JWT_SECRET": JWT_SECRET}
    args = [sys.executable, "-m", "pin", "token", "--user", str(uuid.uuid4()), "--tenant", str(uuid.uuid4()),
            "--role", "agent", "--ttl"]  # fmt: skip
    refused = subprocess.run([*args, "86401"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1
    assert "PIN_JWT_MAX_LIFETIME_SECONDS" in refused.stderr
    minted = subprocess.run([*args, "86400"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert minted.returncode == 0, minted.stderr


# ----------------------------------------------------------------------------- 7: header limits


@pytest.mark.xdist_group("shared-api-server")  # one worker, so one `pin api` for the four
def test_an_oversized_authorization_header_is_a_431_problem_document(shared_api_server: ApiServer) -> None:
    """20 KB (the app sees it), 100 KB and 1 MB (beyond the server's head limit): each a 431 problem document,
    read in full by the client: never text/plain, never a reset."""
    for size in (20_000, 100_000, *[1_000_000] * 5):  # a reset is a race: give it several chances
        connection = RawConnection(shared_api_server.port)
        try:
            response, body = connection.request("GET", "/notifications", {"Authorization": "Bearer " + "a" * size})
        except OSError as exc:
            raise AssertionError(f"{size} bytes: {exc!r}") from exc
        finally:
            connection.close()
        assert (response.status_code, header(response, "content-type")) == (431, PROBLEM_JSON), (size, body[:200])
        assert b'"header-too-large"' in body
    # a head that is not HTTP at all is refused by the server layer the same way: a 400 problem document
    with socket.create_connection(("127.0.0.1", shared_api_server.port), timeout=15) as raw:
        raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65_536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"content-type: application/problem+json" in head.lower(), head
    assert b'"bad-request"' in body


@pytest.mark.xdist_group("shared-api-server")  # one worker, so one `pin api` for the four
def test_a_token_over_the_app_limit_leaves_the_connection_usable(shared_api_server: ApiServer) -> None:
    """The app's own 431 is an ordinary answer: the next request on the connection is served."""
    connection = RawConnection(shared_api_server.port)
    try:
        refused, _ = connection.request("GET", "/notifications", {"Authorization": "Bearer " + "a" * 10_000})
        assert refused.status_code == 431
        served, body = connection.request("GET", "/healthz", {})
        assert served.status_code == 200, body
    finally:
        connection.close()


# ------------------------------------------------------------------------------- request body size


@pytest.mark.xdist_group("shared-api-server")  # one worker, so one `pin api` for the four
def test_a_body_over_the_limit_is_a_413_and_the_connection_serves_the_next_request(
    shared_api_server: ApiServer,
) -> None:
    """A 2 MB body (PIN_HTTP_MAX_BODY_BYTES is 64 KiB by default) is a 413 problem document, sent in full by the
    client and read in full by it, and the same keep-alive connection then creates a slot."""
    tenant = Tenant.new()
    connection = RawConnection(shared_api_server.port)
    try:
        body = json.dumps({**slot_body(), "padding": "a" * 2_000_000}).encode()
        refused, answer = connection.request("POST", "/calendar/slots", tenant.agent, body)
        assert (refused.status_code, header(refused, "content-type")) == (413, PROBLEM_JSON), answer[:200]
        assert b'"payload-too-large"' in answer
        created, answer = connection.request("POST", "/calendar/slots", tenant.agent, json.dumps(slot_body()).encode())
        assert created.status_code == 201, answer
    finally:
        connection.close()


@pytest.mark.xdist_group("shared-api-server")  # one worker, so one `pin api` for the four
def test_a_chunked_body_over_the_limit_is_a_413(shared_api_server: ApiServer) -> None:
    """Without a Content-Length the bytes are counted as they are read: past the limit, a 413 problem document."""
    tenant = Tenant.new()

    def chunks() -> Any:
        yield b'{"padding": "'
        for _ in range(40):
            yield b"a" * 65_536
        yield b'"}'

    url = f"http://127.0.0.1:{shared_api_server.port}/calendar/slots"
    headers = {**tenant.agent, "content-type": "application/json"}
    response = httpx.post(url, headers=headers, content=chunks(), timeout=15)
    assert (response.status_code, response.headers["content-type"]) == (413, PROBLEM_JSON), response.text[:200]
    assert response.json()["code"] == "payload-too-large"
    small = httpx.post(url, headers=headers, content=iter([json.dumps(slot_body()).encode()]), timeout=15)
    assert small.status_code == 201, small.text


# ------------------------------------------------------------------------------- 8: loose input


LOOSE_SLOT_FIELDS: list[tuple[str, Any]] = [
    ("minLeadTimeMinutes", True),
    ("minLeadTimeMinutes", "60"),
    ("minLeadTimeMinutes", 60.0),
    ("autoConfirm", 1),
    ("autoConfirm", "true"),
    ("startAt", "1900000000"),
    ("startAt", 1900000000),
    ("startAt", "2030-01-01T10:00:00"),
    ("startAt", "2030-01-01"),
    ("startAt", "2030-01-01 10:00:00Z"),
    ("startAt", "2030-01-01T10:00Z"),
    ("kind", 0),
    ("kind", ["Showing"]),
    ("timeZone", 3),
]


@pytest.mark.parametrize(("field", "value"), LOOSE_SLOT_FIELDS, ids=[f"{f}={v!r}" for f, v in LOOSE_SLOT_FIELDS])
def test_a_slot_body_takes_strict_json_types_and_rfc3339_times_only(client: TestClient, field: str,
                                                                   value: Any) -> None:  # fmt: skip
    """No coercion from booleans, strings or numbers; a time is an RFC 3339 string with an offset."""
    response = client.post("/calendar/slots", json=slot_body(**{field: value}), headers=Tenant.new().agent)
    assert_problem(response, 422, "validation-error")


def test_rfc3339_times_with_any_offset_are_accepted(client: TestClient) -> None:
    """Z, z, a numeric offset and fractions of a second are RFC 3339: accepted."""
    tenant = Tenant.new()
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=3)
    end = start + timedelta(minutes=30)
    plus_five = timezone(timedelta(hours=5))
    for start_text, end_text in [
        (start.strftime("%Y-%m-%dT%H:%M:%SZ"), end.strftime("%Y-%m-%dT%H:%M:%SZ")),
        (start.strftime("%Y-%m-%dt%H:%M:%S.123z"), end.strftime("%Y-%m-%dt%H:%M:%S.5z")),
        (start.astimezone(plus_five).isoformat(), end.astimezone(plus_five).isoformat()),
    ]:
        body = slot_body(startAt=start_text, endAt=end_text)
        response = client.post("/calendar/slots", json=body, headers=tenant.agent)
        assert response.status_code == 201, (body, response.text)
        start, end = start + timedelta(hours=1), end + timedelta(hours=1)


def test_other_bodies_are_strict_too(client: TestClient) -> None:
    """Promotion, reschedule, card and post bodies: ids and times from strings only, booleans from booleans."""
    tenant = Tenant.new()
    target = [{"targetKind": "Project", "targetId": str(uuid.uuid4())}]
    card = uuid.uuid4()
    cases = [
        ("POST", "/promotions", {"packageId": TOP_1D, "targets": target, "endsAt": 1900000000}, tenant.manager),
        ("POST", "/promotions", {"packageId": TOP_1D, "targets": target, "endsAt": "1900000000"}, tenant.manager),
        ("POST", "/promotions", {"packageId": TOP_1D, "targets": [{"targetKind": "Project", "targetId": 7}]},
         tenant.manager),
        ("POST", "/promotions", {"packageId": TOP_1D, "targets": [{"targetKind": True, "targetId": str(card)}]},
         tenant.manager),
        ("POST", "/promotions", {"package_id": TOP_1D, "targets": target}, tenant.manager),  # camelCase only
        ("POST", f"/calendar/my/appointments/{uuid.uuid4()}/reschedule", {"newSlotId": 5}, tenant.investor),
        ("POST", f"/calendar/appointments/{uuid.uuid4()}/decline", {"reason": 5}, tenant.agent),
        ("PUT", f"/catalog/cards/Project/{card}", {"published": "true"}, tenant.admin),
        ("PUT", f"/catalog/cards/Project/{card}", {"published": 0}, tenant.admin),
        ("PUT", f"/news/posts/{card}", {"published": 1}, tenant.admin),
    ]  # fmt: skip
    for method, url, body, headers in cases:
        response = client.request(method, url, json=body, headers=headers)
        assert response.status_code == 422, (method, url, body, response.text)
        assert response.headers["content-type"] == PROBLEM_JSON


def test_a_property_object_without_its_project_is_a_422(client: TestClient) -> None:
    """A PropertyObject belongs to a project: without projectId it is refused (and a Project with one)."""
    tenant = Tenant.new()
    card = uuid.uuid4()
    assert_problem(client.put(f"/catalog/cards/PropertyObject/{card}", json={"published": True},
                              headers=tenant.admin), 422, "validation-error")  # fmt: skip
    assert_problem(client.put(f"/catalog/cards/PropertyObject/{card}", json={"published": True, "projectId": None},
                              headers=tenant.admin), 422, "validation-error")  # fmt: skip
    assert client.get(f"/catalog/cards/PropertyObject/{card}", headers=tenant.admin).status_code == 404
    with_project = {"published": True, "projectId": str(uuid.uuid4())}
    created = client.put(f"/catalog/cards/PropertyObject/{card}", json=with_project, headers=tenant.admin)
    assert created.status_code == 201, created.text


@pytest.mark.parametrize("resource", ["catalog/cards/Project", "news/posts"])
def test_another_tenants_admin_can_neither_probe_nor_overwrite_an_id(client: TestClient, resource: str) -> None:
    """Tenant B's PUT on an id tenant A holds answers exactly as on an id nobody holds (B gets its own record),
    and A's record stays as it was."""
    a, b = Tenant.new(), Tenant.new()
    taken, fresh = uuid.uuid4(), uuid.uuid4()
    assert client.put(f"/{resource}/{taken}", json={"published": True}, headers=a.admin).status_code == 201
    on_taken = client.put(f"/{resource}/{taken}", json={"published": False}, headers=b.admin)
    on_fresh = client.put(f"/{resource}/{fresh}", json={"published": False}, headers=b.admin)

    def seen(response: httpx.Response) -> tuple[int, str | None, dict[str, Any]]:
        body = {k: v for k, v in response.json().items() if k not in ("id", "updatedAt")}
        return response.status_code, response.headers.get("etag"), body

    assert seen(on_taken) == seen(on_fresh)
    assert on_taken.status_code == 201
    mine = client.get(f"/{resource}/{taken}", headers=a.admin).json()
    assert (mine["published"], mine["version"]) == (True, 1)
    theirs = client.get(f"/{resource}/{taken}", headers=b.admin).json()
    assert (theirs["published"], theirs["version"]) == (False, 1)
