"""The consumers' SLAs are one table (``pin.messaging.groups.SLA_SECONDS``): the specification, the runbook and the
alert follow it, and the histogram can tell exactly whether a p99 is above each of them.

The promtool tests (deploy/prometheus/tests/consumers.test.yml) show ConsumerSlaBreached firing and quiet per group;
tests/consumers/test_event_age.py measures the ages on a real broker and database.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pin.messaging.consumer.metrics import EVENT_AGE_BUCKETS
from pin.messaging.groups import SLA_SECONDS, SLA_WINDOW_SECONDS
from pin.messaging.topics import CONSUMER_GROUPS
from tests.ops.rulefiles import all_rules

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _seconds(text: str) -> float:
    """«< 1 min» -> 60.0."""
    match = re.fullmatch(r"< (\d+) min", text.strip())
    assert match, f"an SLA cell reads {text!r}"
    return float(match.group(1)) * 60


def _sla_column(path: Path, group_cell: str) -> dict[str, float]:
    """The last column of each group's row of the table whose first column is the group (``group_cell`` its shape)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        for group in CONSUMER_GROUPS:
            if cells and cells[0] == group_cell.format(group) and cells[-1].startswith("<"):
                found[group] = _seconds(cells[-1])
    return found


def test_the_specification_and_the_runbook_state_the_slas_of_the_table() -> None:
    assert set(SLA_SECONDS) == set(CONSUMER_GROUPS)
    assert _sla_column(DOCS / "specification.md", "{}") == SLA_SECONDS
    assert _sla_column(DOCS / "runbooks" / "consumers.md", "`{}`") == SLA_SECONDS


def test_every_sla_is_a_bucket_bound_so_the_p99_comparison_is_exact() -> None:
    missing = sorted(sla for sla in SLA_SECONDS.values() if sla not in EVENT_AGE_BUCKETS)
    assert not missing, f"SLAs that are not bounds of pin_consumer_event_age_seconds: {missing}"


def test_the_alert_compares_the_p99_over_the_sla_window_with_the_exported_sla() -> None:
    (alert,) = [rule for rule in all_rules() if rule.name == "ConsumerSlaBreached"]
    window = re.findall(r"rate\(pin_consumer_event_age_seconds_bucket\[(\d+)m\]\)", alert.expr)
    assert window == [str(SLA_WINDOW_SECONDS // 60)]
    assert alert.expr.startswith("histogram_quantile(0.99, sum by (group, le)")
    # the thresholds are not written in the rule: each consumer exports its group's SLA from the table
    assert "> on (group) max by (group) (pin_consumer_sla_seconds)" in alert.expr
    assert not re.search(r">\s*\d", alert.expr)
