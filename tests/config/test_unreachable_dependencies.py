"""A role started while its database or broker is unreachable waits, retries with backoff, says so in its log,
and starts working once the dependency appears (no supervisor restarts it here: one process, start to finish).

Database: an embedded PostgreSQL is prepared (migrated, one outbox row), stopped, then every role is started
against its port: relay, both workers, a catalog consumer and the API. After a while the server is started on
the same port and each role must do its job: the relay publishes the row, the workers record a cycle, the
consumer records the message in its inbox, the API answers /readyz.

Broker: the relay and a consumer are started against a port with no broker; then a broker is started on it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import psycopg
import pytest
from confluent_kafka import Producer

from pin.api.auth import mint_token
from pin.db import connect, migrate
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.postgres import EmbeddedPostgres
from pin.local.tcp_ports import free_port
from pin.messaging import topics
from pin.messaging.kafka import ensure_topics
from pin.outbox.writer import RELAY_POLICY, MessageContext, build_rows, outbox_insert
from pin.promotion.contracts import CurrencySnapshot, PriceSnapshot, PromotionPurchaseChangedKafkaEvent, PurchaseTarget
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WAIT_DOWN = 10.0  # the longest the dependency stays away after the roles started
DOWN_TRIES = 3  # ... or until every role logged this many failed tries (proof it retries, not one attempt)
DOWN_WORDS = ("connection refused", "unavailable", "retry")  # what a line about the missing dependency says


def purchase_event() -> PromotionPurchaseChangedKafkaEvent:
    """A valid purchase-changed contract (catalog reads it)."""
    now = datetime.now(UTC)
    return PromotionPurchaseChangedKafkaEvent(
        purchase_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        buyer_user_id=uuid.uuid4(),
        package_id=uuid.UUID("6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0004"),
        package_code="TOP-1D",
        package_kind="Top",
        targets=(PurchaseTarget(target_kind="Project", target_id=uuid.uuid4()),),
        status="Active",
        payment_status="NotRequired",
        boost_weight=50,
        starts_at=now,
        ends_at=now + timedelta(hours=1),
        price=PriceSnapshot(
            amount=Decimal("990.00"), currency_id=uuid.uuid4(), currency=CurrencySnapshot(code="RUB", symbol="₽")
        ),
        version=1,
    )


def insert_outbox_row(url: str) -> str:
    """One outbox row (a purchase-changed message); returns its MessageId."""
    (row,) = build_rows(
        *purchase_event().recorded(),
        occurred_at=datetime.now(UTC),
        context=MessageContext(str(uuid.uuid4())),
        policy=RELAY_POLICY,
    )
    with connect(url) as conn:
        outbox_insert(conn, [row])
        conn.commit()
    return str(row.message_id)


def poll(what: Callable[[], bool], timeout: float) -> bool:
    """Poll ``what`` until it is true or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if what():
                return True
        except (psycopg.Error, httpx.HTTPError):
            pass
        time.sleep(0.5)
    return False


@dataclass
class Server:
    """A prepared PostgreSQL that can be stopped and started on its port."""

    postgres: EmbeddedPostgres
    url: str


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A migrated database ``pin_cfg`` on its own server."""
    postgres = EmbeddedPostgres(tmp_path / "pg")
    postgres.start()
    with psycopg.connect(postgres.url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE pin_cfg")
        # the embedded server runs with synchronous_commit=off: a hard stop would lose the prepared outbox row
        admin.execute("ALTER DATABASE pin_cfg SET synchronous_commit = on")
    url = postgres.url.rsplit("/", 1)[0] + "/pin_cfg"
    migrate(url)
    yield Server(postgres, url)
    postgres.destroy()


def wait_started(roles: dict[str, RoleProcess], timeout: float = 180.0) -> None:
    """Until every role wrote its first log line (or exited): on a loaded machine imports take many seconds,
    and the dependency must still be away when the role first reaches for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(r.process.poll() is not None or r.output().strip() for r in roles.values()):
            return
        time.sleep(0.3)


def down_lines(role: RoleProcess) -> int:
    """How many log lines of ``role`` say that its dependency is not there."""
    return sum(any(w in line.lower() for w in DOWN_WORDS) for line in role.output().splitlines())


def wait_down(roles: dict[str, RoleProcess]) -> None:
    """While the dependency is away: until every role exited or logged DOWN_TRIES failed tries, at most
    WAIT_DOWN seconds (a fixed WAIT_DOWN sleep cost 10 s three times; the roles retry within 1-3 s)."""
    deadline = time.monotonic() + WAIT_DOWN
    while time.monotonic() < deadline:
        if all(r.process.poll() is not None or down_lines(r) >= DOWN_TRIES for r in roles.values()):
            return
        time.sleep(0.3)


def role_env(database_url: str, bootstrap: str) -> dict[str, str]:
    """The environment of the roles under test."""
    return {
        "PIN_DATABASE_URL": database_url,
        "PIN_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
        "PIN_KAFKA_SESSION_TIMEOUT_MS": "6000",
        "PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": "1",
        "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": "1",
    }


def test_roles_started_while_the_database_is_down_wait_and_then_work(
    tmp_path: Path, server: Server, kafka: EmbeddedKafka
) -> None:
    """Relay, appointment-timeout, expire-promotions, catalog consumer and API outlive a database that is not
    there yet, log it, and work once it is."""
    settings = Settings.model_validate({"database_url": server.url, "kafka_bootstrap_servers": kafka.bootstrap_servers})
    ensure_topics(settings)
    message_id = insert_outbox_row(server.url)
    server.postgres.stop("immediate")
    env = role_env(server.url, kafka.bootstrap_servers)
    api_port = free_port()
    specs = {
        "relay": ["relay"],
        "appointment-timeout": ["worker", "appointment-timeout"],
        "expire-promotions": ["worker", "expire-promotions"],
        "consume-catalog": ["consume", "catalog"],
        "api": ["api", "--port", str(api_port)],
    }
    roles = {name: RoleProcess(args, env, tmp_path / f"{name}.log") for name, args in specs.items()}
    problems: list[str] = []
    try:
        wait_started(roles)
        wait_down(roles)
        for name, role in roles.items():
            code = role.process.poll()
            if code is not None:
                last = role.output().strip().splitlines()[-1:] or [""]
                problems.append(f"{name} exited with {code} while the database was down: {last[0][:300]}")
            elif not down_lines(role):
                problems.append(f"{name} is alive but logged nothing about the database being down")
        # the API logs its pool's failed tries before uvicorn has bound its port: wait for it to listen (its
        # liveness needs no database) before the request that must be a 503
        poll(lambda: httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=2).status_code == 200, timeout=60)
        if roles["api"].process.poll() is None:
            # a request while the database is away: 503 database-unavailable (retryable), never a 500
            bearer = mint_token(JWT_SECRET, user_id=uuid.uuid4(), tenant_id=uuid.uuid4(), roles=["agent"])
            try:
                # psycopg_pool waits its default 30 s for a connection before PoolTimeout (reported: long)
                answer = httpx.get(f"http://127.0.0.1:{api_port}/notifications", timeout=60,
                                   headers={"Authorization": f"Bearer {bearer}"})  # fmt: skip
                if answer.status_code != 503 or answer.json().get("code") != "database-unavailable":
                    problems.append(f"api answered {answer.status_code} while the database was down: {answer.text}")
            except httpx.HTTPError as exc:
                problems.append(f"api did not answer while the database was down: {exc!r}")
        server.postgres.start()
        checks: dict[str, Callable[[], bool]] = {
            "relay": lambda: any(
                r.json()["MessageId"] == message_id
                for r in read_topic(kafka.bootstrap_servers, topics.PURCHASE_CHANGED, expected=1, timeout=5)
            ),
            "appointment-timeout": lambda: _cycle_recorded(server.url, "appointment-timeout"),
            "expire-promotions": lambda: _cycle_recorded(server.url, "expire-promotions"),
            "consume-catalog": lambda: _in_inbox(server.url, "catalog", message_id),
            "api": lambda: httpx.get(f"http://127.0.0.1:{api_port}/readyz", timeout=2).status_code == 200,
        }
        for name, check in checks.items():
            if roles[name].process.poll() is not None:
                continue  # reported above
            if not poll(check, timeout=90):
                problems.append(f"{name} did not start working within 90 s after the database came up")
    finally:
        for role in roles.values():
            role.close()
    assert not problems, "\n".join(problems) + f"\nlogs in {tmp_path}"


def _cycle_recorded(url: str, job: str) -> bool:
    with connect(url) as conn:
        return conn.execute("SELECT 1 FROM jobs.cycle WHERE job = %s AND succeeded", (job,)).fetchone() is not None


def _in_inbox(url: str, group: str, message_id: str) -> bool:
    with connect(url) as conn:
        query = "SELECT 1 FROM messaging.inbox WHERE consumer_group = %s AND message_id = %s"
        return conn.execute(query, (group, message_id)).fetchone() is not None


def test_a_relay_and_a_consumer_started_while_the_broker_is_down_wait_and_then_work(
    tmp_path: Path, database_url: str
) -> None:
    """`pin relay` and `pin consume catalog` against a port with no broker: alive; once a broker listens there,
    the relay publishes and the consumer consumes (one missing broker for both: one wait, one broker start)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    env = role_env(database_url, bootstrap)
    specs = {"relay": ["relay"], "consume-catalog": ["consume", "catalog"]}
    roles = {name: RoleProcess(args, env, tmp_path / f"{name}.log") for name, args in specs.items()}
    broker = EmbeddedKafka(tmp_path / "broker.log", port=int(bootstrap.rsplit(":", 1)[1]))
    problems = []
    try:
        wait_started(roles)
        wait_down(roles)  # the relay logs nothing about a missing broker: for it this is the whole WAIT_DOWN
        for name, role in roles.items():
            code = role.process.poll()
            if code is not None:
                last = [line for line in role.output().splitlines() if line.strip()][-1:] or [""]
                problems.append(
                    f"`pin {' '.join(specs[name])}` exited with {code} while the broker was down: {last[0][:300]}"
                )
        broker.start()
        message_id = insert_outbox_row(database_url)
        (row,) = build_rows(
            *purchase_event().recorded(),
            occurred_at=datetime.now(UTC),
            context=MessageContext(str(uuid.uuid4())),
            policy=RELAY_POLICY,
        )
        ensure_topics(Settings.model_validate({"kafka_bootstrap_servers": bootstrap}))  # `pin topics`
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(
            row.topic,
            key=row.key,
            value=json.dumps(dict(row.payload)).encode(),
            headers=[("message-id", str(row.message_id)), ("event-type", row.event_type), ("contract-version", "1")],
        )
        assert producer.flush(30) == 0
        checks: dict[str, Callable[[], bool]] = {
            "relay": lambda: any(
                r.json()["MessageId"] == message_id
                for r in read_topic(bootstrap, topics.PURCHASE_CHANGED, expected=2, timeout=5)  # with the produced one
            ),
            "consume-catalog": lambda: _in_inbox(database_url, "catalog", str(row.message_id)),
        }
        for name, check in checks.items():
            if roles[name].process.poll() is None and not poll(check, timeout=90):
                problems.append(f"{name} did not do its work within 90 s after the broker came up")
    finally:
        for role in roles.values():
            role.close()
        broker.stop()
    assert not problems, "\n".join(problems) + f"\nlogs in {tmp_path}"
