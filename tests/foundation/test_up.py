"""`pin up`: checks before it starts, starts everything embedded, serves the API, tells the other commands run in
its folder where everything is, and stops with no orphan process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jwt
import psutil
import pytest

from pin.local import state_folder
from pin.local.embedded.lifetime import die_with_parent
from pin.local.embedded.postgres import EmbeddedPostgres
from pin.local.state_folder import UP_ENDPOINTS_FILE, UP_LOCK_FILE
from pin.local.tcp_ports import free_port
from pin.local.up import EMBEDDED_BROKER_FETCH_WAIT_MS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback URL we built
        return response.status, response.read()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _bare_env() -> dict[str, str]:
    """The environment of a newcomer: no PIN_* variable at all."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}


def _pin(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pin", *args],
        cwd=cwd,
        env=env or _bare_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _start_up(folder: Path, port: int, log_name: str) -> subprocess.Popen[bytes]:
    """`pin up` in ``folder`` with nothing configured, returned once its API is ready and its endpoints written."""
    log = folder / log_name
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "pin", "up", "--port", str(port)],
            cwd=folder,
            env=_bare_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(signal.SIGTERM),  # noqa: PLW1509 - a killed test run stops it too
        )
    deadline = time.monotonic() + 90
    while True:
        assert up.poll() is None, log.read_text()
        try:
            if _get(f"http://127.0.0.1:{port}/readyz")[0] == 200 and (folder / ".pin" / UP_ENDPOINTS_FILE).exists():
                return up
        except OSError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)


def test_pin_up_starts_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    # run in its folder with nothing configured: the state folder is ./.pin
    up = _start_up(tmp_path, port, "up.log")
    home = tmp_path / ".pin"
    try:
        assert _get(f"http://127.0.0.1:{port}/readyz")[1] == b'{"status":"ready"}'
        banner = (tmp_path / "up.log").read_text()
        assert f"http://127.0.0.1:{port}" in banner
        assert "embedded, data in" in banner
        assert "broker" in banner
        children = _descendants(up.pid)
        assert children, "pin up runs its roles as child processes"
        # the embedded broker's cost grows with what it holds: its consumers fetch with the longer wait
        consumers = [child for child in children if "consume" in child.cmdline()]
        assert len(consumers) == 4
        waits = {child.environ().get("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS") for child in consumers}
        assert waits == {str(EMBEDDED_BROKER_FETCH_WAIT_MS)}
        postgres_pid = int((home / "postgres" / "postmaster.pid").read_text().split()[0])

        _the_other_commands_find_this_pin_up(tmp_path, up.pid, port)

        up.send_signal(signal.SIGTERM)
        assert up.wait(60) == 0
        # pin up waited for each child before it exited: anything still running now is an orphan
        _, alive = psutil.wait_procs(children, timeout=5)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], f"orphans: {alive}"
        assert not psutil.pid_exists(postgres_pid) or psutil.Process(postgres_pid).status() == psutil.STATUS_ZOMBIE
        assert "pin up: stopped" in (tmp_path / "up.log").read_text()
        assert not (home / UP_ENDPOINTS_FILE).exists()
        after = _pin("status", "--json", "--no-kafka", cwd=tmp_path)  # no pin up any more: nothing to report on
        assert after.returncode == 2, after.stdout + after.stderr
        assert "start `pin up`" in after.stderr
    finally:
        if up.poll() is None:  # a failed assertion: stop it the way a user does, so that it leaves no orphan
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                up.kill()


def _the_other_commands_find_this_pin_up(folder: Path, pid: int, port: int) -> None:
    """pin status, dlq, outbox and token, run in the folder with no PIN_* variable, use this pin up and say so."""
    said = f"from the `pin up` in {folder / '.pin'} (pid {pid}"
    user, tenant = uuid.uuid4(), uuid.uuid4()
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    commands = {
        "status": (("status", "--json"), folder, None),
        "dlq": (("dlq", "list", "--idle-seconds", "0.5"), folder, None),
        "outbox": (("outbox", "dead-letters", "list"), folder, None),
        "token": (("token", "--user", str(user), "--tenant", str(tenant), "--role", "manager"), folder, None),
        # PIN_HOME finds it from any folder
        "remote": (("outbox", "dead-letters", "list"), elsewhere, {**_bare_env(), "PIN_HOME": str(folder / ".pin")}),
    }
    with ThreadPoolExecutor(len(commands)) as pool:  # independent processes: run them side by side
        futures = {name: pool.submit(_pin, *args, cwd=cwd, env=env) for name, (args, cwd, env) in commands.items()}
        done = {name: future.result() for name, future in futures.items()}
    for name, result in done.items():
        assert result.returncode == 0, f"{name}: {result.stderr}"
        assert said in result.stderr, f"{name}: {result.stderr}"

    snapshot = json.loads(done["status"].stdout)
    assert "na" not in snapshot["database"], snapshot["database"]
    assert "na" not in snapshot["outbox"]["backlog"], snapshot["outbox"]
    assert done["dlq"].stdout == ""
    assert done["outbox"].stdout == done["remote"].stdout == ""

    minted = done["token"].stdout.strip()
    secret = (folder / ".pin" / state_folder.DEV_SECRET_FILE).read_text().strip()
    assert jwt.decode(minted, secret, algorithms=["HS256"])["sub"] == str(user)
    request = urllib.request.Request(  # the API of this pin up accepts it
        f"http://127.0.0.1:{port}/promotions/packages", headers={"Authorization": f"Bearer {minted}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - a loopback URL we built
        assert response.status == 200


def test_a_port_in_use_stops_pin_up_before_it_starts_anything(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        result = _pin("up", "--port", str(port), cwd=tmp_path)
        took = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert f"port {port} on 127.0.0.1 is in use" in lines[0]
    assert "--port" in lines[0]
    # nothing was started: no database, no broker log, no endpoints, and it did not wait for anything
    assert sorted(path.name for path in (tmp_path / ".pin").iterdir()) == [UP_LOCK_FILE]
    assert took < 30


def test_a_state_folder_in_use_stops_pin_up_before_it_starts_anything(tmp_path: Path) -> None:
    home = tmp_path / ".pin"
    with state_folder.lock(home):
        result = _pin("up", "--port", str(free_port()), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert f"the state folder {home} is in use by another `pin up` (pid {os.getpid()})" in lines[0]
    assert "PIN_HOME" in lines[0]
    assert sorted(path.name for path in home.iterdir()) == [UP_LOCK_FILE]


def test_a_killed_pin_up_leaves_no_role_or_broker_running_and_the_next_one_starts(tmp_path: Path) -> None:
    """SIGKILL gives `pin up` no chance to stop anything: its roles stop by themselves (PIN_UP_PID), the broker
    and PostgreSQL get a signal from the kernel (pin.local.embedded.lifetime), and a PostgreSQL left running in the
    folder anyway (a system without that signal) is stopped by the next `pin up`."""
    first = _start_up(tmp_path, free_port(), "up-1.log")
    second: subprocess.Popen[bytes] | None = None
    left_running: EmbeddedPostgres | None = None
    children = _descendants(first.pid)  # PostgreSQL's own processes included
    try:
        direct = psutil.Process(first.pid).children()
        names = sorted(" ".join(p.cmdline()[2:4]) for p in direct)
        assert len(direct) == 10, names  # the API, seven roles, the broker and PostgreSQL
        first.kill()
        first.wait(10)
        _, alive = psutil.wait_procs(children, timeout=30)
        orphans = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        assert not orphans, [p.cmdline() for p in orphans]
        # a server left running, as a pin up on a system without the parent-death signal leaves it
        left_running = EmbeddedPostgres(tmp_path / ".pin" / "postgres")
        left_running.start()
        second = _start_up(tmp_path, free_port(), "up-2.log")
        assert "stopping the embedded PostgreSQL a killed pin up left running" in (tmp_path / "up-2.log").read_text()
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(60)
        for child in children:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                child.kill()
        if left_running is not None:  # the second pin up stopped it; this reaps our child (or stops it on failure)
            left_running.stop("immediate")
        leftover = EmbeddedPostgres(tmp_path / ".pin" / "postgres")  # a failed run must not leave it running
        if leftover.is_running():
            leftover.stop("immediate")
