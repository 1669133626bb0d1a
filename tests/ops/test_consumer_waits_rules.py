"""The promtool tests of ConsumerWaitingPastSla and ConsumerWaitingUnchecked feed the rules series shaped exactly as
the roles export them: every input series of deploy/prometheus/tests/consumer-waits.test.yml is one a real run
exported and a real Prometheus stored (deploy/prometheus/tests/recorded/consumer-waits.prom, written by
tests/ops/test_consumer_sla_prometheus.py with PIN_TEST_RECORD_CONSUMER_SERIES), and that recording holds exactly the
relay's signal as pin/outbox/waiting.py declares it. The alert reads what a dead group leaves: the relays' series."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pin.messaging.groups import SLA_SECONDS
from pin.outbox import waiting
from tests.ops.rulefiles import PROMETHEUS, all_rules, metric_names

pytestmark = pytest.mark.unit

TESTS = PROMETHEUS / "tests"
RECORDING = TESTS / "recorded" / "consumer-waits.prom"
Series = tuple[str, frozenset[tuple[str, str]]]
# what the relay exports for every group (pin/outbox/waiting.py), with the SLA it exports for every group too
RELAY_SIGNAL = ("pin_consumer_waiting_messages", "pin_consumer_oldest_waiting_seconds")


def _recorded() -> dict[Series, float]:
    samples: dict[Series, float] = {}
    for family in text_string_to_metric_families(RECORDING.read_text()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _selector(text: str) -> Series:
    match = re.fullmatch(r"([a-zA-Z_:][\w:]*)\{(.*)\}", text)
    assert match, text
    labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
    return match.group(1), labels


def _input_series(path: Path) -> list[Series]:
    """Every ``- series: "..."`` of a promtool test file."""
    return [_selector(json.loads(quoted)) for quoted in re.findall(r'^\s*- series: (".*")$', path.read_text(), re.M)]


def test_every_input_series_is_one_a_real_run_exported_and_prometheus_stored() -> None:
    recorded = set(_recorded())
    inputs = _input_series(TESTS / "consumer-waits.test.yml")
    assert inputs
    missing = sorted(f"{name}{dict(labels)}" for name, labels in inputs if (name, labels) not in recorded)
    assert not missing, f"series the recording does not hold (shape them on {RECORDING.name}): {missing}"


def test_the_recording_holds_the_relays_signal_for_every_group_and_a_dead_groups_nothing_else() -> None:
    recorded = _recorded()
    relay = {
        (name, dict(labels)["group"])
        for name, labels in recorded
        if dict(labels).get("job") == "pin-relay" and name in RELAY_SIGNAL
    }
    # the relay exports the signal of every group that has something acknowledged, running or not
    assert {group for _, group in relay} == set(SLA_SECONDS)
    assert {name for name, _ in relay} == set(RELAY_SIGNAL) == {waiting.WAITING._name, waiting.OLDEST_WAITING._name}  # type: ignore[attr-defined]
    relay_slas = {
        dict(labels)["group"]: value
        for (name, labels), value in recorded.items()
        if name == "pin_consumer_sla_seconds" and dict(labels)["job"] == "pin-relay"
    }
    assert relay_slas == SLA_SECONDS
    # news was killed and notifications never ran: no series of theirs from a consumer, only the relay's
    consumers = {dict(labels).get("group") for (_, labels) in recorded if dict(labels).get("job") == "pin-consumers"}
    assert consumers == {"crm", "catalog", None}  # None: `up` of each consumer target
    # and the recording was taken while they waited past their SLA
    ages = {
        dict(labels)["group"]: value
        for (name, labels), value in recorded.items()
        if name == "pin_consumer_oldest_waiting_seconds" and value > 0
    }
    assert ages["news"] > SLA_SECONDS["news"]
    assert ages["crm"] > SLA_SECONDS["crm"]


def test_the_waiting_alert_reads_only_series_a_dead_group_leaves() -> None:
    (alert,) = [rule for rule in all_rules() if rule.name == "ConsumerWaitingPastSla"]
    assert metric_names(alert.expr) == {"pin_consumer_oldest_waiting_seconds", "pin_consumer_sla_seconds"}
    assert alert.hold == "0s"  # an age: no hold on top of it
    # no threshold written in the rule: the relays export every group's SLA from the one table
    assert "> on (group) group_left max by (group) (pin_consumer_sla_seconds)" in alert.expr
    assert not re.search(r">\s*\d", alert.expr)
    (unchecked,) = [rule for rule in all_rules() if rule.name == "ConsumerWaitingUnchecked"]
    assert "absent(pin_consumer_waiting_checked_timestamp_seconds)" in unchecked.expr
    assert waiting.CHECKED._name == "pin_consumer_waiting_checked_timestamp_seconds"  # type: ignore[attr-defined]
