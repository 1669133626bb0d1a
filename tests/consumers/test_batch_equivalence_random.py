"""Every group's batch effect ends exactly as one message per transaction, on random batches of one topic.

Each case handles some messages before (one per transaction), then one partition's batch of one topic: few keys,
so appointments, purchases, notifications and feed entries repeat within the batch; Versions out of order,
duplicates (the same MessageId twice), unknown values. The batch and the same messages one per transaction must
leave the same tables and the same handler logs. Real PostgreSQL; no broker is needed (none is started).
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from typing import Any

import pytest
from structlog.testing import capture_logs

from pin.consumer_groups import build_runtime
from pin.messaging import topics
from pin.messaging.consumer.received import Received
from tests.consumers.support import EVENT_TYPES, cancelled, confirmed, created, key_of, purchase, rows
from tests.support import deep

pytestmark = pytest.mark.integration

SNAPSHOTS = {
    "catalog": [
        "SELECT purchase_id, tenant_id, status, version FROM catalog.purchase",
        "SELECT purchase_id, target_kind, target_id, tenant_id, boost_weight, active, purchase_version"
        " FROM catalog.boost_contribution",
    ],
    "news": [
        "SELECT purchase_id, tenant_id, status, version FROM news.purchase",
        "SELECT purchase_id, post_id, tenant_id, boost_weight, active, purchase_version FROM news.boost_contribution",
    ],
    "notifications": [
        "SELECT appointment_id, tenant_id, status FROM notifications.appointment_state",
        "SELECT tenant_id, recipient_user_id, kind, template_key, text, subject_id, message_id"
        " FROM notifications.notification",
    ],
    "crm": [
        "SELECT tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,"
        " appointment_kind, start_at, time_zone, rescheduled_to_appointment_id, rescheduled_start_at, message_id,"
        " occurred_at FROM crm.lead_feed_entry",
    ],
}
TABLES = {
    "catalog": "catalog.purchase, catalog.boost_contribution",
    "news": "news.purchase, news.boost_contribution",
    "notifications": "notifications.appointment_state, notifications.notification",
    "crm": "crm.lead_feed_entry",
}
INBOX = 'SELECT message_id, topic, "offset", occurred_at FROM messaging.inbox WHERE consumer_group = %s'
# what the handlers log or report per message (the runtime's own lines differ between the two paths by design)
HANDLER_EVENTS = {
    "older purchase version ignored",
    "already notified",
    "stale appointment-confirmed after the terminal event ignored",
    "expired purchase without BuyerUserId; nobody notified",
    "appointment already has its feed entry",
    "unknown enum value; neutral path taken",
}
REASONS = ["Expired", "DeclinedByAgent", "CancelledByAgent", "CancelledByInvestor", "Misplaced"]


class World:
    """A few tenants' worth of keys, so that a random batch touches the same rows many times."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.tenant = uuid.uuid4()
        self.people = [(uuid.uuid4(), uuid.uuid4()) for _ in range(2)]  # (agent, investor)
        # few keys (rows repeat within a batch) or more (many keys once in the batch, some written before)
        self.appointments = [uuid.uuid4() for _ in range(rng.choice([4, 20]))]
        self.purchases = [uuid.uuid4() for _ in range(rng.choice([3, 15]))]
        self.targets = [("Project", uuid.uuid4()), ("Project", uuid.uuid4()), ("PropertyObject", uuid.uuid4()),
                        ("Post", uuid.uuid4()), ("Post", uuid.uuid4()), ("Banner", uuid.uuid4())]  # fmt: skip

    def message(self, topic: str) -> dict[str, Any]:
        """A random message of ``topic`` about one of the world's keys."""
        rng = self.rng
        agent, investor = rng.choice(self.people)
        appointment = rng.choice(self.appointments)
        other = rng.choice(self.appointments)
        if topic == topics.PURCHASE_CHANGED:
            return purchase(
                tenant=self.tenant, purchase_id=rng.choice(self.purchases), version=rng.randint(1, 5),
                status=rng.choice(["Active", "Active", "Expired", "Cancelled", "Paused"]),
                weight=rng.choice([10, 20, 30]), targets=rng.sample(self.targets, rng.randint(0, 4)),
                buyer=rng.choice([investor, None]),
            )  # fmt: skip
        if topic == topics.APPOINTMENT_CANCELLED:
            return cancelled(
                tenant=self.tenant, agent=agent, investor=investor, appointment=appointment,
                reason=rng.choice(REASONS), cancelled_by=rng.choice([None, "Agent", "Robot"]),
                rescheduled_to=other if rng.random() < 0.3 else None, Kind=rng.choice(["Showing", "Showing", "Tour"]),
            )  # fmt: skip
        if topic == topics.APPOINTMENT_CONFIRMED:
            return confirmed(tenant=self.tenant, agent=agent, investor=investor, appointment=appointment)
        return created(
            tenant=self.tenant, agent=agent, investor=investor, appointment=appointment,
            status=rng.choice(["Pending", "Confirmed"]), rescheduled_from=other if rng.random() < 0.4 else None,
        )  # fmt: skip

    def batch(self, topic: str, size: int) -> list[dict[str, Any]]:
        """``size`` messages of ``topic``, about a fifth of them repeats of an earlier one (the same MessageId)."""
        values: list[dict[str, Any]] = []
        for _ in range(size):
            values.append(self.rng.choice(values) if values and self.rng.random() < 0.2 else self.message(topic))
        return values


def _received(topic: str, values: list[dict[str, Any]], first_offset: int) -> list[Received]:
    return [
        Received(
            topic=topic,
            partition=0,
            offset=first_offset + n,
            key=key_of(topic, value).encode(),
            value=json.dumps(value).encode(),
            headers=[("message-id", value["MessageId"].encode()), ("event-type", EVENT_TYPES[topic].encode())],
            timestamp_ms=0,
        )
        for n, value in enumerate(values)
    ]


def _freeze(table: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(str(value) for value in row.values()) for row in table)


def _handler_logs(logs: list[dict[str, Any]]) -> Counter[str]:
    return Counter(
        json.dumps({k: str(v) for k, v in entry.items() if k not in {"log_level", "offset", "partition", "topic"}},
                   sort_keys=True)
        for entry in logs
        if entry["event"] in HANDLER_EVENTS
    )  # fmt: skip


def _ending(
    group: str, settings: Any, pool: Any, before: list[Received], batch: list[Received], *, one_by_one: bool
) -> tuple[Any, ...]:
    with pool.connection() as conn:
        conn.execute(f"TRUNCATE {TABLES[group]}, messaging.inbox")
    runtime = build_runtime(group, settings, pool)
    for message in before:
        runtime._process([message], attempts=1)
    with capture_logs() as logs:
        if one_by_one:
            for message in batch:
                runtime._process([message], attempts=1)
        else:
            runtime._process(batch, attempts=1)
    assert "batch failed; handling its messages one by one" not in [entry["event"] for entry in logs]
    tables = [_freeze(rows(pool, sql)) for sql in SNAPSHOTS[group]]
    return tables, _freeze(rows(pool, INBOX, group)), _handler_logs(logs)


CASES: list[tuple[str, str, list[str]]] = [
    ("catalog", topics.PURCHASE_CHANGED, [topics.PURCHASE_CHANGED]),
    ("news", topics.PURCHASE_CHANGED, [topics.PURCHASE_CHANGED]),
    ("notifications", topics.APPOINTMENT_CANCELLED, [topics.APPOINTMENT_CONFIRMED, topics.APPOINTMENT_CANCELLED]),
    ("notifications", topics.APPOINTMENT_CONFIRMED, [topics.APPOINTMENT_CANCELLED, topics.APPOINTMENT_CONFIRMED]),
    ("notifications", topics.APPOINTMENT_CREATED, [topics.APPOINTMENT_CREATED]),
    ("notifications", topics.PURCHASE_CHANGED, [topics.PURCHASE_CHANGED]),
    ("crm", topics.APPOINTMENT_CANCELLED, [topics.APPOINTMENT_CREATED, topics.APPOINTMENT_CANCELLED]),
    ("crm", topics.APPOINTMENT_CREATED, [topics.APPOINTMENT_CANCELLED, topics.APPOINTMENT_CREATED]),
]


# random batches per case: every case under `make test` (2 seeds), 8 under `make test-deep` (tests/support/deep.py)
SEEDS = range(8) if deep.DEEP else range(2)


@pytest.mark.deep
@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}-{case[1]}")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_batch_ends_as_one_message_per_transaction(case, seed, make_settings, pool):
    group, topic, before_topics = case
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: no broker is needed here
    world = World(random.Random(f"{group}-{topic}-{seed}"))
    before = [m for n, t in enumerate(before_topics) for m in _received(t, world.batch(t, 6), 1000 * (n + 1))]
    batch = _received(topic, world.batch(topic, 30), 0)
    in_batch = _ending(group, settings, pool, before, batch, one_by_one=False)
    alone = _ending(group, settings, pool, before, batch, one_by_one=True)
    assert in_batch == alone
    assert any(in_batch[0]), "the case wrote nothing: it would prove nothing"
