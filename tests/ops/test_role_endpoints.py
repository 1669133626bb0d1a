"""A worker process serves the seeds' metrics with the right values, and its liveness probe, on PIN_METRICS_PORT;
`pin status` shows its backlog draining."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg_pool import ConnectionPool

from pin.settings import Settings
from pin.status import collect_status
from pin.unit_of_work import Conn
from tests.promotion.support import db_now, seed_purchases
from tests.support.processes import RoleProcess


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
            "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": "60",
        },
    )

    def drained() -> bool:
        samples = scrape(port)
        return (
            samples.get(("promotion_expire_items_total", frozenset({("outcome", "expired")}))) == 7
            and samples.get(("promotion_expire_backlog", frozenset())) == 0
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
    assert started - 5 <= value("promotion_expire_last_success_timestamp_seconds") <= time.time() + 5
    # the relay is not running: the activation and expiry events wait in the outbox, and no relay gauge is here
    assert ("pin_outbox_backlog", frozenset({("topic", "pin.promotion.purchase-changed.v1")})) not in samples

    status, body = _get(f"http://127.0.0.1:{port}/healthz/liveness")
    assert status == 200, body
    assert json.loads(body)["status"] == "alive"

    after = promotion_status()
    assert after["backlog"]["backlog"] == 0  # type: ignore[index]
    (instance,) = after["instances"]  # type: ignore[misc]
    assert instance["succeeded"] is True
    assert worker.terminate() == 0
