"""docs/operations.md's configuration table names exactly the variables Settings reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pin.settings import Settings

pytestmark = pytest.mark.unit

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _table_variables() -> set[str]:
    """The PIN_* names in the first cell of each row of the table headed ``| variable | default | meaning |``."""
    lines = OPERATIONS.read_text().splitlines()
    start = lines.index("| variable | default | meaning |") + 2
    names: set[str] = set()
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        names.update(re.findall(r"PIN_[A-Z0-9_]+", line.split("|")[1]))
    return names


def test_the_configuration_table_lists_every_setting_and_nothing_else() -> None:
    assert _table_variables() == {f"PIN_{name.upper()}" for name in Settings.model_fields}
