"""A worker process serves the seeds' metrics with the right values, and its liveness probe, on PIN_METRICS_PORT;
`pin status` shows its backlog draining."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn, database_now
from pin.settings import Settings
from pin.status import collect_status
from tests.promotion.support import db_now, seed_purchases
from tests.support.processes import RoleProcess

# Starlette 1.x warns at import when its test client runs on httpx rather than httpx2 (not a dependency here).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test process
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the process's /metrics, by (name, labels)."""
    status, text = _get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def wait_for(condition: Callable[[], bool], timeout: float, what: str, process: RoleProcess) -> None:
    """Poll until the condition holds (no fixed sleeps); fail with the process's output otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, AssertionError):
            pass  # not listening yet
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}\n{process.output()[-3000:]}")


@pytest.mark.integration
def test_expire_promotions_process_exports_the_seed_metrics_after_real_cycles(
    pool: ConnectionPool[Conn],
    spawn_role: Callable[..., RoleProcess],
    make_settings: Callable[..., Settings],
) -> None:
    now = db_now(pool)
    seed_purchases(pool, 7, ends_at=now - timedelta(minutes=5))
    seed_purchases(pool, 1, ends_at=now + timedelta(hours=3))  # not due
    settings = make_settings()

    def promotion_status() -> dict[str, object]:
        report = collect_status(settings, kafka=False)
        worker: dict[str, object] = next(w for w in report["workers"] if w["job"] == "expire-promotions")
        return worker

    assert promotion_status()["backlog"]["backlog"] == 7  # type: ignore[index]

    port = _free_port()
    started = time.time()
    worker = spawn_role(
        "worker",
        "expire-promotions",
        env={
            "PIN_METRICS_PORT": str(port),
            "PIN_EXPIRE_PROMOTIONS_BATCH_SIZE": "3",  # 7 due: full batches of 3, 3, then 1
            "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": "90",
            "PIN_RELAY_GAUGE_REFRESH_SECONDS": "0.2",  # the outbox gauges the worker serves too
        },
    )
    topic = frozenset({("topic", "pin.promotion.purchase-changed.v1")})

    def waiting() -> int:
        with pool.connection() as conn:
            row = conn.execute("SELECT count(*) AS n FROM outbox.message WHERE topic = %s", (dict(topic)["topic"],))
            return int(row.fetchone()["n"])  # type: ignore[index]

    def drained() -> bool:
        samples = scrape(port)
        return (
            samples.get(("promotion_expire_items_total", frozenset({("outcome", "expired")}))) == 7
            and samples.get(("promotion_expire_backlog", frozenset())) == 0
            and samples.get(("pin_outbox_backlog", topic)) == waiting()
            and ("pin_db_health_last_refresh_timestamp_seconds", frozenset()) in samples
        )

    wait_for(drained, 60, "7 expired purchases in /metrics", worker)
    samples = scrape(port)

    def value(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        assert key in samples, f"{name}{labels} is not exported"
        return samples[key]

    runs = value("promotion_expire_run_total")
    assert runs >= 3  # two full batches looped at once, then the last one
    assert value("promotion_expire_cycle_duration_seconds_count") >= runs
    assert value("promotion_expire_errors_total") == 0
    assert value("promotion_expire_skip_locked_total") == 0
    assert value("promotion_expire_poison_items") == 0
    assert value("promotion_expire_interval_seconds") == 90  # the liveness alert's unit: the configured interval
    assert started - 5 <= value("promotion_expire_last_success_timestamp_seconds") <= time.time() + 5
    # no relay runs: the expiry events wait in the outbox, and the worker serves the outbox gauges itself, so the
    # backlog and lag alerts see them
    assert value("pin_outbox_backlog", topic="pin.promotion.purchase-changed.v1") == waiting() >= 7
    assert value("pin_outbox_lag_seconds", topic="pin.promotion.purchase-changed.v1") > 0
    assert value("pin_outbox_backlog", topic="pin.calendar.appointment-cancelled.v1") == 0
    assert value("pin_outbox_dead_letters") == 0
    # the database's health, refreshed by the worker on its own interval (docs/runbooks/database-health.md)
    assert started - 5 <= value("pin_db_health_last_refresh_timestamp_seconds") <= time.time() + 5
    assert value("pin_db_table_live_tuples", table="promotion.purchase") >= 0
    assert value("pin_db_index_size_bytes", index="promotion.ix_purchase_active_ends_at") > 0

    status, body = _get(f"http://127.0.0.1:{port}/healthz/liveness")
    assert status == 200, body
    assert json.loads(body)["status"] == "alive"

    after = promotion_status()
    assert after["backlog"]["backlog"] == 0  # type: ignore[index]
    (instance,) = after["instances"]  # type: ignore[misc]
    assert instance["succeeded"] is True
    assert worker.terminate() == 0


def _book_pending(
    client: TestClient, tenant: uuid.UUID, token: Callable[..., str], start_at: datetime, lead_minutes: int
) -> str:
    """A slot of a new agent, booked by a new investor of the tenant: a Pending appointment's id."""
    agent = {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'agent')}"}
    investor = {"Authorization": f"Bearer {token(uuid.uuid4(), tenant, 'investor')}"}
    body = {
        "startAt": start_at.isoformat(),
        "endAt": (start_at + timedelta(hours=1)).isoformat(),
        "timeZone": "Europe/Moscow",
        "kind": "Consultation",
        "minLeadTimeMinutes": lead_minutes,
        "autoConfirm": False,
    }
    slot = client.post("/calendar/slots", headers=agent, json=body)
    assert slot.status_code == 201, slot.text
    booked = client.post(f"/calendar/slots/{slot.json()['id']}/book", headers=investor)
    assert booked.status_code == 201, booked.text
    assert booked.json()["status"] == "Pending"
    appointment_id: str = booked.json()["id"]
    return appointment_id


@pytest.mark.integration
def test_appointment_timeout_process_exports_the_seed_metrics_after_real_cycles(
    pool: ConnectionPool[Conn],
    spawn_role: Callable[..., RoleProcess],
    make_settings: Callable[..., Settings],
    token: Callable[..., str],
) -> None:
    settings = make_settings(appointment_pending_ttl_seconds=2)  # Pending for two seconds only
    client = TestClient(build_app(settings, pool), raise_server_exceptions=False)
    tenant = uuid.uuid4()
    with pool.connection() as conn:
        now = database_now(conn)
    # three slots far ahead: released when their appointment expires; one whose lead time ends with the
    # appointment's PendingExpiresAt: too late to sell again, so the slot expires too (INV-SLT-5)
    for day in (2, 3, 4):
        _book_pending(client, tenant, token, now + timedelta(days=day), 60)
    _book_pending(client, tenant, token, now + timedelta(minutes=60, seconds=2), 60)

    def timeout_status() -> dict[str, Any]:
        report = collect_status(settings, kafka=False)
        worker: dict[str, Any] = next(w for w in report["workers"] if w["job"] == "appointment-timeout")
        return worker

    deadline = time.monotonic() + 30
    while timeout_status()["backlog"]["backlog"] < 4:  # their PendingExpiresAt passes (a deadline, not a loop)
        assert time.monotonic() < deadline, timeout_status()
        time.sleep(0.2)

    port = _free_port()
    started = time.time()
    worker = spawn_role(
        "worker", "appointment-timeout", env={"PIN_METRICS_PORT": str(port), "PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE": "3"}
    )
    released = ("calendar_appointment_timeout_items_total", frozenset({("slot_outcome", "released")}))
    expired = ("calendar_appointment_timeout_items_total", frozenset({("slot_outcome", "expired")}))

    def drained() -> bool:
        samples = scrape(port)
        return (
            samples.get(released) == 3
            and samples.get(expired) == 1
            and samples.get(("calendar_appointment_timeout_backlog", frozenset())) == 0
        )

    wait_for(drained, 60, "4 expired appointments in /metrics", worker)
    samples = scrape(port)
    assert samples[("calendar_appointment_timeout_cycle_duration_seconds_count", frozenset())] >= 2  # 3 + 1
    assert samples[("calendar_appointment_timeout_errors_total", frozenset())] == 0
    assert samples[("calendar_appointment_timeout_skip_locked_total", frozenset())] == 0
    assert samples[("calendar_appointment_timeout_poison_items", frozenset())] == 0
    last_success = samples[("calendar_appointment_timeout_last_success_timestamp_seconds", frozenset())]
    assert started - 5 <= last_success <= time.time() + 5

    status, body = _get(f"http://127.0.0.1:{port}/healthz/liveness")
    assert status == 200, body
    assert json.loads(body)["status"] == "alive"

    after = timeout_status()
    assert after["backlog"]["backlog"] == 0
    assert after["instances"][0]["succeeded"] is True
    assert worker.terminate() == 0
