"""docs/capacity.md is what bench/capacity.py makes of the committed bench/results/summary.json: it cannot drift."""

from __future__ import annotations

import copy
import itertools
import json

import pytest

from bench import capacity

pytestmark = [pytest.mark.unit]


def _summary() -> dict[str, dict[str, object]]:
    summary: dict[str, dict[str, object]] = json.loads(capacity.SUMMARY.read_text(encoding="utf-8"))
    return summary


def test_the_capacity_page_is_generated_from_the_latest_summary() -> None:
    expected = capacity.render(_summary())
    assert capacity.PAGE.read_text(encoding="utf-8") == expected, "stale: run `python -m bench.capacity`"


def test_the_page_follows_the_measured_costs() -> None:
    summary = _summary()
    slower = copy.deepcopy(summary)
    slower["relay_throughput"]["value"] = float(str(summary["relay_throughput"]["value"])) / 100
    assert capacity.render(slower) != capacity.render(summary)
    relays = [capacity.plan(capacity.Load(m), capacity.costs_of(slower)).relays for m in capacity.MULTIPLES]
    assert relays == sorted(relays)
    assert relays[-1] > capacity.MIN_INSTANCES  # a hundred times slower relay needs more instances at 1000x


def test_more_volume_never_needs_fewer_instances_or_less_database() -> None:
    costs = capacity.costs_of(_summary())
    plans = [capacity.plan(capacity.Load(m), costs) for m in capacity.MULTIPLES]
    for smaller, larger in itertools.pairwise(plans):
        assert larger.pg_cores > smaller.pg_cores
        assert larger.consumers_per_group >= smaller.consumers_per_group
        assert larger.partitions >= smaller.partitions >= 3
        assert (larger.timeout_workers or 10**9) >= (smaller.timeout_workers or 0)
