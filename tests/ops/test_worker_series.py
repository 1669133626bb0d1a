"""A worker exports the outbox table's gauges (the outbox alerts must see a backlog while no relay runs) but none
of the relay's own series: a worker's `pin_outbox_owned_vparts 0` listed every worker among the relays."""

from __future__ import annotations

import contextlib
import time
import urllib.request
from pathlib import Path

import pytest

from pin.local.tcp_ports import free_port
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration]

RELAY_ONLY = (
    "pin_outbox_owned_vparts",
    "pin_outbox_published_total",
    "pin_outbox_publish_errors_total",
    "pin_outbox_dead_lettered_total",
    "pin_outbox_publish_latency_seconds",
    "pin_outbox_give_ups_total",
)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        return response.read().decode()


def test_a_worker_exports_the_outbox_gauges_and_none_of_the_relays_series(tmp_path: Path, database_url: str) -> None:
    port = free_port()
    env = {"PIN_DATABASE_URL": database_url, "PIN_METRICS_PORT": str(port), "PIN_LOG_FORMAT": "json"}
    worker = RoleProcess(["worker", "expire-promotions"], env, tmp_path / "worker.log")
    text = ""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and "pin_outbox_dead_letters " not in text:
            with contextlib.suppress(OSError):
                text = _scrape(port)
            time.sleep(0.3)
    finally:
        worker.close()
    assert "pin_outbox_dead_letters " in text, (tmp_path / "worker.log").read_text()[-2000:]
    assert "pin_outbox_backlog" in text
    exported = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if not line.startswith("#")}
    shown = sorted(name for name in RELAY_ONLY if any(metric.startswith(name) for metric in exported))
    assert not shown, f"a worker exports the relay's {shown}"
