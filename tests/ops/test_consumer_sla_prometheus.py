"""A real Prometheus loads deploy/prometheus/*.rules.yml, scrapes real roles and raises ConsumerWaitingPastSla for a
stalled group and for a killed one, with the real SLAs (SLA_SECONDS: 60 s for crm and news), and stays silent while
the groups are healthy; it raises ConsumerWaitingUnchecked once no relay exports the signal. Minutes of real time:
only under `make test-deep`.

With ``PIN_TEST_RECORD_CONSUMER_SERIES=<file>`` it also writes the series Prometheus scraped (its /federate of
pin_consumer_*, with the job and instance labels it adds) to that file: deploy/prometheus/tests/recorded/ keeps such
a recording, which the promtool tests' input series are checked against (tests/ops/test_consumer_waits_rules.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pin.calendar.contracts import AppointmentCancelledEvent
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.lifetime import die_with_parent
from pin.local.tcp_ports import free_port
from pin.messaging.groups import SLA_SECONDS
from pin.messaging.kafka import ensure_topics
from pin.outbox.writer import RELAY_POLICY, MessageContext, build_rows, outbox_insert
from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.settings import Settings
from tests.consumers.support import cancelled, purchase
from tests.ops.rulefiles import PROMETHEUS
from tests.outbox.support import RELAY_TEST_ENV
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.deep(only=True), pytest.mark.timeout(900)]

RECORD_VARIABLE = "PIN_TEST_RECORD_CONSUMER_SERIES"
# the roles' refresh and the server's scrape and evaluation: short, so that the real SLA dominates the timings
PROMETHEUS_CONFIG = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: {rules}
scrape_configs:
  - job_name: pin-relay
    static_configs:
      - targets: ["127.0.0.1:{relay}"]
  - job_name: pin-consumers
    static_configs:
      - targets: {consumers}
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test process
        return json.loads(response.read())


class Prometheus:
    """A Prometheus server (Debian's package) on a free port, with its own data folder."""

    def __init__(self, folder: Path, relay_port: int, consumer_ports: list[int]) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is missing: scripts/test-tools installs Debian's package prometheus"
        rules = sorted(str(path) for path in PROMETHEUS.glob("*.rules.yml"))
        config = folder / "prometheus.yml"
        config.write_text(
            PROMETHEUS_CONFIG.format(
                rules=json.dumps(rules),
                relay=relay_port,
                consumers=json.dumps([f"127.0.0.1:{port}" for port in consumer_ports]),
            )
        )
        self.port = free_port()
        self._log = (folder / "prometheus.log").open("ab")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(signal.SIGKILL),  # noqa: PLW1509 - one prctl before the exec
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the server answers its readiness probe."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2):
                    return
            except OSError:
                assert time.monotonic() < deadline, "Prometheus did not get ready"
                assert self.process.poll() is None, "Prometheus exited"
                time.sleep(0.2)

    def api(self, path: str) -> Any:
        """The ``data`` of one API answer."""
        answer = _get(f"http://127.0.0.1:{self.port}/api/v1/{path}")
        assert answer["status"] == "success", answer
        return answer["data"]

    def firing(self, alert: str) -> set[str]:
        """The groups (or "" for an alert without one) ``alert`` is firing for."""
        return {
            a["labels"].get("group", "")
            for a in self.api("alerts")["alerts"]
            if a["labels"]["alertname"] == alert and a["state"] == "firing"
        }

    def value(self, query: str) -> dict[str, float]:
        """An instant query's result by its group label."""
        result = self.api(f"query?query={urllib.parse.quote(query)}")["result"]
        return {r["metric"].get("group", ""): float(r["value"][1]) for r in result}

    def federate(self, match: str) -> str:
        """The series matching ``match`` as this server stores them (exposition text)."""
        url = f"http://127.0.0.1:{self.port}/federate?match[]={urllib.parse.quote(match)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            text: str = response.read().decode()
        return text

    def close(self) -> None:
        """Stop the server."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


@pytest.fixture
def prometheus_folder(tmp_path: Path) -> Path:
    """A folder for the server's configuration, data and log."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    return folder


def _publish(database_url: str) -> None:
    """One event for crm (and notifications) and one for catalog and news, through the outbox, as a use case would."""
    now = datetime.now(UTC)
    context = MessageContext("consumer-sla-test")
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    bought = purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[("Project", uuid.uuid4())])
    written = {"occurred_at": now, "context": context, "policy": RELAY_POLICY}
    rows = [
        *build_rows(AppointmentCancelledEvent, event["AppointmentId"], event, **written),  # type: ignore[arg-type]
        *build_rows(PromotionPurchaseChangedKafkaEvent, bought["PurchaseId"], bought, **written),  # type: ignore[arg-type]
    ]
    with psycopg.connect(database_url) as conn:
        outbox_insert(conn, rows)  # type: ignore[arg-type]


def _until(condition: Callable[[], bool], timeout: float, what: str, *, tick: Callable[[], None]) -> float:
    """Call ``tick`` every 2 s until ``condition`` holds; the seconds it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out after {timeout} s waiting for {what}"
        tick()
        time.sleep(2.0)
    return time.monotonic() - started


def test_a_stalled_and_a_killed_group_are_alerted_within_their_sla_and_a_healthy_one_never(
    kafka: EmbeddedKafka,
    database_url: str,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
    prometheus_folder: Path,
) -> None:
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    ensure_topics(settings)
    common = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    relay_port = free_port()
    relay = spawn_role(
        "relay",
        env={**common, **RELAY_TEST_ENV, "PIN_METRICS_PORT": str(relay_port), "PIN_RELAY_GAUGE_REFRESH_SECONDS": "1"},
    )
    ports = {group: free_port() for group in ("crm", "news", "catalog")}  # notifications is never deployed
    consumers = {
        # a statement blocked on a held lock ends after 2 s and is retried: crm stalls, alive, without moving on
        group: spawn_role(
            "consume", group, env={**common, "PIN_METRICS_PORT": str(port), "PIN_CONSUMER_STATEMENT_TIMEOUT_MS": "2000"}
        )
        for group, port in ports.items()
    }
    server = Prometheus(prometheus_folder, relay_port, list(ports.values()))
    try:
        server.wait_ready()
        publish = lambda: _publish(database_url)  # noqa: E731 - the tick of every wait below

        # healthy: every group applies what is published; nothing fires over more than one SLA of traffic
        _until(
            lambda: (
                set(server.value("max by (group) (pin_consumer_sla_seconds)")) == set(SLA_SECONDS)
                and server.value("sum(up)") == {"": 4.0}
            ),
            120,
            "Prometheus scraping the relay and the three consumers",
            tick=publish,
        )
        healthy_until = time.monotonic() + max(SLA_SECONDS[g] for g in ports) + 15
        while time.monotonic() < healthy_until:
            publish()
            assert server.firing("ConsumerWaitingPastSla") <= {"notifications"}, "a healthy group was alerted"
            assert not server.firing("ConsumerWaitingUnchecked")
            time.sleep(2.0)
        applied = server.value("max by (group) (max_over_time(pin_consumer_oldest_waiting_seconds[30s]))")
        assert all(applied[g] < SLA_SECONDS[g] for g in ports), applied
        never = server.value('sum by (group) (pin_consumer_waiting_messages{group="notifications"})')
        assert never["notifications"] > 0  # never deployed: everything waits for it

        # crm stalls (alive, retrying: a lock on its table), news dies (kill -9); catalog stays healthy
        with psycopg.connect(database_url) as holder:
            holder.execute("LOCK TABLE crm.lead_feed_entry IN ACCESS EXCLUSIVE MODE")
            consumers["news"].kill9()
            first_waiting = time.monotonic()
            publish()
            took = _until(
                lambda: {"crm", "news"} <= server.firing("ConsumerWaitingPastSla"),
                SLA_SECONDS["crm"] + 120,
                "ConsumerWaitingPastSla for the stalled crm and the killed news",
                tick=lambda: (publish(), _healthy_catalog(server)),
            )
            crm_alive = consumers["crm"].process.poll() is None
            if os.environ.get(RECORD_VARIABLE):
                Path(os.environ[RECORD_VARIABLE]).write_text(server.federate('{__name__=~"pin_consumer_.*|up"}'))
            holder.rollback()
        print(f"ConsumerWaitingPastSla fired {took:.0f} s after the first waiting message (SLA 60 s)")
        assert crm_alive
        assert SLA_SECONDS["crm"] <= time.monotonic() - first_waiting
        assert "catalog" not in server.firing("ConsumerWaitingPastSla")

        # crm applies again once the lock is gone: its alert clears
        _until(
            lambda: "crm" not in server.firing("ConsumerWaitingPastSla"),
            60,
            "crm's alert to clear once it applies again",
            tick=publish,
        )

        # no relay exports the signal: that is alerted too
        relay.kill9()
        _until(
            lambda: server.firing("ConsumerWaitingUnchecked") == {""},
            180,
            "ConsumerWaitingUnchecked once no relay runs",
            tick=lambda: None,
        )
    finally:
        server.close()


def _healthy_catalog(server: Prometheus) -> None:
    assert "catalog" not in server.firing("ConsumerWaitingPastSla"), "the healthy catalog was alerted"
