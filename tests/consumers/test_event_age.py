"""The consumers' SLA measure (seed 003: crm < 1 min, notifications < 5 min; seed 002: catalog, news < 1 min).

Each event's age at its effect, from its OccurredAt to the effect's transaction on the database clock, is observed
as pin_consumer_event_age_seconds{group,topic} and kept with its inbox row, on the single-message path and on the
batch path alike; `pin status` reads the recent p99 from the inbox and compares it with the group's SLA.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from pin.consumer_groups import build_runtime
from pin.messaging import topics
from pin.messaging.groups import SLA_SECONDS
from pin.status import collect_status
from tests.consumers.support import (
    Producing,
    cancelled,
    in_inbox,
    iso,
    metric,
    rows,
    running_groups,
    wait_for,
)
from tests.consumers.test_batch_equivalence_random import _received

pytestmark = pytest.mark.integration

TOPIC = topics.APPOINTMENT_CANCELLED
AGE = "pin_consumer_event_age_seconds"


def _db_now(pool: Any) -> datetime:
    now: datetime = rows(pool, "SELECT now() AS now")[0]["now"]
    return now


def _aged(occurred_at: datetime | None) -> dict[str, Any]:
    """An expiry that occurred at ``occurred_at`` (no OccurredAt at all when None)."""
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    if occurred_at is None:
        del event["OccurredAt"]
    else:
        event["OccurredAt"] = iso(occurred_at)
    return event


def _histogram(group: str) -> dict[str, float]:
    labels = {"group": group, "topic": TOPIC}
    values = {"count": metric(f"{AGE}_count", **labels), "sum": metric(f"{AGE}_sum", **labels)}
    for bound in ("60.0", "120.0", "300.0"):
        values[bound] = metric(f"{AGE}_bucket", **labels, le=bound)
    values["processed"] = metric("pin_consumer_processed_total", **labels)
    return values


@pytest.mark.parametrize("size", [1, 6], ids=["alone", "batch"])
def test_each_events_age_at_its_effect_is_observed_and_kept_with_its_inbox_row(size, make_settings, pool):
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: _process needs no broker
    occurred = _db_now(pool) - timedelta(seconds=120)
    # in the batch, one event without OccurredAt: applied, kept without an age, not observed
    events = [_aged(occurred) for _ in range(size)] + ([_aged(None)] if size > 1 else [])
    before = _histogram("crm")

    build_runtime("crm", settings, pool)._process(_received(TOPIC, events, 0), attempts=1)

    kept = rows(
        pool,
        "SELECT occurred_at, EXTRACT(EPOCH FROM processed_at - occurred_at)::float8 AS age FROM messaging.inbox"
        " WHERE consumer_group = 'crm'",
    )
    assert len(kept) == len(events)
    ages = [row["age"] for row in kept if row["occurred_at"] is not None]
    assert [row["occurred_at"] for row in kept if row["occurred_at"] is not None] == [occurred] * size
    assert all(120 <= age < 150 for age in ages), ages
    after = _histogram("crm")
    assert after["processed"] - before["processed"] == len(events)
    assert after["count"] - before["count"] == size  # the event without OccurredAt has no age
    assert after["sum"] - before["sum"] == pytest.approx(sum(ages), abs=1e-3)  # the metric is the row's age
    assert after["60.0"] == before["60.0"]  # none within crm's 1 min SLA
    assert after["120.0"] == before["120.0"]
    assert after["300.0"] - before["300.0"] == size


def test_status_compares_each_groups_recent_p99_age_with_its_own_sla(settings, pool, producer: Producing):
    # events that occurred 2 minutes ago: late for crm (1 min), in time for notifications (5 min)
    occurred = _db_now(pool) - timedelta(seconds=120)
    events = [_aged(occurred) for _ in range(3)]
    with running_groups(["crm", "notifications"], settings, pool):
        for event in events:
            producer.send(TOPIC, event)
        for group in ("crm", "notifications"):
            for event in events:
                wait_for(lambda g=group, e=event: in_inbox(pool, g, e["MessageId"]), what=f"{group} to handle it")
        assert metric("pin_consumer_sla_seconds", group="crm") == SLA_SECONDS["crm"] == 60
        assert metric("pin_consumer_sla_seconds", group="notifications") == SLA_SECONDS["notifications"] == 300

    report = collect_status(settings, kafka=False)
    inbox = {c.group: c.inbox for c in report.consumers}
    assert 120 <= inbox["crm"].recent_p99_age_seconds < 150
    assert inbox["crm"].sla_seconds == 60
    assert inbox["crm"].sla_breached
    assert 120 <= inbox["notifications"].recent_p99_age_seconds < 150
    assert inbox["notifications"].sla_seconds == 300
    assert not inbox["notifications"].sla_breached
    assert inbox["catalog"].recent_p99_age_seconds is None  # nothing recent: nothing to compare
    assert not inbox["catalog"].sla_breached
    document = report["consumers"][0]["inbox"]
    assert document["slaSeconds"] == 60
    assert document["recentP99AgeSeconds"] >= 120
