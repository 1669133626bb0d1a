"""A test run that is killed (a CI time limit, a closed terminal, `kill -9` of pytest) leaves nothing running: the
xdist workers, the session's embedded PostgreSQL, the brokers and the role processes all end with it
(pin.local.embedded.lifetime: the kernel's parent-death signal, the mechanism `pin up` uses for its own children)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
@pytest.mark.parametrize(
    ("workers", "kill"),
    [
        # one pytest process, killed: its server, broker and role have no one left to stop them
        (["-p", "no:xdist"], "pytest"),
        # the controller and its workers killed at once (a closed terminal's SIGHUP, a CI job's kill of its group)
        (["-n", "1"], "process group"),
    ],
)
def test_kill_9_of_pytest_leaves_no_server_broker_or_role_running(
    tmp_path: Path, workers: list[str], kill: str
) -> None:
    marker = tmp_path / "started.json"
    env = {k: v for k, v in os.environ.items() if k != "PIN_TEST_DATABASE_URL"}  # the embedded server, as on CI
    env["PIN_TEST_INTERRUPTED_MARKER"] = str(marker)
    log = tmp_path / "inner.log"
    with log.open("wb") as out:
        inner = subprocess.Popen(
            [
                *(sys.executable, "-m", "pytest", "tests/support/interrupted_run.py", *workers),
                *("-p", "no:cacheprovider", "-q", "--basetemp", str(tmp_path / "inner")),
            ],
            cwd=REPOSITORY,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, to kill as a terminal or a CI runner would
        )
    everything: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert inner.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        started = json.loads(marker.read_text())
        descendants = psutil.Process(inner.pid).children(recursive=True)
        assert {started["role"], started["broker"]} <= {p.pid for p in descendants}
        postgres = psutil.Process(started["postgres"])  # a daemon's child or ours: its parent is not asked
        everything = [*descendants, postgres, *postgres.children(recursive=True)]
        if kill == "pytest":
            inner.send_signal(signal.SIGKILL)
        else:
            os.killpg(inner.pid, signal.SIGKILL)
        inner.wait(10)
        _, alive = psutil.wait_procs(everything, timeout=15)
        left = {p.pid: " ".join(p.cmdline())[:80] for p in alive if p.is_running() and p.status() != "zombie"}
        assert not left, f"still running 15 s after: {left}"
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(10)
        for process in everything:  # a failed run: only what this test started, and only if still running
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
