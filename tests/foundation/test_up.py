"""`pin up`: starts everything embedded, serves the API, and stops with no orphan process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from pin.embedded.postgres import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback URL we built
        return response.status, response.read()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_pin_up_starts_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    env["PIN_HOME"] = str(tmp_path / "state")
    log = (tmp_path / "up.log").open("wb")
    up = subprocess.Popen(
        [sys.executable, "-m", "pin", "up", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert up.poll() is None, (tmp_path / "up.log").read_text()
            try:
                status, body = _get(f"http://127.0.0.1:{port}/readyz")
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "up.log").read_text()
            time.sleep(0.3)
        assert body == b'{"status":"ready"}'
        banner = (tmp_path / "up.log").read_text()
        assert f"http://127.0.0.1:{port}" in banner
        assert "embedded, data in" in banner
        assert "broker" in banner
        children = _descendants(up.pid)
        assert children, "pin up runs its roles as child processes"
        postgres_pid = int((tmp_path / "state" / "postgres" / "postmaster.pid").read_text().split()[0])

        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0
        time.sleep(0.5)
        alive = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"orphans: {alive}"
        assert not psutil.pid_exists(postgres_pid) or psutil.Process(postgres_pid).status() == psutil.STATUS_ZOMBIE
        assert "pin up: stopped" in (tmp_path / "up.log").read_text()
    finally:
        if up.poll() is None:
            up.kill()
        log.close()
