"""Every role's readiness probe on PIN_METRICS_PORT: ``/readyz`` answers 200 while its database (and, for the relay
and the consumers, its broker) answers, and 503 naming the dependency while it does not; real roles, a real
PostgreSQL stopped and started again, a real broker stopped."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import CollectorRegistry

from pin.db import migrate
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.postgres import EmbeddedPostgres
from pin.local.tcp_ports import free_port
from pin.observability.liveness import Readiness
from pin.observability.metrics import READINESS_PATHS, start_metrics_server
from tests.conftest import JWT_SECRET
from tests.support.processes import RoleProcess


def _probe(port: int, path: str = "/readyz") -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.unit
def test_the_probe_is_ready_only_while_every_check_passes() -> None:
    ready = Readiness()
    failing: list[str] = []

    def broker() -> None:
        if failing:
            raise ConnectionError(failing[0])

    ready.add("database", lambda: None)
    ready.add("broker", broker)
    server = start_metrics_server(0, registry=CollectorRegistry(), ready=ready)
    try:
        for path in READINESS_PATHS:
            assert _probe(server.server_port, path) == (
                200,
                {"status": "ready", "checks": {"database": "ok", "broker": "ok"}},
            )
        failing.append("connection refused")
        status, body = _probe(server.server_port)
        assert status == 503
        assert body["status"] == "not-ready"
        assert body["checks"] == {"database": "ok", "broker": "unreachable: connection refused"}
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A server of this test's own (it is stopped and started again) with a migrated database."""
    postgres = EmbeddedPostgres(tmp_path / "pg")
    postgres.start()
    with psycopg.connect(postgres.url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE pin_ready")
    url = postgres.url.rsplit("/", 1)[0] + "/pin_ready"
    migrate(url)
    yield postgres, url
    postgres.destroy()


def _until(condition: Callable[[], bool], what: str, roles: list[RoleProcess], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for role in roles:
            assert role.process.poll() is None, f"{role.args} exited: {role.output()[-2000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {[r.output()[-1500:] for r in roles]}"
        time.sleep(0.3)


@pytest.mark.integration
@pytest.mark.slow
def test_real_roles_are_ready_while_their_database_and_broker_answer(
    tmp_path: Path, own_postgres: tuple[EmbeddedPostgres, str], kafka: EmbeddedKafka
) -> None:
    postgres, url = own_postgres
    env = {
        "PIN_DATABASE_URL": url,
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
    }
    ports = {"relay": free_port(), "worker": free_port()}
    relay = RoleProcess(["relay"], {**env, "PIN_METRICS_PORT": str(ports["relay"])}, tmp_path / "relay.log")
    worker = RoleProcess(
        ["worker", "appointment-timeout"], {**env, "PIN_METRICS_PORT": str(ports["worker"])}, tmp_path / "worker.log"
    )
    roles = [relay, worker]

    def answers(port: int, status: int, checks: dict[str, str]) -> Callable[[], bool]:
        def probe() -> bool:
            try:
                code, body = _probe(port)
            except OSError:
                return False  # not listening yet
            seen = body.get("checks")
            assert isinstance(seen, dict)
            return code == status and {name: str(seen.get(name, ""))[: len(v)] for name, v in checks.items()} == checks

        return probe

    try:
        _until(answers(ports["relay"], 200, {"database": "ok", "broker": "ok"}), "the relay to be ready", roles)
        _until(answers(ports["worker"], 200, {"database": "ok"}), "the worker to be ready", roles)
        assert "broker" not in _probe(ports["worker"])[1]["checks"]  # type: ignore[operator]

        postgres.stop("immediate")
        down = {"database": "unreachable"}
        _until(answers(ports["relay"], 503, {**down, "broker": "ok"}), "the relay to say its database is away", roles)
        _until(answers(ports["worker"], 503, down), "the worker to say its database is away", roles)
        for port in ports.values():  # liveness is another question: the loops still turn, waiting
            assert _probe(port, "/healthz/liveness")[0] == 200

        postgres.restart("fast")
        _until(answers(ports["relay"], 200, {"database": "ok", "broker": "ok"}), "the relay ready again", roles)
        _until(answers(ports["worker"], 200, {"database": "ok"}), "the worker ready again", roles)

        kafka.stop()
        _until(answers(ports["relay"], 503, {"database": "ok", "broker": "unreachable"}), "broker away", roles)
        _until(answers(ports["worker"], 200, {"database": "ok"}), "the worker, which needs no broker", roles)
    finally:
        for role in roles:
            role.close()
