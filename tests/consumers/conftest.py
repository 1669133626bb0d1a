"""Fixtures of the consumer tests: one broker and one database per module, with consumers running in threads.

Starting a broker, a database and a consumer group (a join takes about half the session timeout) per test
would cost seconds each; the acceptance tests of a module share them instead and isolate themselves by using
fresh ids (tenants, users, appointments, purchases) in every test.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, create_pool
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.consumers.support import Producing
from tests.support.infra import TestDatabases

# A group join on the embedded broker takes about half the session timeout; 3 s keeps joins short and is still
# well above librdkafka's heartbeat interval (a fifth of it).
FAST_SESSION_TIMEOUT_MS = 3000

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient  # noqa: F401 - imported here once, under the filter


@pytest.fixture(scope="module")
def module_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    """A broker shared by the tests of one module."""
    broker = EmbeddedKafka(Path(tmp_path_factory.mktemp("broker")) / "broker.log")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def module_database_url(test_databases: TestDatabases) -> Iterator[str]:
    """A migrated database shared by the tests of one module."""
    url = test_databases.create()
    yield url
    test_databases.drop(url)


@pytest.fixture(scope="module")
def module_pool(module_database_url: str) -> Iterator[ConnectionPool[Conn]]:
    """A pool on the module's database."""
    pool = create_pool(module_database_url, min_size=1, max_size=10, name="consumer-tests")
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def module_settings(module_database_url: str, module_kafka: EmbeddedKafka) -> Settings:
    """Settings on the module's database and broker, with the topics created."""
    settings = Settings.model_validate(
        {
            "database_url": module_database_url,
            "kafka_bootstrap_servers": module_kafka.bootstrap_servers,
            "jwt_secret": JWT_SECRET,
            "kafka_session_timeout_ms": FAST_SESSION_TIMEOUT_MS,
        }
    )
    ensure_topics(settings)
    return settings


# Per-test fixtures of the runtime tests (a module that shares one broker overrides ``producer``).


@pytest.fixture
def settings(make_settings: Callable[..., Settings], kafka: EmbeddedKafka) -> Settings:
    """Settings on this test's database and broker, topics created."""
    settings = make_settings(
        kafka_bootstrap_servers=kafka.bootstrap_servers, kafka_session_timeout_ms=FAST_SESSION_TIMEOUT_MS
    )
    ensure_topics(settings)
    return settings


@pytest.fixture
def producer(kafka: EmbeddedKafka) -> Iterator[Producing]:
    """A plain producer to the test's broker, closed before the broker stops."""
    producing = Producing(kafka.bootstrap_servers)
    yield producing
    producing.close()
