"""The command line tells the truth in one line: each case was met on a fresh clone, each test runs at most one
`pin` process.

A worker with its database down, `pin status` with nothing to report on, the dead-letter lists with nothing in
them, `pin --version`, the flags in --help, a JWT secret too short for HS256, the distribution's name, and the
README's shell functions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import psycopg
import pytest

import pin
import pin.cli
from pin.local import state_folder
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.state_folder import PinUpEndpoints
from pin.local.tcp_ports import free_port
from pin.settings import JWT_SECRET_MIN_BYTES, ConfigurationError, Settings
from tests.conftest import JWT_SECRET

ROOT = Path(__file__).resolve().parents[2]
REFUSED = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"  # nothing listens there


def _bare_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """A newcomer's environment: no PIN_* variable but the given ones, and a state folder with no `pin up`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    return {**clean, "PIN_HOME": str(tmp_path / "state"), **env}


def _pin(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pin", *args], env=env, capture_output=True, text=True, check=False, timeout=timeout
    )


@pytest.mark.unit
def test_a_worker_once_with_the_database_down_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    done = _pin("worker", "appointment-timeout", "--once", env=_bare_env(tmp_path, PIN_DATABASE_URL=REFUSED))
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pin: database unreachable: "), lines[0]
    assert "Connection refused" in lines[0]


@pytest.mark.unit
def test_a_long_running_worker_with_the_database_down_says_it_waits_one_line_per_attempt(tmp_path: Path) -> None:
    """docs/operations.md: "unreachable; waiting", one line per interval, no traceback (was 16 lines and 4
    tracebacks in 10 s)."""
    env = _bare_env(tmp_path, PIN_DATABASE_URL=REFUSED, PIN_LOG_FORMAT="json", PIN_LOG_LEVEL="INFO")
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "pin", "worker", "appointment-timeout"], env=env,
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        # from its first "waiting" line (a loaded machine starts the process late), 6 s of the back-off after a
        # refusal: 0.5, 1, 2, 4 s
        _wait_for_line(log, "database unreachable; waiting")
        time.sleep(6)
    finally:
        worker.terminate()
        worker.wait(30)
    output = log.read_text()
    lines = output.splitlines()
    assert "Traceback" not in output
    waiting = [json.loads(line) for line in lines if "database unreachable; waiting" in line]
    assert 2 <= len(waiting) <= 5, output
    assert all("Connection refused" in line["error"] for line in waiting)
    assert len(lines) <= len(waiting) + 2, output  # at most the stop's own lines beside them


def _wait_for_line(log: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"no {text!r} within {timeout:.0f} s: {log.read_text()}"
        time.sleep(0.1)


@pytest.mark.integration
def test_a_worker_whose_database_goes_away_says_it_waits_without_a_traceback(tmp_path: Path, database_url: str) -> None:
    """The database refuses every connection mid-run (ALLOW_CONNECTIONS false, its sessions ended): a few lines per
    attempt, none a traceback (was 18 lines in 10 s, 12 of them the pool's, and a traceback per cycle)."""
    name = database_url.rsplit("/", 1)[1]
    env = _bare_env(tmp_path, PIN_DATABASE_URL=database_url, PIN_LOG_FORMAT="json",
                    PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS="1")  # fmt: skip
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "pin", "worker", "appointment-timeout"], env=env,
                                  stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    admin_url = database_url.rsplit("/", 1)[0] + "/postgres"
    try:
        _wait_for_line(log, "worker started")
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        mark = len(log.read_text())
        _wait_for_line(log, "database unreachable; waiting")  # its first attempt after the loss, however late
        time.sleep(6)  # then the attempts of 6 s (at 1, 2, 4 s)
        text = log.read_text()[mark:]
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        worker.terminate()
        worker.wait(30)
    assert "Traceback" not in text, text
    events = [json.loads(line)["event"] for line in text.splitlines() if line.startswith("{")]
    assert "database unreachable; waiting" in events, text
    assert len(events) <= 12, text  # about 3 lines per attempt (cycle failed, bookkeeping, waiting): the first, 1, 3 s


@pytest.mark.unit
def test_pin_status_with_no_database_exits_2_saying_how_to_get_one(tmp_path: Path) -> None:
    done = _pin("status", env=_bare_env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "pin up" in line
    assert "PIN_DATABASE_URL" in line
    assert "PIN_HOME" in line


@pytest.mark.integration
def test_pin_dlq_list_with_nothing_says_0_dead_letters_on_stderr(tmp_path: Path, kafka: EmbeddedKafka) -> None:
    from pin.messaging.kafka import ensure_topics

    ensure_topics(Settings.model_validate({"kafka_bootstrap_servers": kafka.bootstrap_servers}))
    env = _bare_env(tmp_path, PIN_KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    done = _pin("dlq", "list", "--group", "crm", "--idle-seconds", "0.5", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout holds only JSON lines
    assert "pin dlq list: 0 dead letters" in done.stderr.splitlines()


@pytest.mark.integration
def test_pin_outbox_dead_letters_list_with_nothing_says_0_dead_letters(tmp_path: Path, database_url: str) -> None:
    done = _pin("outbox", "dead-letters", "list", env=_bare_env(tmp_path, PIN_DATABASE_URL=database_url))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == ["pin outbox dead-letters list: 0 dead letters"]


def _project() -> dict[str, str]:
    project: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


@pytest.mark.unit
def test_pin_version_prints_the_version_and_the_commit_of_the_checkout(tmp_path: Path) -> None:
    done = _pin("--version", env=_bare_env(tmp_path))
    assert done.returncode == 0, done.stderr
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(rf"{_project()['name']} {_project()['version']} \(commit {head}(-dirty)?\)\n", done.stdout)


@pytest.mark.unit
def test_pin_version_without_git_prints_the_build_commit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An image or a wheel has no .git: the BUILD_COMMIT file its build wrote beside the package is the commit;
    neither: unknown."""
    package = tmp_path / "site-packages" / "pin"
    package.mkdir(parents=True)
    monkeypatch.setattr(pin.cli, "__file__", str(package / "cli.py"))
    assert pin.cli.version_line().endswith("(commit unknown)")
    (package / "BUILD_COMMIT").write_text("0123456789ab\n")
    assert pin.cli.version_line().endswith("(commit 0123456789ab)")


def _command_paths() -> list[list[str]]:
    """Every command and group of `pin`, as the words that name it."""
    paths: list[list[str]] = []
    pending: list[tuple[list[str], object]] = [([], pin.cli.command())]
    while pending:
        path, current = pending.pop()
        paths.append(path)
        for name, sub in getattr(current, "commands", {}).items():
            pending.append(([*path, name], sub))
    return paths


@pytest.mark.unit
def test_no_flag_in_any_help_shows_a_value_placeholder(capsys: pytest.CaptureFixture[str]) -> None:
    """A flag takes no value: `--json <bool>` would tell a reader to give one."""
    offenders = []
    for path in _command_paths():
        with pytest.raises(SystemExit) as exit_info:
            pin.cli.command().main(args=[*path, "--help"], prog_name="pin")
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        assert "Usage: pin" in text
        if "<bool>" in text:
            offenders.append(" ".join(["pin", *path]))
    assert not offenders, f"flags shown with <bool>: {offenders}"


@pytest.mark.unit
def test_a_jwt_secret_below_32_bytes_is_refused_at_start_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match=r"^PIN_JWT_SECRET: at least 32 bytes"):
        Settings.model_validate({"jwt_secret": "x" * (JWT_SECRET_MIN_BYTES - 1)})
    Settings.model_validate({"jwt_secret": "x" * JWT_SECRET_MIN_BYTES})
    assert len(JWT_SECRET.encode()) >= JWT_SECRET_MIN_BYTES  # the tests' own secret


@pytest.mark.unit
def test_pin_ups_generated_secret_is_long_enough(tmp_path: Path) -> None:
    from pin.local.up import _dev_secret

    assert len(_dev_secret(tmp_path).encode()) >= JWT_SECRET_MIN_BYTES


@pytest.mark.unit
def test_the_distribution_has_a_name_of_its_own_and_the_command_and_package_stay_pin() -> None:
    """`pin` on PyPI is an unrelated library: `pip install pin` would install that."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] != "pin"
    assert project["scripts"] == {"pin": "pin.cli:main"}
    assert pin.distribution() == project["name"]  # the installed metadata every hint reads
    for page in (ROOT / "README.md", ROOT / "docs" / "operations.md"):
        for extra in re.findall(r"`([\w.-]+)\[embedded\]`", page.read_text()):
            assert extra == project["name"], f"{page.name} names the extra of {extra}"


@pytest.mark.unit
def test_pin_status_demo_prints_what_the_running_pin_up_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The banner and the demo's tokens scroll away within seconds: `pin status --demo` prints them again."""
    home = tmp_path / "state"
    for name in [name for name in os.environ if name.startswith("PIN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIN_HOME", str(home))
    with pytest.raises(ConfigurationError, match="no `pin up` is running"):
        pin.cli.command().main(args=["status", "--demo"], standalone_mode=False)
    with state_folder.lock(home):  # as a running `pin up` holds it
        endpoints = PinUpEndpoints(1, "now", "http://127.0.0.1:1", "postgresql://x", "127.0.0.1:2", None)
        state_folder.write_endpoints(home, endpoints)
        state_folder.write_banner(home, ["pin up: running (Ctrl-C stops everything)", "", "  agent token eyJ..."])
        pin.cli.command().main(args=["status", "--demo"], standalone_mode=False)
    assert capsys.readouterr().out == "pin up: running (Ctrl-C stops everything)\n\n  agent token eyJ...\n"


# POSIX utilities a machine may lack (at(1) is often not installed), besides what `type` finds on this one
POSIX_UTILITIES = ("at", "batch", "cal", "id", "time", "test", "wait", "kill", "date", "env", "tr", "wc")


@pytest.mark.unit
def test_the_readmes_shell_functions_shadow_no_command() -> None:
    """The tour's helpers are defined in the reader's own shell: `id` or `at` there would hang a later `id`."""
    functions = re.findall(r"^([A-Za-z_][\w-]*)\(\) \{", (ROOT / "README.md").read_text(), flags=re.MULTILINE)
    assert functions
    found = subprocess.run(
        ["bash", "-c", 'for name in "$@"; do echo "$name $(type -t "$name")"; done', "bash", *functions],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    taken = [line for line in found if len(line.split()) > 1]
    taken += [name for name in functions if name in POSIX_UTILITIES]
    assert not taken, f"README shell functions that shadow a command: {taken}"
