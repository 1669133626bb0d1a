"""`pin up` in a terminal is for a person: its roles' log lines are rendered for people (no JSON) and its banner
stands out; in a pipe (a file, a service manager) every log line is JSON, as production reads it. `auto` decides
by what `pin up` itself writes to (docs/operations.md, "Logs and traces")."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.lifetime import die_with_parent
from pin.local.state_folder import UP_BANNER_FILE
from pin.local.tcp_ports import free_port
from tests.conftest import JWT_SECRET

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# every role of `pin up` logs this much before it settles: enough lines to judge the rendering of each of them
ROLES_SEEN = ("api", "relay", "expire-promotions", "appointment-timeout", "consume-crm")


def _up_env(database_url: str, kafka: EmbeddedKafka, home: Path) -> dict[str, str]:
    """pin up on the test's database and broker (no embedded servers to start: seconds, not tens of them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    env.update(
        PIN_DATABASE_URL=database_url,
        PIN_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers,
        PIN_JWT_SECRET=JWT_SECRET,
        PIN_HOME=str(home),
        PIN_KAFKA_SESSION_TIMEOUT_MS="6000",
        TERM="xterm-256color",
    )
    return env


def _read_until(read: Callable[[], str], done: Callable[[str], bool], timeout: float) -> str:
    """Collect output until ``done(text)`` or the timeout."""
    text = ""
    deadline = time.monotonic() + timeout
    while not done(text) and time.monotonic() < deadline:
        text += read()
    return text


def _all_roles_logged(text: str) -> bool:
    return "pin up: running" in text and all(role in text for role in ROLES_SEEN)


def _json_lines(text: str) -> list[dict[str, object]]:
    """The lines of ``text`` that are JSON objects."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def test_on_a_terminal_no_log_line_is_json_and_the_banner_stands_out(
    database_url: str, kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    primary, replica = pty.openpty()
    up = subprocess.Popen(
        [sys.executable, "-m", "pin", "up", "--port", str(free_port())],
        env=_up_env(database_url, kafka, tmp_path / ".pin"),
        stdin=replica,
        stdout=replica,
        stderr=replica,
        start_new_session=True,
        preexec_fn=die_with_parent(signal.SIGTERM),  # noqa: PLW1509 - one prctl before the exec
    )
    os.close(replica)

    def read() -> str:
        ready, _, _ = select.select([primary], [], [], 0.5)
        try:
            return os.read(primary, 65536).decode(errors="replace") if ready else ""
        except OSError:  # the process closed the terminal
            return ""

    try:
        text = _read_until(read, _all_roles_logged, 90)
        assert _all_roles_logged(text), text[-3000:]
        os.write(primary, b"\n")  # Enter: the banner the roles' lines scrolled away, again
        text += _read_until(read, lambda t: t.count("pin up: running") >= 2, 30)
        up.send_signal(signal.SIGTERM)
        text += _read_until(read, lambda t: "pin up: stopped" in t, 60)
        assert up.wait(60) == 0, text[-3000:]
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(10)
        os.close(primary)
    (tmp_path / "terminal.txt").write_text(text)  # what a person saw, for a failure's reader
    assert not _json_lines(text), [line for line in text.splitlines() if line.strip().startswith("{")][:5]
    assert "\033[1mpin up: running" in text  # the banner in bold between two rules
    assert "=" * 40 in text
    assert text.count("pin up: running") == 2, "Enter did not print the banner again"
    plain = _ANSI.sub("", text)
    for role in ROLES_SEEN:  # a role's lines name it right after time and level: the column a person scans
        assert re.search(rf"^\S+ \[\w+\s*\] {re.escape(role)}\s", plain, re.MULTILINE), role


def test_in_a_pipe_every_log_line_is_json(database_url: str, kafka: EmbeddedKafka, tmp_path: Path) -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "pin", "up", "--port", str(free_port())],
        env=_up_env(database_url, kafka, tmp_path / ".pin"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent(signal.SIGTERM),  # noqa: PLW1509 - one prctl before the exec
    )
    assert up.stdout is not None
    os.set_blocking(up.stdout.fileno(), False)

    def read() -> str:
        select.select([up.stdout], [], [], 0.5)
        return (up.stdout.read() or b"").decode(errors="replace")  # type: ignore[union-attr]

    try:
        text = _read_until(read, lambda t: "pin up: running" in t and {*ROLES_SEEN} <= _roles(t), 90)
        banner = (tmp_path / ".pin" / UP_BANNER_FILE).read_text()  # what `pin status --demo` prints
        text += _read_until(read, lambda t: False, 3)  # an idle worker's cycles, the relay's heartbeats
        up.send_signal(signal.SIGTERM)
        text += _read_until(read, lambda t: "pin up: stopped" in t, 60)
        assert up.wait(60) == 0, text[-3000:]
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(10)
        up.stdout.close()
    assert {*ROLES_SEEN} <= _roles(text), text[-3000:]
    assert "\033[" not in text  # no terminal codes in a pipe
    logs = [line for line in text.splitlines() if not line.startswith(("pin up", "  ", "         "))]
    assert logs
    assert all(line.strip().startswith("{") for line in logs), [line for line in logs if line[:1] != "{"][:5]
    assert banner.startswith("pin up: running")
    assert "press Enter" in banner
    lines = _json_lines(text)
    assert not [line for line in lines if not line.get("role")], "lines with an empty role column"
    assert not [line for line in lines if line.get("logger") == "alembic.runtime.plugins"], "alembic's plugin lines"
    idle = [line for line in lines if line.get("event") in ("cycle started", "batch selected", "cycle completed")]
    assert not idle, f"an idle worker's cycle lines at INFO: {idle[:3]}"


def _roles(text: str) -> set[str]:
    return {str(line.get("role")) for line in _json_lines(text)}
