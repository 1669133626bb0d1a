"""docs/design/repetition.md names exactly the pairs ``duplicates --repo src`` finds: no more, no fewer.

``duplicates`` is a development tool, not a dependency: where it is not installed the test is skipped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "design" / "repetition.md"
TABLE_HEADING = "## Every pair, as `duplicates --repo src --most 60` lists it"

# a row of the tool: "D3 pin/a.py:10-24 ~ pin/b.py:40-54 shape (+5 more runs)"
_ROW = re.compile(r"^D\d+ pin/(\S+):\d+-\d+ ~ pin/(\S+):\d+-\d+")


def _pair(a: str, b: str) -> tuple[str, str]:
    first, second = sorted((a, b))
    return first, second


def page_pairs() -> Counter[tuple[str, str]]:
    """The pairs of the page's table, one row each."""
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index(TABLE_HEADING) :].splitlines()
    rows = [line.strip("|").split("|") for line in table if line.startswith("| ") and not line.startswith("| file")]
    return Counter(_pair(a.strip(), b.strip()) for a, b in rows)


def tool_pairs() -> Counter[tuple[str, str]]:
    """The pairs ``duplicates`` lists for src/ (all of them)."""
    out = subprocess.run(
        ["duplicates", "--repo", "src", "--most", "200", "--seconds", "120"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=180,
    ).stdout  # fmt: skip
    assert "incomplete:" not in out, out
    assert "more pairs)" not in out, out
    return Counter(_pair(*m.groups()) for m in map(_ROW.match, out.splitlines()) if m)


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="the duplicates tool is not installed")
def test_the_page_names_every_pair_the_tool_finds_and_no_other():
    found, named = tool_pairs(), page_pairs()
    assert {
        "not on the page": sorted((found - named).elements()),
        "no longer found": sorted((named - found).elements()),
    } == {
        "not on the page": [],
        "no longer found": [],
    }
