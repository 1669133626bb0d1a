"""docs/operations.md's configuration table names exactly the variables Settings reads, each with its default."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pin.settings import Settings

pytestmark = pytest.mark.unit

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _table_rows() -> list[tuple[list[str], str]]:
    """Each row of the table headed ``| variable | default | meaning |``: its PIN_* names and its default cell."""
    lines = OPERATIONS.read_text().splitlines()
    start = lines.index("| variable | default | meaning |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = line.split("|")
        rows.append((re.findall(r"PIN_[A-Z0-9_]+", cells[1]), cells[2].strip()))
    return rows


def _table_variables() -> set[str]:
    return {name for names, _ in _table_rows() for name in names}


def _says(shown: str, default: Any, variable: str) -> bool:
    """Whether the table's ``shown`` (its first word: "unset", "empty", 5, `.pin`) is the setting's ``default``."""
    if default is None:
        return shown.startswith(("unset", "("))  # "(embedded under `pin up`)"
    if default == "":
        return shown in {"empty", "unset"}
    if isinstance(default, int | float):
        number = re.match(r"[0-9.]+", shown)
        return number is not None and float(number.group()) == default
    suffix = variable.rsplit("_", 1)[-1].lower()
    return shown.split(" (", maxsplit=1)[0].strip("`").replace("<group>", suffix) == str(default).replace("'", '"')


def test_the_configuration_table_lists_every_setting_and_nothing_else() -> None:
    assert _table_variables() == Settings.variables()


def test_the_configuration_table_shows_each_setting_s_default() -> None:
    wrong = []
    for names, cell in _table_rows():
        shown = [part.strip() for part in cell.split(" / ")] if len(names) > 1 else [cell]
        shown = shown * len(names) if len(shown) == 1 else shown  # one default for several (the principals)
        assert len(shown) == len(names), cell
        wrong += [
            f"{name}: {text!r}, default {Settings.variable_default(name)!r}"
            for name, text in zip(names, shown, strict=True)
            if not _says(text, Settings.variable_default(name), name)
        ]
    assert wrong == []
