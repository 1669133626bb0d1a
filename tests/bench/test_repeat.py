"""The pure parts of the bench's --repeat and load report: the median and spread of a figure, the noisy rule."""

from __future__ import annotations

import pytest
from bench.results import Figure, LoadWindow, Results, aggregate, goal_met, median

pytestmark = [pytest.mark.unit]


def figure(value: float | None, baseline: float | None = None, goal: str | None = None) -> Figure:
    """A figure as a phase records it: ratio value/baseline, met judged on that run alone."""
    r = None if value is None or baseline is None else value / baseline
    return Figure(value, "items_per_second", baseline, r, goal, goal_met(goal, value, r))


def test_median_of_odd_and_even_counts() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_aggregate_takes_the_median_of_the_ratios_not_the_ratio_of_the_medians() -> None:
    runs = [figure(10, 10), figure(20, 80), figure(30, 60)]  # ratios 1.0, 0.25, 0.5

    got = aggregate(runs)

    assert got.ratio == 0.5  # the ratio of the medians would be 20 / 60
    assert (got.value, got.baseline) == (20, 60)
    assert got.spread == (0.25, 1.0)
    assert got.runs == 3


def test_aggregate_without_a_baseline_spreads_the_value() -> None:
    got = aggregate([Figure(58.0, "ms"), Figure(40.0, "ms"), Figure(75.0, "ms")])

    assert (got.value, got.ratio, got.spread) == (58.0, None, (40.0, 75.0))


def test_aggregate_judges_the_goal_on_the_median() -> None:
    runs = [figure(7, 10, ">= 0.8"), figure(9, 10, ">= 0.8"), figure(8.5, 10, ">= 0.8")]
    assert [run.met for run in runs] == [False, True, True]

    assert aggregate(runs).met is True
    assert aggregate([runs[0], figure(7.5, 10, ">= 0.8"), runs[2]]).met is False


def test_a_goal_with_a_unit_is_on_the_value_one_without_on_the_ratio() -> None:
    assert goal_met("<= 200 ms", 150.0, 3.0) is True
    assert goal_met("<= 200 ms", 250.0, 0.5) is False
    assert goal_met(">= 0.5", 10.0, 0.6) is True
    assert goal_met(">= 0.5", 10.0, None) is False
    assert goal_met(None, 10.0, 0.6) is None


def test_aggregate_of_no_runs_is_an_error() -> None:
    with pytest.raises(ValueError, match="no runs"):
        aggregate([])


@pytest.mark.parametrize(
    ("start", "end", "cores", "noisy"),
    [
        (0.5, 1.4, 2, False),  # moved by less than one core
        (0.5, 1.6, 2, True),  # a neighbour started: moved by more than one core
        (3.0, 1.8, 4, True),  # a neighbour stopped: a fall counts as much as a rise
        (2.0, 2.0, 2, False),  # exactly as busy as the cores: still quiet
        (2.5, 2.4, 2, True),  # above the cores from the start: every process waited for a CPU
    ],
)
def test_the_noisy_rule(start: float, end: float, cores: int, noisy: bool) -> None:
    window = LoadWindow(start, end, cores)

    assert window.noisy is noisy
    assert ("NOISY" in window.describe()) is noisy


def test_summary_and_table_show_the_spread_the_load_and_the_noisy_mark() -> None:
    runs = [figure(10, 10), figure(20, 80), figure(30, 60)]
    windows = [LoadWindow(0.2, 0.3, 2), LoadWindow(0.3, 1.9, 2), LoadWindow(1.9, 1.5, 2)]
    for run, window in zip(runs, windows, strict=True):
        run.loads = [window]
    results = Results()
    results.figures["promotion_drain"] = aggregate(runs)

    entry = results.figures["promotion_drain"].as_dict()
    row = next(line for line in results.markdown(mode="quick", seconds=1).splitlines() if "promotion_drain" in line)

    assert entry["runs"] == 3
    assert entry["spread"] == [0.25, 1.0]
    assert entry["load_1m"] == [[0.2, 0.3], [0.3, 1.9], [1.9, 1.5]]
    assert entry["noisy"] is True
    assert "0.25..1 (3)" in row
    assert "0.30→1.90 **noisy**" in row
    assert "0.20→0.30," in row


def test_a_single_run_figure_has_no_spread_in_the_summary() -> None:
    entry = figure(10, 20).as_dict()

    assert not {"runs", "spread", "noisy"} & set(entry)
