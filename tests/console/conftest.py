"""Fixtures of the console's tests: tokens of every role, a client logged in with a session cookie."""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Callable, Iterator

import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn
from pin.settings import Settings

# Starlette warns at import when its test client runs on httpx rather than httpx2 (not installed); scoped here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

ROLES = ("agent", "investor", "manager", "admin", "viewer", "operator")
# Every page of the console (paths fixed by the issue), with a group and a key that exist in every database.
PAGES = (
    "/console",
    "/console/jobs",
    "/console/outbox",
    "/console/groups",
    "/console/groups/crm",
    "/console/dead-letters",
    "/console/dead-letters?kind=relay",
    "/console/keys/6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0001",
    "/console/audit",
)
__all__ = ["CSRF", "PAGES", "ROLES", "TestClient", "csrf_of"]
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@pytest.fixture
def operator(settings: Settings, pool: ConnectionPool[Conn], token: Callable[..., str]) -> Iterator[TestClient]:
    """A client of the API on the test's database and broker (the consumer tests' ``settings``), with an operator's
    bearer token."""
    with TestClient(build_app(settings, pool), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {token(uuid.uuid4(), uuid.uuid4(), 'operator')}"
        yield client


@pytest.fixture
def bearer_of(token: Callable[..., str]) -> Callable[[str], dict[str, str]]:
    """An Authorization header holding ``role`` (a fresh user of a fresh tenant)."""

    def _bearer(role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token(uuid.uuid4(), uuid.uuid4(), role)}"}

    return _bearer


def csrf_of(html: str) -> str:
    """The session's CSRF token, as a page's form carries it."""
    found = CSRF.search(html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)
