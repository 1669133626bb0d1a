"""Who may see and do what in the console, over HTTP on a real PostgreSQL: every role on every page and action,
the login form and its cookie, CSRF refusal, the security headers, and the business API closed to the platform
roles."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from fastapi import FastAPI

from pin.console.access import CONTENT_SECURITY_POLICY
from tests.console.conftest import PAGES, ROLES, TestClient, csrf_of

pytestmark = [pytest.mark.integration]

READS = {"viewer", "operator", "admin"}
ACTS = {"operator", "admin"}
PUBLIC = {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
PAUSE = {"kind": "group", "name": "crm", "action": "pause", "reason": "matrix"}


@pytest.mark.parametrize("page", PAGES)
def test_every_page_by_every_role(client: TestClient, bearer_of: Callable[[str], dict[str, str]], page: str) -> None:
    anonymous = client.get(page)
    assert anonymous.status_code == 401
    assert 'action="/console/login"' in anonymous.text  # the login page, not a problem document
    for role in ROLES:
        answer = client.get(page, headers=bearer_of(role))
        assert answer.status_code == (200 if role in READS else 403), (role, answer.text[:500])
        assert answer.headers["content-type"].startswith("text/html")
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("role", ROLES)
def test_every_action_by_every_role(client: TestClient, bearer_of: Callable[[str], dict[str, str]], role: str) -> None:
    answer = client.post("/console/pauses", data=PAUSE, headers=bearer_of(role), follow_redirects=False)
    assert answer.status_code == (303 if role in ACTS else 403), answer.text[:500]
    paused = client.get("/console/audit", headers=bearer_of("viewer"))
    assert ("group.pause" in paused.text) == (role in ACTS)


def test_no_credentials_cannot_act(client: TestClient) -> None:
    assert client.post("/console/pauses", data=PAUSE, follow_redirects=False).status_code == 401


def test_login_sets_a_strict_session_cookie_that_expires_with_the_token(
    client: TestClient, token: Callable[..., str]
) -> None:
    minted = token(uuid.uuid4(), uuid.uuid4(), "viewer", ttl_seconds=600)
    answer = client.post("/console/login", data={"token": minted, "next": "/console/audit"}, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/audit"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("pin_console=")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    assert "Secure" not in cookie  # plain HTTP here; behind TLS it is Secure (next test)
    max_age = int(cookie.split("Max-Age=")[1].split(";")[0])
    assert 590 <= max_age <= 600
    assert client.get("/console/audit").status_code == 200  # the cookie is the session


def test_the_cookie_is_secure_behind_tls(client: TestClient, token: Callable[..., str]) -> None:
    minted = token(uuid.uuid4(), uuid.uuid4(), "operator")
    answer = client.post(
        "/console/login", data={"token": minted}, headers={"X-Forwarded-Proto": "https"}, follow_redirects=False
    )
    assert "Secure" in answer.headers["set-cookie"]


def test_login_refuses_a_bad_token_and_a_business_role(client: TestClient, token: Callable[..., str]) -> None:
    bad = client.post("/console/login", data={"token": "not-a-jwt"}, follow_redirects=False)
    assert bad.status_code == 401
    assert "set-cookie" not in bad.headers
    agent = client.post("/console/login", data={"token": token(uuid.uuid4(), uuid.uuid4(), "agent")})
    assert agent.status_code == 403
    assert "set-cookie" not in agent.headers


def test_login_never_redirects_off_the_console(client: TestClient, token: Callable[..., str]) -> None:
    minted = token(uuid.uuid4(), uuid.uuid4(), "viewer")
    for target in ("https://evil.example/", "//evil.example/console", "/calendar/slots"):
        answer = client.post("/console/login", data={"token": minted, "next": target}, follow_redirects=False)
        assert answer.headers["location"] == "/console", target


def test_a_session_must_send_its_csrf_token(client: TestClient, token: Callable[..., str]) -> None:
    client.post("/console/login", data={"token": token(uuid.uuid4(), uuid.uuid4(), "operator")})
    without = client.post("/console/pauses", data=PAUSE, follow_redirects=False)
    assert without.status_code == 403
    assert "CSRF" in without.text
    wrong = client.post("/console/pauses", data={**PAUSE, "csrf": "0" * 64}, follow_redirects=False)
    assert wrong.status_code == 403
    page = client.get("/console/groups/crm")
    assert "group.pause" not in client.get("/console/audit").text  # nothing was done
    right = client.post("/console/pauses", data={**PAUSE, "csrf": csrf_of(page.text)}, follow_redirects=False)
    assert right.status_code == 303
    assert "group.pause" in client.get("/console/audit").text


def test_another_sessions_csrf_token_is_refused(client: TestClient, token: Callable[..., str]) -> None:
    client.post("/console/login", data={"token": token(uuid.uuid4(), uuid.uuid4(), "operator")})
    theirs = csrf_of(client.get("/console/groups/crm").text)
    client.post("/console/login", data={"token": token(uuid.uuid4(), uuid.uuid4(), "operator")})
    answer = client.post("/console/pauses", data={**PAUSE, "csrf": theirs}, follow_redirects=False)
    assert answer.status_code == 403


def test_an_action_needs_a_reason(client: TestClient, bearer_of: Callable[[str], dict[str, str]]) -> None:
    answer = client.post("/console/pauses", data={**PAUSE, "reason": "  "}, headers=bearer_of("operator"))
    assert answer.status_code == 400
    assert "reason" in answer.text


def test_security_headers_on_every_console_response(client: TestClient) -> None:
    for path in ("/console/login", "/console/static/console.js", "/console/static/console.css", "/console/nope"):
        answer = client.get(path)
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "content-security-policy" not in client.get("/healthz").headers  # the API's JSON is left as it was


def test_no_page_has_inline_script(client: TestClient, bearer_of: Callable[[str], dict[str, str]]) -> None:
    for page in (*PAGES, "/console/login"):
        html = client.get(page, headers=bearer_of("operator")).text
        assert "<script>" not in html
        assert html.count("<script") == html.count('<script src="/console/static/console.js" defer></script>')
        assert " on" + "click=" not in html


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_the_platform_roles_open_nothing_of_the_business_api(
    app: FastAPI, client: TestClient, bearer_of: Callable[[str], dict[str, str]], role: str
) -> None:
    headers = bearer_of(role)
    tried = 0
    for template, operations in app.openapi()["paths"].items():
        if template in PUBLIC:
            continue
        path = re.sub(r"\{kind\}", "Project", template)
        path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)
        for method in operations:
            answer = client.request(method.upper(), path, headers=headers, json={})
            assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
            assert answer.json()["code"] == "forbidden"
            tried += 1
    assert tried >= 15  # every business route, not a handful


def test_a_business_role_beside_a_platform_role_keeps_its_tenant_rule(
    client: TestClient, token: Callable[..., str]
) -> None:
    tenant, other = uuid.uuid4(), uuid.uuid4()
    card = uuid.uuid4()
    admin = {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'admin', 'operator')}"}
    put = client.put(f"/catalog/cards/Project/{card}", headers=admin, json={"published": True})
    assert put.status_code == 201, put.text
    assert client.get(f"/catalog/cards/Project/{card}", headers=admin).status_code == 200
    outsider = {"Authorization": f"Bearer {token(uuid.uuid4(), other, 'agent', 'operator')}"}
    assert client.get(f"/catalog/cards/Project/{card}", headers=outsider).status_code == 404
