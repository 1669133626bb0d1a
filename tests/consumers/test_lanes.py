"""Lanes by key inside a partition (PIN_CONSUMER_LANES), against a real broker and PostgreSQL.

- the committed offset is the lowest offset not yet applied, whatever order the lanes finish in;
- random messages with few keys (purchases sharing targets, so that two lanes write the same target): the tables
  the lanes leave are those one message per transaction leaves;
- kill -9 while the lanes are busy, then a restart: every effect exactly once;
- one poison key retried while 1,000 messages of other keys on its partition are applied; the committed offset
  stays at the poison;
- the ahead bound (PIN_CONSUMER_MAX_AHEAD) reached: the partition is paused; released once the key applies;
- a rebalance in the middle of the lanes: every effect exactly once.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from structlog.testing import capture_logs

from pin.consumer_groups import build_runtime
from pin.messaging import topics
from pin.messaging.consumer.lanes import lane_of
from pin.messaging.consumer.offsets import Offsets
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.runtime import pool_size
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import (
    EVENT_TYPES,
    committed_offset,
    expired_cancellation,
    key_of,
    refuse_feed_entries,
    rows,
    running,
    running_runtimes,
    wait_for,
)
from tests.consumers.test_batch_equivalence_random import SNAPSHOTS, TABLES, World, _freeze

pytestmark = pytest.mark.integration

TOPIC = topics.APPOINTMENT_CANCELLED


def _produce(bootstrap: str, topic: str, events: list[dict[str, Any]], *, partition: int | None = None) -> None:
    """Produce without waiting for each ack, keyed as the contract says, in order (per partition)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    extra: dict[str, Any] = {} if partition is None else {"partition": partition}
    for event in events:
        headers = [("message-id", str(event["MessageId"])), ("contract-version", "1"),
                   ("event-type", EVENT_TYPES[topic]), ("correlation-id", "test")]  # fmt: skip
        producer.produce(topic, key=key_of(topic, event), value=json.dumps(event).encode(), headers=headers, **extra)
        producer.poll(0)
    assert producer.flush(30) == 0


def _handled(pool: Any, group: str) -> int:
    [row] = rows(pool, "SELECT count(*) AS n FROM messaging.inbox WHERE consumer_group = %s", group)
    return int(row["n"])


def _exactly_once(pool: Any, events: list[dict[str, Any]]) -> None:
    """Every crm message's inbox row and feed entry once, each entry written by its own message."""
    inbox = rows(pool, "SELECT message_id::text AS id, count(*) AS n FROM messaging.inbox GROUP BY 1")
    assert {r["id"] for r in inbox} == {e["MessageId"] for e in events}
    assert all(r["n"] == 1 for r in inbox)
    entries = rows(pool, "SELECT appointment_id::text AS a, message_id::text AS m FROM crm.lead_feed_entry")
    assert sorted((e["a"], e["m"]) for e in entries) == sorted(
        (str(e["AppointmentId"]), e["MessageId"]) for e in events
    )


# -- the committed offset -------------------------------------------------------------------------------------


@pytest.mark.unit
def test_the_position_is_the_lowest_offset_not_yet_applied():
    offsets = Offsets(log=None)
    partition = ("t", 0)
    offsets.dealt(partition, range(10, 20))
    assert offsets.ahead(partition) == 10
    offsets.done_many(partition, [12, 13, 19])  # other lanes finished first
    assert partition not in offsets.to_commit
    offsets.done_many(partition, [10])
    assert offsets.to_commit[partition] == 11
    offsets.done_many(partition, [11])
    assert offsets.to_commit[partition] == 14  # 12 and 13 were applied already
    offsets.done_many(partition, [14, 15, 16, 17, 18])
    assert offsets.to_commit[partition] == 20
    assert offsets.ahead(partition) == 0
    offsets.dealt(partition, [25, 30])  # a gap (compacted or control records)
    offsets.done_many(partition, [25])
    assert offsets.to_commit[partition] == 30
    assert [lane_of(f"k{n}".encode(), 8) for n in range(50)] == [lane_of(f"k{n}".encode(), 8) for n in range(50)]
    assert lane_of(b"anything", 1) == 0
    assert pool_size(1) == 2  # today's pool: one lane and the loop's housekeeping


def test_with_lanes_a_failing_message_holds_only_its_own_key(make_settings, pool):
    """No broker: one partition's messages dealt to a lane, handled in runs of the batch size; the poison's later
    message (in a later run) waits behind it, every other key is applied."""
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")
    runtime = build_runtime("crm", settings, pool, lanes=4, batch_size=4)
    bad = expired_cancellation()
    refuse_feed_entries(pool, bad["AppointmentId"])
    bad_again = {**expired_cancellation(), "AppointmentId": bad["AppointmentId"]}
    others = [expired_cancellation() for _ in range(20)]
    values = [others[0], bad, *others[1:10], bad_again, *others[10:]]
    messages = [
        Received(TOPIC, 0, n, key_of(TOPIC, v).encode(), json.dumps(v).encode(), [], 0) for n, v in enumerate(values)
    ]
    lane = runtime._lanes[lane_of(messages[1].key, 4)]
    lane.deal((TOPIC, 0), messages)  # as if all of them had been dealt to this lane
    runtime._work(lane)
    applied = {r["m"] for r in rows(pool, "SELECT message_id::text AS m FROM messaging.inbox")}
    assert applied == {e["MessageId"] for e in others}
    [held] = lane.held.values()
    assert held.message.offset == 1
    assert [m.offset for m in held.behind] == [11]


# -- lanes against one message per transaction ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_any_interleaving_of_lanes_ends_as_one_message_per_transaction(seed, settings, kafka, pool):
    """Random purchases (few of them, Versions out of order, repeats; their targets shared, so that lanes write the
    same target) across 3 partitions; 6 lanes, small batches. The reference is the same messages one per
    transaction in the order produced (each partition's order, and each key's)."""
    rng = random.Random(f"lanes-{seed}")
    world = World(rng)
    world.purchases = [uuid.uuid4() for _ in range(12)]
    values = world.batch(topics.PURCHASE_CHANGED, 400)
    lanes = 6
    named: dict[tuple[str, str], set[int]] = {}
    for value in values:
        for target in value.get("Targets") or []:
            named.setdefault((target["TargetKind"], target["TargetId"]), set()).add(
                lane_of(key_of(topics.PURCHASE_CHANGED, value).encode(), lanes)
            )
    assert any(len(in_lanes) > 1 for in_lanes in named.values()), "no target named from two lanes: proves nothing"
    _produce(kafka.bootstrap_servers, topics.PURCHASE_CHANGED, values)
    distinct = len({v["MessageId"] for v in values})
    with running("catalog", settings, pool, lanes=lanes, batch_size=16):
        wait_for(lambda: _handled(pool, "catalog") >= distinct, timeout=120, what="every message applied")
    laned = [_freeze(rows(pool, sql)) for sql in SNAPSHOTS["catalog"]]

    with pool.connection() as conn:
        conn.execute(f"TRUNCATE {TABLES['catalog']}, messaging.inbox")
    reference = build_runtime("catalog", settings, pool)
    for n, value in enumerate(values):
        key = key_of(topics.PURCHASE_CHANGED, value).encode()
        reference._process(
            [Received(topics.PURCHASE_CHANGED, 0, n, key, json.dumps(value).encode(), [], 0)], attempts=1
        )
    alone = [_freeze(rows(pool, sql)) for sql in SNAPSHOTS["catalog"]]
    assert laned == alone
    assert all(alone), "nothing was written: it would prove nothing"


# -- crashes, poison, the ahead bound, rebalances -------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_while_lanes_are_busy_then_restart_gives_every_effect_exactly_once(spawn_role, kafka, pool, settings):
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_KAFKA_SESSION_TIMEOUT_MS": str(FAST_SESSION_TIMEOUT_MS),
        "PIN_CONSUMER_LANES": "8",
    }
    events = [expired_cancellation() for _ in range(3000)]
    _produce(kafka.bootstrap_servers, TOPIC, events)
    doomed = spawn_role("consume", "crm", env=env)
    wait_for(lambda: _handled(pool, "crm") > 0, timeout=60, what="the first batches committed")
    doomed.kill9()  # lanes in their transactions, or between commits and the offsets
    at_kill = _handled(pool, "crm")
    assert at_kill < len(events), "the whole backlog was handled before the kill; nothing was tested"

    successor = spawn_role("consume", "crm", env=env)
    wait_for(lambda: _handled(pool, "crm") >= len(events), timeout=180, what="the successor to handle the backlog")
    assert successor.terminate() == 0
    _exactly_once(pool, events)


def test_one_poison_key_in_retry_holds_only_itself_while_1000_other_keys_apply(settings, kafka, pool):
    bad = expired_cancellation()
    refuse_feed_entries(pool, bad["AppointmentId"])  # its effect fails on every attempt: retried, never applied
    others = [expired_cancellation() for _ in range(1000)]
    _produce(kafka.bootstrap_servers, TOPIC, [bad, *others], partition=0)  # bad at offset 0, all on one partition
    options = {"lanes": 8, "backoff_cap": 0.2}
    with capture_logs() as logs, running("crm", settings, pool, **options) as runtime:
        wait_for(lambda: _handled(pool, "crm") >= len(others), timeout=120, what="every other key applied")
        assert rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", bad["MessageId"]) == []
        assert any(e["event"] == "key held for a retry" for e in logs)
        # the committed offset stays at the poison (the lowest offset not applied): a crash replays from it
        assert runtime.offsets.ahead((TOPIC, 0)) == len(others) + 1
        assert {**runtime.offsets.unconfirmed, **runtime.offsets.to_commit}.get((TOPIC, 0), 0) == 0
        assert committed_offset(kafka.bootstrap_servers, "crm", TOPIC, 0) <= 0
    assert not any(e["event"] == "partition paused for a retry" for e in logs)


def test_the_ahead_bound_pauses_the_partition_and_releases_it(settings, kafka, pool):
    bad = expired_cancellation()
    refuse_feed_entries(pool, bad["AppointmentId"])
    others = [expired_cancellation() for _ in range(400)]
    _produce(kafka.bootstrap_servers, TOPIC, [bad, *others], partition=0)
    bound, batch = 100, 10
    options = {"lanes": 4, "max_ahead": bound, "batch_size": batch, "backoff_cap": 0.2}
    with capture_logs() as logs, running("crm", settings, pool, **options) as runtime:
        wait_for(lambda: any(e["event"] == "partition paused at the ahead bound" for e in logs), what="the pause")
        applied_when_paused = _handled(pool, "crm")
        # nothing more is read while paused: what is applied stays within the bound (and one poll's messages)
        wait_for(lambda: runtime.offsets.ahead((TOPIC, 0)) == _handled(pool, "crm") + 1, what="the lanes idle")
        assert applied_when_paused < bound + batch
        assert _handled(pool, "crm") < bound + batch
        with pool.connection() as conn:  # the poison's cause is fixed: its retry applies, the offset moves
            conn.execute("DROP TRIGGER refuse_for_test ON crm.lead_feed_entry")
        wait_for(lambda: _handled(pool, "crm") == len(others) + 1, timeout=60, what="everything applied")
        assert any(e["event"] == "partition resumed below the ahead bound" for e in logs)
        wait_for(
            lambda: committed_offset(kafka.bootstrap_servers, "crm", TOPIC, 0) == len(others) + 1, what="the commit"
        )
    _exactly_once(pool, [bad, *others])


@pytest.mark.slow
def test_a_rebalance_in_the_middle_of_the_lanes_applies_every_effect_exactly_once(settings, kafka, pool):
    """A second instance joins while the first one's lanes are busy on a backlog; partitions move (revoked with
    lanes in flight), and every message's effect is there once."""
    events = [expired_cancellation() for _ in range(3000)]
    _produce(kafka.bootstrap_servers, TOPIC, events)
    assert pool.max_size >= 2 * pool_size(4)
    # the first instance's lanes are slow (20 ms a message after its effect), so that the backlog outlasts the join
    first = build_runtime(
        "crm",
        settings,
        pool,
        lanes=4,
        batch_size=20,
        statistics_interval_ms=500,
        after_effect=lambda _m: time.sleep(0.02),
    )
    second = build_runtime("crm", settings, pool, lanes=4, batch_size=20, statistics_interval_ms=500)
    with capture_logs() as logs, running_runtimes([first]):
        wait_for(lambda: _handled(pool, "crm") > 100, timeout=60, what="the first instance busy")
        with running_runtimes([second]):
            wait_for(lambda: second.assigned_partitions, timeout=60, what="the second instance assigned")
            wait_for(lambda: _handled(pool, "crm") >= len(events), timeout=180, what="the backlog handled")
    assert any(e["event"] == "partitions revoked" for e in logs)
    assert _handled(pool, "crm") < 3000 + 1
    _exactly_once(pool, events)
