"""One source of truth for who reads what: each group's route table, followed by `pin status` and the runbook.

crm reads appointment-cancelled (its lead feed entry) and appointment-created (the new half of a reschedule);
appointment-confirmed adds nothing to its feed, so it does not subscribe to it, and nothing may report a lag of
crm on that topic.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pin.consumer_groups import topics_of
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.kafka import ensure_topics, missing_topics
from pin.settings import Settings
from pin.status import collect_status
from tests.consumers.support import wait_for
from tests.support.processes import RoleProcess

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbooks" / "consumers.md"


def _short(topic: str) -> str:
    """pin.calendar.appointment-cancelled.v1 -> appointment-cancelled, as the docs write topics."""
    return topic.split(".")[-2]


@pytest.mark.unit
def test_crm_subscribes_to_what_its_handlers_use() -> None:
    assert topics_of("crm") == (topics.APPOINTMENT_CANCELLED, topics.APPOINTMENT_CREATED)


@pytest.mark.unit
def test_the_runbook_lists_each_groups_topics_as_its_route_table_does() -> None:
    rows = re.findall(r"^\| `(\w+)` \| ([a-z, -]+) \|", RUNBOOK.read_text(encoding="utf-8"), re.MULTILINE)
    documented = {group: {name.strip() for name in listed.split(",")} for group, listed in rows}
    assert documented == {group: {_short(t) for t in topics_of(group)} for group in topics.CONSUMER_GROUPS}


@pytest.mark.integration
def test_status_reports_the_lag_of_exactly_the_topics_each_group_subscribes_to(
    kafka: EmbeddedKafka, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    ensure_topics(settings)  # every topic exists: a topic the group does not read would show up as lag
    report = collect_status(settings)
    reported = {c["group"]: c["broker"] for c in report["consumers"]}
    assert set(reported) == set(topics.CONSUMER_GROUPS)
    for group, broker in reported.items():
        assert broker["missingTopics"] == [], group
        assert {p["topic"] for p in broker["partitions"]} == set(topics_of(group)), group


@pytest.mark.integration
def test_a_consumer_creates_no_topic_and_starts_once_pin_topics_has_created_them(
    kafka: EmbeddedKafka, make_settings: Callable[..., Settings], spawn_role: Callable[..., RoleProcess]
) -> None:
    """Its principal may not create topics (docs/operations.md, "Access control"): it waits, naming them."""
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    role = spawn_role("consume", "catalog", env={"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers})
    wait_for(lambda: "topics missing: " in role.output() or None, timeout=30, what="the consumer to name its topics")
    assert f"{topics.PURCHASE_CHANGED}, {topics.dead_letter_topic('catalog')}" in role.output()
    assert missing_topics(settings, topics.all_topics()) == list(topics.all_topics())  # it created none
    ensure_topics(settings)  # `pin topics`
    wait_for(lambda: "consumer started" in role.output() or None, timeout=30, what="the consumer to start")
    assert role.terminate() == 0
