"""The liveness probe on the metrics port: 200 while the role's loop beats, 503 once it stalls."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from pin.observability.liveness import Heartbeat
from pin.observability.metrics import start_metrics_server

pytestmark = pytest.mark.unit


class FakeClock:
    """A monotonic clock the test moves by hand (no sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test server
            return int(response.status), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture
def served() -> Iterator[tuple[str, Heartbeat, FakeClock, Counter]]:
    clock = FakeClock()
    beats = Heartbeat(max_silence_seconds=180, clock=clock)
    registry = CollectorRegistry()
    cycles = Counter("ops_test_cycles", "cycles of the test", registry=registry)
    server = start_metrics_server(0, registry=registry, beats=beats)
    try:
        yield f"http://127.0.0.1:{server.server_port}", beats, clock, cycles
    finally:
        server.shutdown()
        server.server_close()


def test_probe_follows_the_heartbeat(served: tuple[str, Heartbeat, FakeClock, Counter]) -> None:
    base, beats, clock, _ = served

    status, body = _get(f"{base}/healthz/liveness")
    assert status == 200
    assert json.loads(body)["status"] == "starting"

    beats.beat()
    clock.now += 179
    status, body = _get(f"{base}/healthz/liveness")
    assert (status, json.loads(body)["status"]) == (200, "alive")

    clock.now += 2  # 181 s without a beat: the loop is stuck
    status, body = _get(f"{base}/healthz/liveness")
    document = json.loads(body)
    assert (status, document["status"]) == (503, "stalled")
    assert document["secondsSinceBeat"] == pytest.approx(181)
    assert document["beats"] == 1

    beats.beat()  # it came back
    assert _get(f"{base}/healthz")[0] == 200


def test_metrics_are_served_beside_the_probe(served: tuple[str, Heartbeat, FakeClock, Counter]) -> None:
    base, _, _, cycles = served
    cycles.inc(3)
    status, body = _get(f"{base}/metrics")
    assert status == 200
    assert b"ops_test_cycles_total 3.0" in body


def test_the_allowed_silence_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Heartbeat().expect_beats_within(0)
