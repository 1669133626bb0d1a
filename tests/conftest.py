"""Fixtures: a real PostgreSQL (fresh database per test), a real broker (fresh per test), settings, tokens."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from pin.api.auth import mint_token
from pin.db import Conn, create_pool
from pin.embedded.kafka import EmbeddedKafka
from pin.settings import Settings
from tests.support.infra import TestDatabases, postgres_server
from tests.support.processes import RoleProcess

JWT_SECRET = "test-secret-of-at-least-16-chars"


@pytest.fixture(scope="session")
def test_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDatabases]:
    """The session's PostgreSQL server with a migrated template."""
    with postgres_server(tmp_path_factory.mktemp("pg")) as (url, _server):
        databases = TestDatabases(url)
        try:
            yield databases
        finally:
            databases.close()


@pytest.fixture
def database_url(test_databases: TestDatabases) -> Iterator[str]:
    """A fresh, migrated database for this test only."""
    url = test_databases.create()
    yield url
    test_databases.drop(url)


@pytest.fixture
def pool(database_url: str) -> Iterator[ConnectionPool[Conn]]:
    """A connection pool on the test's database."""
    pool = create_pool(database_url, min_size=1, max_size=10, name="test")
    yield pool
    pool.close()


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[EmbeddedKafka]:
    """A fresh embedded broker for this test (it starts in well under a second)."""
    broker = EmbeddedKafka(tmp_path / "broker.log")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def settings_env(database_url: str) -> dict[str, str]:
    """The environment a role started by this test gets (add PIN_KAFKA_BOOTSTRAP_SERVERS when needed)."""
    return {
        "PIN_DATABASE_URL": database_url,
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
        "PIN_KAFKA_SESSION_TIMEOUT_MS": "6000",
    }


@pytest.fixture
def make_settings(database_url: str) -> Callable[..., Settings]:
    """Settings for in-process use cases and jobs; keyword arguments override fields."""

    def _make(**overrides: object) -> Settings:
        values: dict[str, object] = {
            "database_url": database_url,
            "jwt_secret": JWT_SECRET,
            "kafka_session_timeout_ms": 6000,
            **overrides,
        }
        return Settings.model_validate(values)

    return _make


@pytest.fixture
def token() -> Callable[..., str]:
    """Mint a bearer token: token(user_id, tenant_id, "agent")."""

    def _token(user_id: uuid.UUID, tenant_id: uuid.UUID, *roles: str, ttl_seconds: int = 3600) -> str:
        return mint_token(JWT_SECRET, user_id=user_id, tenant_id=tenant_id, roles=list(roles), ttl_seconds=ttl_seconds)

    return _token


@pytest.fixture
def spawn_role(tmp_path: Path, settings_env: dict[str, str]) -> Iterator[Callable[..., RoleProcess]]:
    """Start `pin <args>` as a real subprocess; every child is killed at the end of the test."""
    children: list[RoleProcess] = []

    def _spawn(*args: str, env: dict[str, str] | None = None) -> RoleProcess:
        log = tmp_path / f"role-{len(children)}-{'-'.join(args)[:40]}.log"
        child = RoleProcess(list(args), {**settings_env, **(env or {})}, log)
        children.append(child)
        return child

    yield _spawn
    for child in children:
        child.close()
