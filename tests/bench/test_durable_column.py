"""The durable column's plumbing: a phase run on the durable server lands in its own column, beside the main one.

No server here: the durable server's environment is replaced by a stand-in, so what is checked is where the figures
go (summary.json's ``durable`` under each figure, the two-column table of summary.md, docs/capacity.md's section)
and that the phase ran with the durable environment and got the main one back, also when it failed. Beside it, the
rule that splits a profile into issue 38's parts (bench/profile_worker.py: PARTS), which bench/README.md's tables use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from bench.__main__ import Run, _run_phase
from bench.results import Figure, Results

from bench import capacity, durable

pytestmark = [pytest.mark.unit]


class _Run(Run):
    """A Run whose only phase records one figure from the environment it runs in, or fails."""

    def __init__(self, tmp_path: Path, fail: bool = False) -> None:
        super().__init__(env=object(), mode="quick", out=tmp_path)  # type: ignore[arg-type]
        self.durable_url = "postgresql://durable.invalid/postgres"
        self.seen: list[tuple[Any, str]] = []
        self.fail = fail

    def phase_promotion(self) -> None:
        self.seen.append((self.env, self.column))
        if self.fail:
            raise RuntimeError("the server went away")
        speed = 100.0 if self.main_column else 40.0
        self.results.add("promotion_drain", Figure(speed, "purchases_per_second", 200.0, speed / 200.0, ">= 0.8"))


@pytest.fixture
def twins(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """durable.twin replaced: records the URL it was opened on and whether it was closed."""
    events: list[str] = []

    @contextmanager
    def fake(parent: object, url: str) -> Iterator[str]:
        events.append(f"open {url}")
        try:
            yield "durable-env"
        finally:
            events.append("closed")

    monkeypatch.setattr(durable, "twin", fake)
    return events


def test_a_durable_run_fills_the_durable_column_against_its_own_baseline(tmp_path: Path, twins: list[str]) -> None:
    run = _Run(tmp_path)
    main_env = run.env

    assert _run_phase(run, "promotion", 2) == 0
    assert _run_phase(run, "promotion", 2, on_durable=True) == 0

    assert run.seen == [(main_env, "main")] * 2 + [("durable-env", "durable")] * 2
    assert (run.env, run.column) == (main_env, "main")
    assert twins == ["open postgresql://durable.invalid/postgres", "closed"] * 2
    main, slow = run.results.figures["promotion_drain"], run.results.durable["promotion_drain"]
    assert (main.value, main.ratio, main.runs) == (100.0, 0.5, 2)
    assert (slow.value, slow.baseline, slow.ratio, slow.runs) == (40.0, 200.0, 0.2, 2)
    assert set(run.results.details["phase_load"]) == {"promotion", "promotion (durable)"}

    run.results.write(tmp_path, mode="quick", seconds=1.0)
    entry = json.loads((tmp_path / "summary.json").read_text())["promotion_drain"]
    assert (entry["value"], entry["durable"]["value"], entry["durable"]["ratio"]) == (100.0, 40.0, 0.2)
    row = next(
        line
        for line in (tmp_path / "summary.md").read_text().splitlines()
        if line.startswith("| promotion_drain |") and "purchases_per_second | 100" in line
    )
    assert "| 100 | 200 | 0.5 | 40 | 200 | 0.2 |" in row


def test_a_failed_durable_run_is_counted_and_the_main_environment_comes_back(tmp_path: Path, twins: list[str]) -> None:
    run = _Run(tmp_path, fail=True)
    main_env = run.env

    assert _run_phase(run, "promotion", 1, on_durable=True) == 1

    assert (run.env, run.column) == (main_env, "main")
    assert twins[-1] == "closed"
    assert not run.results.durable
    assert any("promotion (durable)" in note for note in run.results.notes)


def test_the_capacity_page_shows_both_columns_only_when_the_summary_has_them() -> None:
    summary: dict[str, Any] = json.loads(capacity.SUMMARY.read_text(encoding="utf-8"))
    for entry in summary.values():
        entry.pop("durable", None)  # the committed summary's own durable column, if it has one
    plain = capacity.render(summary)
    summary["timeout_drain_1_worker"]["durable"] = {"value": 150.0, "unit": "items_per_second", "ratio": 0.7}

    page = capacity.render(summary)

    assert "## On a durable server" not in plain
    assert "## On a durable server" in page
    row = next(line for line in page.splitlines() if line.startswith("| `timeout_drain_1_worker` |"))
    assert "150 items_per_second (ratio 0.7)" in row
    value = summary["timeout_drain_1_worker"]["value"]
    assert f"| {150.0 / value:.2f} |" in row


def test_results_without_a_durable_run_have_no_second_column() -> None:
    results = Results()
    results.figures["promotion_drain"] = Figure(1.0, "purchases_per_second", 2.0, 0.5)

    assert "Both columns" not in results.markdown(mode="quick", seconds=1)


@pytest.mark.parametrize(
    ("filename", "name", "part"),
    [
        ("/x/site-packages/structlog/_base.py", "_process_event", "log line"),
        ("/x/src/pin/observability/logging.py", "redact_sensitive", "log line"),
        ("/x/src/pin/observability/tracing.py", "current_traceparent", "tracing"),
        ("/x/src/pin/calendar/metrics.py", "inc", "metrics"),
        ("/x/src/pin/outbox/writer.py", "build_rows", "contracts: payloads, outbox rows, envelopes"),
        ("/x/src/pin/jobs/cycle.py", "info", "cycle bookkeeping and unit of work"),
        ("/x/site-packages/psycopg/_queries.py", "dump", "psycopg client work"),
        ("/x/site-packages/psycopg/connection.py", "wait", "waiting for PostgreSQL"),
        ("/x/src/pin/calendar/repository.py", "cluster_save", "domain, service, repository, handler"),
        ("~", "<built-in method builtins.isinstance>", None),
    ],
)
def test_each_profiled_file_goes_to_its_most_specific_part(filename: str, name: str, part: str | None) -> None:
    from bench.profile_worker import _part

    assert _part(filename, name) == part
