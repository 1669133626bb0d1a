"""Jepsen-style soak: a workload over the HTTP API, a fault schedule (kill -9 of random roles every few seconds,
PostgreSQL crashes, a frozen broker, a role started while the database is down), a quiet period to drain, then
the checker over the final history. Short mode (about 3 minutes) in the normal suite; ``--soak-long`` runs at
least 15 minutes of faults. The evidence (logs, topics, tables, summary.json) stays in the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

from tests.soak.checker import check, drain
from tests.soak.harness import Cluster, SoakNetwork, role_specs
from tests.soak.workload import History, Workload

pytestmark = [pytest.mark.slow, pytest.mark.integration]


class FaultSchedule:
    """The nemesis: kill -9 of a random role every few seconds, plus one round of bigger faults per period."""

    def __init__(
        self, cluster: Cluster, rng: random.Random, *, kill_every: tuple[float, float], api_weight: float
    ) -> None:
        self.cluster = cluster
        self.api_weight = api_weight
        self.rng = rng
        self.kill_every = kill_every
        self._stop = threading.Event()
        self._killer = threading.Thread(target=self._kill_loop, name="soak-nemesis-kill", daemon=True)
        self._cutter = threading.Thread(target=self._cut_loop, name="soak-nemesis-cut", daemon=True)

    def start(self) -> None:
        """Start the kill loop and, where namespaces can be made, the link-cut loop."""
        self._killer.start()
        if self.cluster.network.namespaces:
            self._cutter.start()

    def stop(self) -> None:
        """Stop the kill and link-cut loops (a cut in progress ends first)."""
        self._stop.set()
        self._killer.join(30)
        if self._cutter.is_alive():
            self._cutter.join(90)

    def _kill_loop(self) -> None:
        while not self._stop.wait(self.rng.uniform(*self.kill_every)):
            self.cluster.kill9_random(self.rng, api_weight=self.api_weight)

    def _cut_loop(self) -> None:
        """Links of random roles cut for random 5-60 s spans (packets dropped silently), a few seconds apart."""
        rng = random.Random(self.rng.random())  # its own stream: the kill loop's thread draws from the other
        names = sorted(self.cluster.network.namespaces)
        while not self._stop.wait(rng.uniform(3.0, 10.0)):
            self.cluster.cut_link(rng.choice(names), rng.uniform(5.0, 60.0))

    def round_of_big_faults(self, until: float) -> None:
        """Broker frozen 20 s; PostgreSQL down with a role started meanwhile; an immediate PostgreSQL restart."""
        self._sleep(until, 10)
        with self.cluster.broker_paused():
            self._sleep(until, 20, at_least=True)
        self._sleep(until, 10)
        with self.cluster.database_down():
            time.sleep(1)
            # a role (re)started while the database is down: it must wait for it, not give up
            name = self.rng.choice([n for n in self.cluster.role_names() if n.startswith(("relay", "appointment"))])
            self.cluster.kill9(name)
            time.sleep(5)
        self._sleep(until, 12)
        self.cluster.restart_database()
        self._sleep(until, 10)

    def _sleep(self, until: float, seconds: float, *, at_least: bool = False) -> None:
        time.sleep(seconds if at_least else max(0.0, min(seconds, until - time.monotonic())))


# Seconds of faults: `make soak` 15.5 minutes, `make test-deep` 75 s (the soak is not part of `make test`: 2-3 minutes
# of a whole cluster on 2 cores, for faults the cheaper tests of each role inject one by one). One round of the big
# faults (broker paused 20 s, PostgreSQL down, an immediate restart) always runs whole; the longer mode repeats them.
SOAK_FAULT_SECONDS = {"long": 15 * 60 + 30, "deep": 75}


@pytest.mark.timeout(3600)
@pytest.mark.deep(only=True)
def test_soak(tmp_path: Path, soak_long: bool) -> None:
    """No due item left, nothing lost or doubled, every effect once, no double booking, boosts add up."""
    mode = "long" if soak_long else "deep"
    fault_seconds = float(os.environ.get("PIN_SOAK_FAULT_SECONDS") or SOAK_FAULT_SECONDS[mode])
    seed = int(time.time())
    rng = random.Random(seed)
    network = SoakNetwork()
    no_cuts = network.open()
    cluster = Cluster(tmp_path / "cluster", network)
    history = History()
    evidence = tmp_path / "evidence"
    print(f"\nsoak: seed {seed}, evidence and logs in {tmp_path}")
    if no_cuts is not None:
        print(f"soak: no link-cut fault: cannot create network namespaces ({no_cuts})")
    cluster.start(role_specs())
    workload = Workload(cluster.base_url, history, seed=seed)
    # only the long mode restarts the API (a restart costs the workload most of a short run on a loaded machine)
    nemesis = FaultSchedule(cluster, rng, kill_every=(2.0, 5.0), api_weight=0.2 if soak_long else 0.0)
    try:
        workload.start()
        workload.wait_warm(timeout=120)  # every kind of record exists before the first fault
        nemesis.start()
        until = time.monotonic() + fault_seconds
        while time.monotonic() < until:
            nemesis.round_of_big_faults(until)
        nemesis.stop()
        workload.stop()
        cluster.event("faults over; quiet period")
        drained = drain(cluster.database_url, cluster.kafka.bootstrap_servers, timeout=420 if soak_long else 240)
        summary = check(cluster.database_url, cluster.kafka.bootstrap_servers, history, evidence)
    finally:
        nemesis.stop()
        workload.stop()
        (tmp_path / "events.json").write_text(json.dumps(cluster.events))
        restarts = cluster.restarts()
        unexpected = cluster.unexpected_exits()
        cluster.stop()
        network.close()
    summary["run"] = {
        "seed": seed,
        "fault_seconds": fault_seconds,
        "kills": len(cluster.kills),
        "link_cuts": sum(1 for _, text in cluster.events if text.startswith("link of") and "cut for" in text),
        "restarts": restarts,
        "exits_other_than_kill9": unexpected,
        "drain": drained,
        "ops": dict(sorted(history.ops.items())),
        "evidence": str(evidence),
    }
    (evidence / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    print(f"soak: summary at {evidence / 'summary.json'}")
    assert summary["counts"]["appointments"].get("Expired", 0) > 0, "no appointment came due: the soak tested nothing"
    assert summary["counts"]["purchases"].get("Expired", 0) > 0, "no purchase came due: the soak tested nothing"
    assert summary["ok"], f"violations (evidence in {evidence}): {json.dumps(summary['violations'], default=str)}"
