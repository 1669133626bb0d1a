"""The consumer runtime's batches (one transaction per partition per poll), against a real broker and PostgreSQL.

- a poison message in the middle of a batch: the batch falls back to one message per transaction, the others'
  effects commit once, the poison is retried and dead-lettered on its own, and the partition's committed
  offset never passes it before that;
- kill -9 while a backlog is being handled in batches, then a restart: every message's effect exactly once;
- a rebalance and a graceful stop commit the handled offsets synchronously (the next owner redelivers nothing
  that was handled).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from structlog.testing import capture_logs

from pin.messaging import topics
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import (
    EVENT_TYPES,
    committed_offset,
    expired_cancellation,
    feed_entries,
    held_messages,
    metric,
    refuse_feed_entries,
    rows,
    running,
    wait_for,
)
from tests.ops.test_trace_propagation import spans  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration

TOPIC = topics.APPOINTMENT_CANCELLED


def _committed(bootstrap: str, group: str, partition: int) -> int:
    """The group's committed offset of one partition of TOPIC (negative when none)."""
    return committed_offset(bootstrap, group, TOPIC, partition)


def _produce_many(bootstrap: str, events: list[dict[str, Any]]) -> None:
    """Produce without waiting for each ack (a backlog), with the SPEC's headers."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for event in events:
        headers = [("message-id", str(event["MessageId"])), ("contract-version", "1"),
                   ("event-type", EVENT_TYPES[TOPIC]), ("correlation-id", "test")]  # fmt: skip
        producer.produce(TOPIC, key=str(event["AppointmentId"]), value=json.dumps(event).encode(), headers=headers)
        producer.poll(0)
    assert producer.flush(30) == 0


def _batch_transactions(logs: list[dict[str, Any]]) -> list[tuple[int, bool]]:
    """(messages, committed) of each batch transaction, from the runtime's log lines about them."""
    outcomes: list[tuple[int, bool]] = []
    for entry in logs:
        if entry["event"] == "messages handled":
            outcomes.append((entry["handled"] + entry["duplicates"], True))
        elif entry["event"] == "batch failed; handling its messages one by one":
            outcomes.append((entry["messages"], False))
    return outcomes


def test_a_poison_message_in_the_middle_of_a_batch_is_isolated(settings, kafka, pool, producer):
    """One lane: the batch with a message whose effect fails goes one by one: the messages before it apply, it is held
    (the committed offset at it, nothing behind it applied, never dead-lettered), and once its cause is fixed it
    applies, then the messages behind it."""
    before = [expired_cancellation(), expired_cancellation()]
    bad = expired_cancellation()
    refuse_feed_entries(pool, bad["AppointmentId"])  # readable, but its effect fails until the trigger goes
    after = [expired_cancellation(), expired_cancellation()]
    # a fresh broker: on partition 0 the offsets are 0, 1 (before), 2 (bad), 3, 4 (after); all there before the
    # consumer starts, so its first polls return them together
    for event in [*before, bad, *after]:
        producer.send(TOPIC, event, partition=0)
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=TOPIC)

    with capture_logs() as logs, running("crm", settings, pool, lanes=1, backoff_base=0.05, backoff_cap=0.3):
        for event in before:
            wait_for(lambda e=event: feed_entries(pool, e["AppointmentId"]), what="the messages before the poison")
        # while the poison is retried its partition's committed offset never passes it (offset 2)
        seen: set[int] = set()
        while not [h for h in held_messages(pool, "crm") if h["attempts"] >= 8]:
            seen.add(_committed(kafka.bootstrap_servers, "crm", 0))
            assert feed_entries(pool, after[0]["AppointmentId"]) == []
            time.sleep(0.1)
        seen.add(_committed(kafka.bootstrap_servers, "crm", 0))
        assert max(seen, default=-1) <= 2, seen
        assert metric("pin_consumer_dead_lettered_total", group="crm", topic=TOPIC) == dead_before
        with pool.connection() as conn:
            conn.execute("DROP TRIGGER refuse_for_test ON crm.lead_feed_entry")  # the fix
        for event in [bad, *after]:
            wait_for(lambda e=event: feed_entries(pool, e["AppointmentId"]), what="the poison and what is behind it")
        wait_for(lambda: _committed(kafka.bootstrap_servers, "crm", 0) == 5, what="the offset past the batch")

    for event in [*before, bad, *after]:
        assert len(feed_entries(pool, event["AppointmentId"])) == 1
        assert len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", event["MessageId"])) == 1
    fixed_at = feed_entries(pool, bad["AppointmentId"])[0]["recorded_at"]
    assert all(feed_entries(pool, e["AppointmentId"])[0]["recorded_at"] >= fixed_at for e in after)
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=TOPIC) == dead_before
    assert held_messages(pool, "crm") == []
    # the batch with the poison was tried in one transaction and failed as a whole (then one by one)
    calls = _batch_transactions(logs)
    assert any(size >= 3 and not ok for size, ok in calls), calls


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_backlog_then_restart_gives_every_effect_exactly_once(
    spawn_role, kafka, pool, settings
):
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_KAFKA_SESSION_TIMEOUT_MS": str(FAST_SESSION_TIMEOUT_MS),
    }
    events = [expired_cancellation() for _ in range(3000)]
    ids = [e["MessageId"] for e in events]
    _produce_many(kafka.bootstrap_servers, events)

    def handled() -> int:
        [row] = rows(pool, "SELECT count(*) AS n FROM messaging.inbox WHERE consumer_group = 'crm'")
        return int(row["n"])

    doomed = spawn_role("consume", "crm", env=env)
    wait_for(lambda: handled() > 0, timeout=60, what="the first batch committed")
    doomed.kill9()  # somewhere in the backlog: in a transaction, or between a commit and its offsets
    at_kill = handled()
    assert at_kill < len(events), "the whole backlog was handled before the kill; nothing was tested"

    successor = spawn_role("consume", "crm", env=env)
    wait_for(lambda: handled() >= len(events), timeout=120, what="the successor to handle the backlog")
    assert successor.terminate() == 0

    assert handled() == len(events)
    inbox = rows(pool, "SELECT message_id::text AS id, count(*) AS n FROM messaging.inbox GROUP BY 1")
    assert {r["id"] for r in inbox} == set(ids)
    assert all(r["n"] == 1 for r in inbox)
    entries = rows(
        pool,
        "SELECT appointment_id::text AS a, message_id::text AS m, count(*) OVER (PARTITION BY appointment_id) AS n"
        " FROM crm.lead_feed_entry",
    )
    assert len(entries) == len(events)
    assert all(e["n"] == 1 for e in entries)
    # each entry was written by its own message
    assert {(e["a"], e["m"]) for e in entries} == {(str(e["AppointmentId"]), e["MessageId"]) for e in events}


def test_a_graceful_stop_commits_what_was_handled(settings, kafka, pool):
    """Offsets go asynchronously while running; the stop commits them synchronously, so a restart redelivers
    nothing that was handled."""
    events = [expired_cancellation() for _ in range(300)]
    _produce_many(kafka.bootstrap_servers, events)
    duplicates_before = metric("pin_consumer_duplicates_total", group="crm", topic=TOPIC)
    with running("crm", settings, pool):
        wait_for(
            lambda: len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE consumer_group = 'crm'")) == len(events),
            what="the backlog handled",
        )
    total = sum(max(0, _committed(kafka.bootstrap_servers, "crm", p)) for p in range(topics.PARTITIONS))
    assert total == len(events)
    with running("crm", settings, pool) as again:
        wait_for(lambda: len(again.assigned_partitions) == topics.PARTITIONS * len(again.topics) or None,
                 what="the restarted consumer to own its partitions")  # fmt: skip
        time.sleep(1.0)
    assert metric("pin_consumer_duplicates_total", group="crm", topic=TOPIC) == duplicates_before


def test_each_message_of_a_batch_gets_its_span_in_the_producers_trace(
    settings,
    pool,
    producer,
    spans: InMemorySpanExporter,  # noqa: F811 - the fixture imported above
):
    events = [expired_cancellation() for _ in range(5)]
    parents = {}
    for event in events:
        trace_id, span_id = f"{uuid.uuid4().int:032x}", f"{uuid.uuid4().int & (2**64 - 1):016x}"
        parents[event["MessageId"]] = (int(trace_id, 16), int(span_id, 16))
        producer.send(TOPIC, event, partition=0, headers={"traceparent": f"00-{trace_id}-{span_id}-01"})
    with capture_logs() as logs, running("crm", settings, pool):
        for event in events:
            wait_for(lambda e=event: feed_entries(pool, e["AppointmentId"]), what="the batch handled")
    sizes = [size for size, committed in _batch_transactions(logs) if committed]
    assert sizes, "the messages were not handled as a batch"
    mine = [s for s in spans.get_finished_spans() if s.kind is SpanKind.CONSUMER and s.name.startswith(TOPIC)]
    got = {(s.context.trace_id, s.parent.span_id) for s in mine if s.context is not None and s.parent is not None}
    assert set(parents.values()) <= got
