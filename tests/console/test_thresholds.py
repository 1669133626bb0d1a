"""The console paints red exactly where the alert rules fire: its thresholds (pin.observability.thresholds) are the
comparisons of the rules in deploy/prometheus/*.rules.yml, read from the rule files."""

from __future__ import annotations

import re

import pytest

from pin.observability.thresholds import THRESHOLDS
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
