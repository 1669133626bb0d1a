"""The console paints red exactly where the alert rules fire: its thresholds (pin.observability.thresholds) are the
comparisons of the rules in deploy/prometheus/*.rules.yml, read from the rule files; each kind of holder of the xmin
horizon is judged by the rule whose holder matcher names it."""

from __future__ import annotations

import re

import pytest

from pin.observability.database_health import HORIZON_HOLDERS
from pin.observability.thresholds import HORIZON_THRESHOLDS, THRESHOLDS, horizon_crossed
from tests.ops.rulefiles import all_rules

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_each_threshold_is_its_rules_comparison(name: str) -> None:
    threshold = THRESHOLDS[name]
    [rule] = [r for r in all_rules() if r.kind == "alert" and r.name == threshold.alert]
    operator = "<" if threshold.below else ">"
    # the rule compares the metric (aggregated) with the number: "<metric>...) > <value>" on one line of the expr
    value = f"{threshold.value:g}"
    pattern = rf"\b{re.escape(threshold.metric)}\b[^\n]*?\)\s*{re.escape(operator)}\s*{re.escape(value)}(?![\d.])"
    assert re.search(pattern, rule.expr), (rule.expr, pattern)


def test_crossing_follows_the_comparison() -> None:
    lag = THRESHOLDS["outbox.lag"]
    assert not lag.crossed(lag.value)
    assert lag.crossed(lag.value + 1)
    assert not lag.crossed(None)
    owned = THRESHOLDS["outbox.owned-vparts"]
    assert owned.crossed(owned.value - 1)
    assert not owned.crossed(owned.value)


def test_each_kind_of_xmin_horizon_holder_is_painted_by_the_rule_that_pages_for_it() -> None:
    assert set(HORIZON_THRESHOLDS) == set(HORIZON_HOLDERS)
    [held] = [r for r in all_rules() if r.kind == "alert" and r.name == "XminHorizonHeld"]
    matcher = re.search(r'holder=~"([^"]*)"', held.expr)
    assert matcher is not None, held.expr
    paged = {kind for kind in HORIZON_HOLDERS if re.fullmatch(matcher.group(1), kind)}
    assert paged == {kind for kind, name in HORIZON_THRESHOLDS.items() if THRESHOLDS[name].alert == held.name}
    assert THRESHOLDS[HORIZON_THRESHOLDS["transaction"]].alert == "LongRunningTransaction"
    limit = THRESHOLDS["database.xmin-horizon-held"].value
    assert horizon_crossed("slot", limit + 1)
    assert not horizon_crossed("standby", limit)
    assert not horizon_crossed("slot", None)  # not timed yet: nothing to judge
