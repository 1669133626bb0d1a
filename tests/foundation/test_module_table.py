"""docs/architecture.md's module table has one row for each package and module of src/pin/, and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pin"
PAGE = ROOT / "docs" / "architecture.md"

# a row of the table: "| `calendar/domain.py` | ... |" (a package is its folder: "| `calendar/` | ... |")
_ROW = re.compile(r"^\| `([^`]+)` \|")


def tree() -> list[str]:
    """Every module (a package as its folder) under src/pin/, but the package itself and the revision files."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[:2] == ("migrations", "versions") or relative == Path("__init__.py"):
            continue
        names.append(f"{relative.parent.as_posix()}/" if path.name == "__init__.py" else relative.as_posix())
    return sorted(names)


def table() -> list[str]:
    """The modules the page's table names, in the page's order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("\n## Modules\n") :]
    return [m.group(1) for m in map(_ROW.match, section.splitlines()) if m]


def test_the_module_table_names_every_module_once() -> None:
    named = table()
    assert {
        "not in the table": sorted(set(tree()) - set(named)),
        "not in the tree": sorted(set(named) - set(tree())),
        "twice": sorted({name for name in named if named.count(name) > 1}),
    } == {"not in the table": [], "not in the tree": [], "twice": []}
