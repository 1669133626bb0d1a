"""CI runs the README's test command, and that command needs nothing CI adds: a newcomer's `make test` is CI's.

.ci/run may lint and type-check first, but whatever it provides (the virtual environment, promtool) comes from the
same make target or script that `make test` runs itself, so a bare machine's `make test` passes where CI's does.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# commands that put something on the machine: a test run that needs one must get it from `make test` too
PROVISIONING = re.compile(
    r"\bpip3? install\b|-m pip\b|\bapt(-get)?\b|-m venv\b|\bsudo\b|\bcurl\b|\bwget\b|scripts/|make install"
)


def _readme_test_command() -> str:
    """The README's test command: the one command in its code blocks that runs the whole test suite."""
    blocks = (ROOT / "README.md").read_text().split("```")[1::2]
    commands = {line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()[1:]}
    tests = sorted(command for command in commands if re.fullmatch(r"(\S+=\S+ )*make test", command))
    assert tests, "the README shows no test command"
    return tests[0].split()[-2] + " " + tests[0].split()[-1]


def _ci_commands() -> list[str]:
    """The command lines of .ci/run (comments and blank lines dropped)."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _dry_run(target: str, venv: Path) -> list[str]:
    """What `make <target>` would run on a machine without the virtual environment."""
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def test_ci_runs_the_readmes_test_command_and_fails_on_no_tests() -> None:
    command = _readme_test_command()
    assert command == "make test"
    commands = _ci_commands()
    assert command in commands, ".ci/run must run the README's test command exactly as written"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r'"\$code" -eq 5', ci), "pytest's exit code 5 (no tests) must fail CI"


def test_the_readmes_test_command_needs_nothing_ci_adds(tmp_path: Path) -> None:
    commands = _ci_commands()
    before_tests = commands[: commands.index(_readme_test_command())]
    provisioning = [line for line in before_tests if PROVISIONING.search(line)]
    make_test = _dry_run("test", tmp_path / "venv")
    for line in provisioning:
        if line == "make install":
            installed = _dry_run("install", tmp_path / "venv")
            assert installed, "make install on a bare machine installs something"
            missing = [step for step in installed if step not in make_test]
            assert not missing, f"`make test` does not do what `make install` does: {missing}"
        else:
            script = re.search(r"scripts/[\w.-]+", line)
            assert script, f".ci/run provisions by itself ({line!r}): move it to a script `make test` runs too"
            assert any(script.group(0) in step for step in make_test), f"`make test` does not run {script.group(0)}"


def test_make_test_provides_its_tools_before_any_test_runs(tmp_path: Path) -> None:
    steps = _dry_run("test", tmp_path / "venv")
    tools = next(index for index, step in enumerate(steps) if "scripts/test-tools" in step)
    pytest_run = next(index for index, step in enumerate(steps) if "-m pytest" in step)
    assert tools < pytest_run


def _bin_with(tmp_path: Path, *tools: str) -> Path:
    """A PATH folder holding only the given commands (links to the real ones) and a fake promtool if asked."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        if tool in ("promtool", "prometheus"):
            fake = folder / tool
            fake.write_text("#!/bin/sh\nexit 0\n")
            fake.chmod(0o755)
        else:
            (folder / tool).symlink_to(subprocess.check_output(["/bin/sh", "-c", f"command -v {tool}"]).strip())
    return folder


def _test_tools(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """scripts/test-tools with only ``path`` on PATH."""
    return subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "test-tools"), *args],
        env={**os.environ, "PATH": str(path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_without_promtool_and_no_way_to_install_it_one_line_says_what_and_how(tmp_path: Path) -> None:
    path = _bin_with(tmp_path, "id")
    result = _test_tools(path)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "promtool" in lines[0]
    assert "prometheus" in lines[0]


def test_with_promtool_and_prometheus_on_the_path_nothing_is_installed(tmp_path: Path) -> None:
    path = _bin_with(tmp_path, "id", "promtool", "prometheus")
    result = _test_tools(path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_with_promtool_but_no_prometheus_server_it_is_missing_too(tmp_path: Path) -> None:
    """The deep tests run a real Prometheus: promtool alone is not enough (and here it cannot be installed)."""
    path = _bin_with(tmp_path, "id", "promtool")
    result = _test_tools(path)
    assert result.returncode == 1
    assert "prometheus" in result.stderr


def test_ci_runs_the_full_size_cases_after_the_readmes_test_command(tmp_path: Path) -> None:
    """`make test` runs the property-based and soak-style cases smaller; CI runs them at full size afterwards."""
    commands = _ci_commands()
    assert "make test-deep" in commands, ".ci/run must run `make test-deep`"
    assert commands.index("make test-deep") > commands.index(_readme_test_command())
    deep = [step for step in _dry_run("test-deep", tmp_path / "venv") if "-m pytest" in step]
    assert len(deep) == 1, deep
    assert "-m deep" in deep[0], deep
    assert "--deep" in deep[0].split(), deep


def test_make_test_deep_provides_the_container_tools_before_its_tests(tmp_path: Path) -> None:
    """The image test (tests/ops/test_container_image.py) needs podman, runc and debootstrap: `make test-deep` gets
    them from scripts/test-tools --deep before pytest starts."""
    steps = _dry_run("test-deep", tmp_path / "venv")
    tools = next(index for index, step in enumerate(steps) if "scripts/test-tools --deep" in step)
    pytest_run = next(index for index, step in enumerate(steps) if "-m pytest" in step)
    assert tools < pytest_run


def test_without_the_container_tools_and_no_way_to_install_them_one_line_says_what_and_how(tmp_path: Path) -> None:
    path = _bin_with(tmp_path, "id", "promtool", "prometheus")
    result = _test_tools(path, "--deep")
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "podman" in lines[0]
    assert "promtool" not in lines[0]
