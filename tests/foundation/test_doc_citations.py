"""A page that sends a reader somewhere names a place that exists: a dashboard or a row by its title in
deploy/grafana/dashboards, and the API table where it is (docs/api.md once sent readers to a README that has none,
a runbook to a "Consumers" dashboard that is a row of another)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _titles() -> tuple[set[str], set[str]]:
    """(dashboard titles, row titles) of every provisioned dashboard."""
    boards, rows = set(), set()
    for path in DASHBOARDS.glob("*.json"):
        document = json.loads(path.read_text())
        boards.add(document["title"])
        rows |= {panel["title"] for panel in document["panels"] if panel["type"] == "row"}
    return boards, rows


def _named(text: str, word: str) -> set[str]:
    """Names in emphasis right before or after ``word``: "*Consumers* row", "dashboard **Promotion**"."""
    text = " ".join(text.split())
    name = r"\*{1,2}([A-Z][^*]{0,60}?)\*{1,2}"  # a title: capitalised, short
    before = re.findall(rf"{name} {word}\b", text)
    after = re.findall(rf"\b{word} {name}", text)
    return set(before) | set(after)


def test_every_dashboard_and_row_a_page_names_exists() -> None:
    boards, rows = _titles()
    problems = []
    for page in PAGES:
        text = page.read_text()
        problems += [f"{page.name}: no dashboard {name!r}" for name in sorted(_named(text, "dashboard") - boards)]
        problems += [f"{page.name}: no row {name!r}" for name in sorted(_named(text, "row") - rows)]
    assert not problems, "\n".join(problems)


def test_the_name_reading_finds_both_orders() -> None:
    assert _named("the *Consumers* row of the *Outbox relay and consumers*\ndashboard", "row") == {"Consumers"}
    assert _named("the *Consumers* row of the *Outbox relay and consumers*\ndashboard", "dashboard") == {
        "Outbox relay and consumers"
    }
    assert _named("Grafana dashboard **Promotion**", "dashboard") == {"Promotion"}


def test_a_page_citing_the_api_table_links_to_the_page_that_has_it() -> None:
    problems = []
    for page in PAGES:
        for sentence in re.split(r"(?<=\.)\s", " ".join(page.read_text().split())):
            if "API table" not in sentence:
                continue
            targets = re.findall(r"\]\(([^)#]+\.md)", sentence)
            if not targets:
                problems.append(f"{page.name}: cites the API table without a link: {sentence[:120]}")
            for target in targets:
                cited = (page.parent / target).resolve()
                if not cited.is_file() or "| method and path |" not in cited.read_text():
                    problems.append(f"{page.name}: {target} has no API table")
    assert not problems, "\n".join(problems)
