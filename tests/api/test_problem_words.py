"""A refusal says why in words a caller can act on: a 401 whether the token was missing, expired or not
verifiable (RFC 6750's error_description, nothing that helps forge one), a 403 the role it needs, a body that is
not JSON the line and column where it stops being JSON."""

from __future__ import annotations

import time
import uuid
import warnings

import jwt
import pytest

from tests.support.api import bearer, slot_body

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = [pytest.mark.integration]

OTHER_SECRET = "a-secret-that-is-not-the-apis-of-32-bytes"  # a forger's key


def _challenge(client: TestClient, headers: dict[str, str]) -> tuple[str, str]:
    response = client.get("/notifications", headers=headers)
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "invalid-token"
    return response.json()["detail"], response.headers["www-authenticate"]


def test_a_401_says_whether_the_token_was_missing_expired_or_not_verifiable(client: TestClient) -> None:
    tenant, user = uuid.uuid4(), uuid.uuid4()
    detail, challenge = _challenge(client, {})
    assert "no bearer token" in detail
    assert challenge == "Bearer"  # RFC 6750 3.1: no error code when the request carried no token

    expired = bearer(tenant, user, "agent", exp=int(time.time()) - 60)
    detail, challenge = _challenge(client, expired)
    assert detail == "the bearer token has expired"
    assert challenge == 'Bearer error="invalid_token", error_description="the bearer token has expired"'

    claims = {"sub": str(user), "tenant_id": str(tenant), "roles": ["agent"], "exp": int(time.time()) + 600}
    forged = {"Authorization": f"Bearer {jwt.encode(claims, OTHER_SECRET, algorithm='HS256')}"}
    detail, challenge = _challenge(client, forged)
    assert detail == "the bearer token could not be verified"
    assert 'error="invalid_token"' in challenge
    # a forged token that is also past its exp is "not verifiable", never "expired": the answer does not tell a
    # forger that the signature was the only thing wrong
    claims["exp"] = int(time.time()) - 60
    forged_expired = {"Authorization": f"Bearer {jwt.encode(claims, OTHER_SECRET, algorithm='HS256')}"}
    assert _challenge(client, forged_expired)[0] == "the bearer token could not be verified"


def test_a_403_names_the_role_the_operation_needs(client: TestClient) -> None:
    investor = bearer(uuid.uuid4(), uuid.uuid4(), "investor")
    response = client.post("/calendar/slots", json=slot_body(), headers=investor)
    assert response.status_code == 403, response.text
    assert response.json()["detail"] == "this operation needs the role agent"


def test_a_body_that_is_not_json_names_its_line_and_column(client: TestClient) -> None:
    agent = bearer(uuid.uuid4(), uuid.uuid4(), "agent")
    body = b'{\n  "startAt": "2030-01-01T10:00:00Z",\n  "endAt": ,\n}'
    response = client.post("/calendar/slots", content=body, headers={**agent, "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed-json"
    assert response.json()["detail"] == "the body is not JSON: Expecting value at line 3, column 12"
