"""A PIN_* variable that nothing reads (a misspelled setting) gets one warning line at start, naming the closest
setting; the PIN_* variables that are not settings (pin.settings.OTHER_VARIABLES) never do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pin.settings import OTHER_VARIABLES, Settings, load_settings, unknown_variables

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MISSPELLED = "PIN_APPOINTMENT_TIMOUT_INTERVAL_SECONDS"
# `pin token`: a command that reads the settings and needs neither a database nor a broker
TOKEN = ("token", "--user", str(uuid.UUID(int=1)), "--tenant", str(uuid.UUID(int=2)), "--role", "agent")


def _token(variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`pin token`, a real process, with exactly ``variables`` among the PIN_* variables (and no `pin up` to find)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIN_")}
    env |= {"PIN_HOME": str(ROOT / "no-pin-up-here"), "PIN_JWT_SECRET": "s" * 32, **variables}
    command = [sys.executable, "-m", "pin", *TOKEN]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_misspelled_variable_is_named_in_one_line_with_the_setting_it_may_mean() -> None:
    result = _token({MISSPELLED: "5"})

    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"pin: ignoring {MISSPELLED} (did you mean PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS?): not a setting"
        " (docs/operations.md, Configuration)"
    ]


def test_the_variables_that_are_not_settings_are_never_warned_about() -> None:
    declared = {name: "1" for name in OTHER_VARIABLES}

    result = _token(declared)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_several_unknown_variables_share_one_line() -> None:
    line = unknown_variables({"PIN_RELAY_BACH_SIZE": "1", "PIN_NOTHING_LIKE_IT_AT_ALL": "1", "PIN_HOME": "x"})

    assert line is not None
    assert "\n" not in line
    assert "PIN_RELAY_BACH_SIZE (did you mean PIN_RELAY_BATCH_SIZE?)" in line
    assert "PIN_NOTHING_LIKE_IT_AT_ALL" in line
    assert "PIN_HOME" not in line  # a setting
    assert unknown_variables({"PIN_TEST_DATABASE_URL": "postgresql://x/y", "HOME": "/root"}) is None


def test_every_pin_variable_the_repository_names_is_a_setting_or_declared() -> None:
    """A variable the tests, the bench or the deployment files read is declared where the warning looks."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    named: set[str] = set()
    for name in files:
        path = ROOT / name
        if path == Path(__file__):
            continue  # this file's misspellings
        if path.suffix in {".py", ".md", ".yml", ".yaml", ".json", ".toml", ".sh", ""} and path.is_file():
            named |= set(re.findall(r"\bPIN_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
    named -= {"PIN_VARIABLE"}  # tests/ops/test_deployment_files.py's pattern's name
    known = Settings.variables() | set(OTHER_VARIABLES)
    fragments = {name for name in named - known if any(k.startswith(name + "_") for k in known)}  # PIN_RELAY_<FIELD>
    assert named - known - fragments == set()
    assert not Settings.variables() & set(OTHER_VARIABLES)


def test_a_role_pin_up_runs_does_not_repeat_the_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MISSPELLED, "5")
    load_settings()
    assert MISSPELLED in capsys.readouterr().err  # `pin up` itself said it
    monkeypatch.setenv("PIN_UP_PID", str(os.getpid()))
    load_settings()
    assert capsys.readouterr().err == ""  # its roles, which inherit its environment, do not again
