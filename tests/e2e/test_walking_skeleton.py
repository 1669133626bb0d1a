"""The walking skeleton, end to end over real processes: an HTTP call changes rows and writes outbox rows
in one transaction, `pin relay` publishes them, the topic holds the contract, and a consumer acts on it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.tcp_ports import free_port
from pin.messaging import topics
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _http(base: str, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - a loopback URL we built
        f"{base}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/readyz", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def test_a_declined_appointment_travels_from_http_to_the_topic_and_the_consumer(
    kafka: EmbeddedKafka,
    database_url: str,
    spawn_role: Callable[..., RoleProcess],
    token: Callable[..., str],
) -> None:
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    ensure_topics(Settings.model_validate({"kafka_bootstrap_servers": kafka.bootstrap_servers}))  # `pin topics`
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = spawn_role("api", "--port", str(port), env=env)
    relay = spawn_role("relay", env=env)
    notifications = spawn_role("consume", "notifications", env=env)
    _wait(lambda: _ready(base), 90, f"pin api to be ready: {api.output()[-2000:]}")

    tenant, agent_id, investor_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent, investor = token(agent_id, tenant, "agent"), token(investor_id, tenant, "investor")
    start = datetime.now(UTC) + timedelta(days=2)
    status, slot = _http(
        base,
        agent,
        "POST",
        "/calendar/slots",
        {
            "startAt": start.isoformat(),
            "endAt": (start + timedelta(hours=1)).isoformat(),
            "timeZone": "Europe/Moscow",
            "kind": "Consultation",
            "minLeadTimeMinutes": 60,
            "autoConfirm": False,
        },
    )
    assert status == 201, slot
    status, appointment = _http(base, investor, "POST", f"/calendar/slots/{slot['id']}/book")
    assert status == 201, appointment
    assert appointment["status"] == "Pending"
    status, declined = _http(
        base,
        agent,
        "POST",
        f"/calendar/appointments/{appointment['id']}/decline",
        {"reason": "the agent is ill (free text that must never leave calendar)"},
    )
    assert status == 200, declined
    assert declined["status"] == "Declined"

    # the relay publishes the committed rows and deletes them
    def outbox_is_empty() -> bool:
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM outbox.message").fetchone()
            return row is not None and row[0] == 0

    _wait(outbox_is_empty, 60, f"the relay to drain the outbox: {relay.output()[-2000:]}")
    [record] = read_topic(kafka.bootstrap_servers, topics.APPOINTMENT_CANCELLED, expected=1)
    event = record.json()
    assert record.key == appointment["id"]
    assert event["AppointmentId"] == appointment["id"]
    assert event["Reason"] == "DeclinedByAgent"
    assert event["CancelledBy"] is None
    assert event["ContractVersion"] == 1
    assert record.headers["message-id"] == event["MessageId"]
    assert record.headers["event-type"] == "pin.calendar.appointment-cancelled"
    assert record.headers["contract-version"] == "1"
    assert "traceparent" in record.headers
    assert "free text" not in record.value.decode()

    # the notifications consumer tells the investor, and only the investor
    def investor_notified() -> bool:
        _, body = _http(base, investor, "GET", "/notifications")
        return any(item["kind"] == "AppointmentCancelled" for item in body["items"])

    _wait(investor_notified, 90, f"the investor's notification: {notifications.output()[-2000:]}")
    _, agent_inbox = _http(base, agent, "GET", "/notifications")
    assert not [item for item in agent_inbox["items"] if item["kind"] == "AppointmentCancelled"]
    for role in (notifications, relay, api):
        assert role.terminate(30) == 0, role.output()[-2000:]
