"""Fixtures: a real PostgreSQL (fresh database per test), a real broker (fresh per test), settings, tokens."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi import FastAPI
from psycopg_pool import ConnectionPool

from pin.api.auth import mint_token
from pin.bootstrap import build_app
from pin.db import Conn, create_pool
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.lifetime import die_with_own_parent
from pin.local.embedded.postgres import ensure_system_user
from pin.observability.logging import configure_unstarted
from pin.settings import Settings
from tests.support import deep
from tests.support.infra import TestDatabases, postgres_server
from tests.support.netns import CutOffLab, Link, cut_off_lab, unavailable_reason
from tests.support.processes import RoleProcess

if TYPE_CHECKING:  # imported by the fixture: starlette warns when its test client is imported this early
    from fastapi.testclient import TestClient

JWT_SECRET = "test-secret-of-at-least-16-chars"

# the run's temporary root when this conftest chose it (removed after a green run)
_OWN_BASETEMP = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--deep`` (used by `make test-deep`)."""
    parser.addoption(
        "--deep",
        action="store_true",
        default=False,
        help="run the property-based and race tests at their full size (more examples, more tries)",
    )


@pytest.fixture(scope="session")
def deep_run(request: pytest.FixtureRequest) -> bool:
    """Whether the full-size run (`make test-deep`) was asked for; the default run is smaller, never weaker."""
    return bool(request.config.getoption("--deep", default=False))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """A private temporary root for the run, and a PIN_HOME where no `pin up` runs.

    As root the embedded PostgreSQL runs as an unprivileged user that must traverse the folders above its data
    directory; every pytest session that starts chmods the shared ``/tmp/pytest-of-<user>`` back to 0700, which
    cut a running suite's server off its files whenever another suite started on the machine. A root of our own
    (xdist workers get folders under it) is chmodded by nobody else.
    """
    if config.option.basetemp is None:
        own = Path(tempfile.mkdtemp(prefix="pin-tests-"))
        config.option.basetemp = str(own)
        config.stash[_OWN_BASETEMP] = own
    deep.DEEP = bool(config.getoption("--deep", default=False))  # before the test modules import it
    # the roles' code that runs in this process logs an exception plainly, as a role does, not as structlog's
    # default rich traceback with every frame's locals: that took 2-4 s per failure under load (the budget tests)
    configure_unstarted()
    # tests must not find the endpoints of a developer's `pin up` (pin.local.state_folder.running_endpoints): roles
    # read only what tests give them
    os.environ["PIN_HOME"] = str(Path(config.option.basetemp) / "no-pin-up-here")
    if hasattr(config, "workerinput"):
        # an xdist worker ends with the pytest that started it (SIGKILL from the kernel when it is killed), and
        # with the worker every server, broker and role it started (each dies with its parent): nothing is left
        die_with_own_parent(signal.SIGKILL)
    elif os.geteuid() == 0 and not os.environ.get("PIN_TEST_DATABASE_URL"):
        # once, before any worker starts a server (they would all create it at the same moment otherwise)
        ensure_system_user()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the run's own temporary root after a green run (a red one keeps its evidence)."""
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and exitstatus == 0:
        shutil.rmtree(own, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first (the soak, then the other multi-process tests), so that parallel workers finish together.

    A test marked ``deep(only=True)`` runs under `make test-deep` only (``--deep``, or the soak's ``--soak-long``):
    slow, and covering what a cheaper case of `make test` covers too. It is deselected, not skipped, elsewhere.
    """
    if not (config.getoption("--deep", default=False) or config.getoption("--soak-long", default=False)):
        deep_only = [item for item in items if _deep_only(item)]
        if deep_only:
            config.hook.pytest_deselected(items=deep_only)
            items[:] = [item for item in items if not _deep_only(item)]

    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith("tests/soak/"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)


def _deep_only(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("deep")
    return marker is not None and bool(marker.kwargs.get("only"))


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
def app(make_settings: Callable[..., Settings], pool: ConnectionPool[Conn]) -> FastAPI:
    """The real API on this test's database."""
    return build_app(make_settings(), pool)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    """An in-process client of the API that never raises a server error: a 500 shows as a 500, as to a caller."""
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


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

    def _spawn(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> RoleProcess:
        log = tmp_path / f"role-{len(children)}-{'-'.join(args)[:40]}.log"
        child = RoleProcess(list(args), {**settings_env, **(env or {})}, log, prefix=prefix)
        children.append(child)
        return child

    yield _spawn
    for child in children:
        child.close()


@pytest.fixture(scope="session")
def netns_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CutOffLab]:
    """A network namespace whose link can be cut, and a PostgreSQL on its host end (tests/support/netns.py)."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"cannot create a network namespace: {reason}")
    with cut_off_lab(tmp_path_factory.mktemp("netns")) as lab:
        yield lab


@pytest.fixture
def cut_database_url(netns_lab: CutOffLab) -> Iterator[str]:
    """A fresh, migrated database on the namespace's server, for this test only."""
    url = netns_lab.databases.create()
    yield url
    netns_lab.namespace.restore()  # a test that failed while its link was cut leaves it whole for the next
    netns_lab.databases.drop(url)


@pytest.fixture
def broker_link(netns_lab: CutOffLab, tmp_path: Path) -> Iterator[tuple[Link, EmbeddedKafka]]:
    """A second pair into the namespace, and a broker listening on its host end (only that path is cut)."""
    link = netns_lab.namespace.add_link()
    broker = EmbeddedKafka(tmp_path / "broker.log", host=link.host_address)
    broker.start()
    try:
        yield link, broker
    finally:
        link.restore()
        broker.stop()
        netns_lab.namespace.links.remove(link)
        link.remove()
