"""What waits for each consumer group (pin/outbox/waiting.py), on a real broker and PostgreSQL: the relay records
where the broker acknowledged each settled batch, and a group's committed offsets are read against those marks,
whether the group runs or not. docs/design/consumer-waits.md."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from psycopg_pool import ConnectionPool

from pin.consumer_groups import group_reads
from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.consumer.metrics import SLA
from pin.messaging.groups import SLA_SECONDS
from pin.messaging.kafka import client_config
from pin.outbox import waiting
from pin.outbox.relay import OutboxRelay
from pin.settings import Settings
from tests.outbox.support import TOPIC, broker_settings, event_row, insert_rows, outbox_count
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration

CANCELLED = topics.APPOINTMENT_CANCELLED  # read by crm and notifications


def _publish(database_url: str, relay: OutboxRelay, keys: int, *, topic: str = TOPIC, tag: str = "k") -> None:
    insert_rows(database_url, [event_row(f"{tag}-{n}", 1) for n in range(keys)])
    if topic != TOPIC:
        from psycopg import connect

        with connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE outbox.message SET topic = %s", (topic,))
    relay.heartbeat()  # alone: every vpart
    relay.run_once()
    assert outbox_count(database_url) == 0


def _commit(settings: Settings, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as its consumer would (without joining it)."""
    consumer = Consumer(client_config(settings, **{"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _ends(bootstrap: str, topic: str, expected: int) -> dict[int, int]:
    """Per partition, one past the highest offset really in the topic (read back, not the broker's watermarks)."""
    ends: dict[int, int] = {}
    for record in read_topic(bootstrap, topic, expected=expected):
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    return ends


@pytest.fixture
def on_broker(
    kafka: EmbeddedKafka, make_settings: Callable[..., Settings], new_relay: Callable[..., OutboxRelay]
) -> tuple[Settings, OutboxRelay]:
    """Settings on the test's broker (the test topic created) and an in-process relay publishing to it."""
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    return settings, new_relay(settings)


def _admin(settings: Settings) -> Any:
    return AdminClient(client_config(settings))


def test_a_group_behind_the_acknowledged_offsets_and_a_group_that_never_committed_wait(
    kafka: EmbeddedKafka, database_url: str, pool: ConnectionPool[Conn], on_broker: tuple[Settings, OutboxRelay]
) -> None:
    settings, relay = on_broker
    before = time.monotonic()
    _publish(database_url, relay, 12)
    ends = _ends(kafka.bootstrap_servers, TOPIC, 12)
    busiest = max(ends, key=lambda p: ends[p])
    assert ends[busiest] >= 2
    # crm applied everything but the last message of the busiest partition; news never ran
    crm_committed = {(TOPIC, p): end for p, end in ends.items()}
    crm_committed[(TOPIC, busiest)] = ends[busiest] - 1
    _commit(settings, "crm", crm_committed)
    time.sleep(1.0)
    reads = {"crm": (TOPIC,), "news": (TOPIC,)}

    with pool.connection() as conn:
        found = {
            w.group: w
            for w in waiting.consumer_waits(conn, reads, waiting.committed_offsets(_admin(settings), reads, 5))
        }
    elapsed = time.monotonic() - before

    crm, news = found["crm"], found["news"]
    assert {(p.partition, p.acked_end) for p in crm.partitions} == set(ends.items())  # the marks are the real ends
    assert crm.waiting == 1
    (stuck,) = [p for p in crm.partitions if p.waiting]
    assert (stuck.partition, stuck.committed) == (busiest, ends[busiest] - 1)
    assert 1.0 <= stuck.oldest_seconds <= elapsed  # acknowledged after `before`, at least a second ago
    assert all(p.oldest_seconds == 0 for p in crm.partitions if not p.waiting)
    # never deployed: every acknowledged message waits, from the first mark
    assert news.waiting == 12
    assert all(p.committed is None for p in news.partitions)
    assert 1.0 <= news.oldest_seconds <= elapsed
    assert (crm.sla_seconds, news.sla_seconds) == (SLA_SECONDS["crm"], SLA_SECONDS["news"])
    assert not crm.past_sla

    _commit(settings, "crm", {(TOPIC, busiest): ends[busiest]})
    with pool.connection() as conn:
        (crm,) = waiting.consumer_waits(
            conn, {"crm": (TOPIC,)}, waiting.committed_offsets(_admin(settings), ["crm"], 5)
        )
    assert (crm.waiting, crm.oldest_seconds) == (0, 0.0)


def test_pruning_keeps_every_answer_and_the_oldest_age_is_the_first_unread_batch(
    kafka: EmbeddedKafka, database_url: str, pool: ConnectionPool[Conn], on_broker: tuple[Settings, OutboxRelay]
) -> None:
    settings, relay = on_broker
    for batch in range(4):  # four batches, a second apart: four marks per partition
        _publish(database_url, relay, 6, tag=f"b{batch}")
        time.sleep(1.0)
    ends = _ends(kafka.bootstrap_servers, TOPIC, 24)
    with pool.connection() as conn:
        marks = conn.execute(
            "SELECT kafka_partition, last_offset FROM outbox.acked_position WHERE topic = %s ORDER BY 1, 2", (TOPIC,)
        ).fetchall()
    per_partition: dict[int, list[int]] = {}
    for mark in marks:
        per_partition.setdefault(int(mark["kafka_partition"]), []).append(int(mark["last_offset"]))
    assert {p: offsets[-1] + 1 for p, offsets in per_partition.items()} == ends
    partition = max(per_partition, key=lambda p: len(per_partition[p]))
    assert len(per_partition[partition]) >= 3  # one mark per batch that reached this partition
    # crm read everything; catalog stopped after the first batch that reached this partition
    catalog_at = per_partition[partition][0] + 1
    _commit(settings, "crm", {(TOPIC, p): end for p, end in ends.items()})
    _commit(settings, "catalog", {(TOPIC, partition): catalog_at})
    reads = {"crm": (TOPIC,), "catalog": (TOPIC,), "news": (TOPIC,)}
    committed = waiting.committed_offsets(_admin(settings), reads, 5)

    with pool.connection() as conn:
        before = waiting.consumer_waits(conn, reads, committed)
        pruned = waiting.prune_acked_positions(conn, reads, committed)
        after = waiting.consumer_waits(conn, reads, committed)
        left = conn.execute("SELECT count(*) AS n FROM outbox.acked_position").fetchone()

    assert pruned > 0
    assert left is not None
    assert left["n"] < len(marks)

    def counts(waits: tuple[waiting.GroupWait, ...]) -> list[object]:
        return [(g.group, [(p.partition, p.committed, p.acked_end, p.waiting) for p in g.partitions]) for g in waits]

    assert counts(before) == counts(after)
    for old, new in zip(before, after, strict=True):  # the same ages, give or take the statements' clocks
        assert abs(old.oldest_seconds - new.oldest_seconds) < 0.5, (old, new)
    catalog = next(g for g in after if g.group == "catalog")
    stuck = next(p for p in catalog.partitions if p.partition == partition)
    assert stuck.waiting == ends[partition] - catalog_at
    # the oldest waiting message came with the next batch there, which settled at least a second before the end
    assert stuck.oldest_seconds >= 1.0
    news = next(g for g in after if g.group == "news")
    assert news.oldest_seconds >= 3.0  # never deployed: from the first batch, kept by the pruning


def test_every_relay_exports_the_waits_and_the_slas_of_groups_that_run_nowhere(
    kafka: EmbeddedKafka, database_url: str, pool: ConnectionPool[Conn], on_broker: tuple[Settings, OutboxRelay]
) -> None:
    settings, relay = on_broker
    _publish(database_url, relay, 5, topic=CANCELLED)
    ends = _ends(kafka.bootstrap_servers, CANCELLED, 5)
    _commit(settings, "crm", {(CANCELLED, p): end for p, end in ends.items()})
    SLA.clear()  # no consumer runs in this process: the relay's gauges export every group's SLA
    gauges = waiting.ConsumerWaitGauges(group_reads(settings), pool, _admin(settings))
    checked_before = time.time()

    gauges.refresh()

    def value(gauge: Any, *labels: str) -> float:
        result: float = gauge.labels(*labels)._value.get()
        return result

    for partition in ends:
        assert value(waiting.WAITING, "crm", CANCELLED, str(partition)) == 0
        assert value(waiting.OLDEST_WAITING, "crm", CANCELLED, str(partition)) == 0
    assert sum(value(waiting.WAITING, "notifications", CANCELLED, str(p)) for p in ends) == 5
    assert {g: value(SLA, g) for g in SLA_SECONDS} == SLA_SECONDS
    assert waiting.CHECKED._value.get() >= checked_before  # type: ignore[attr-defined]


def test_pin_status_shows_what_waits_for_each_group_against_its_sla(
    kafka: EmbeddedKafka, database_url: str, on_broker: tuple[Settings, OutboxRelay]
) -> None:
    from rich.console import Console

    from pin.status import collect_status, render

    settings, relay = on_broker
    _publish(database_url, relay, 4, topic=CANCELLED)
    ends = _ends(kafka.bootstrap_servers, CANCELLED, 4)
    _commit(settings, "crm", {(CANCELLED, p): end for p, end in ends.items()})
    # as if the relay had been acknowledged 2 minutes ago: past crm's 1-minute SLA, within notifications' 5 minutes
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE outbox.acked_position SET acked_at = acked_at - interval '120 seconds'")

    report = collect_status(settings)

    by_group = {c["group"]: c["waiting"] for c in report["consumers"]}
    crm = by_group["crm"]
    assert (crm["messages"], crm["oldestSeconds"], crm["pastSla"]) == (0, 0.0, False)
    notifications = by_group["notifications"]  # never ran: everything acknowledged waits for it
    assert notifications["messages"] == 4
    assert 120 <= notifications["oldestSeconds"] < 150
    assert notifications["pastSla"] is False  # its SLA is 5 minutes
    assert {p["topic"] for p in notifications["partitions"]} == {CANCELLED}
    assert by_group["news"]["messages"] == 0  # nothing on purchase-changed
    console = Console(record=True, width=260, color_system=None)
    console.print(render(report))
    text = console.export_text()
    assert "4 (2m0" in text
    assert "/ 5m00s)" in text

    with psycopg.connect(database_url, autocommit=True) as conn:  # now past notifications' SLA too
        conn.execute("UPDATE outbox.acked_position SET acked_at = acked_at - interval '10 minutes'")
    report = collect_status(settings)
    notifications = next(c["waiting"] for c in report["consumers"] if c["group"] == "notifications")
    assert notifications["pastSla"] is True
    console.print(render(report))
    assert "over SLA, oldest on appointment-cancelled[" in console.export_text()


def test_the_marks_of_several_relays_and_a_kill9_cover_every_record_the_broker_holds(
    database_url: str,
    pool: ConnectionPool[Conn],
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    from tests.outbox.test_relay_instances import _kill9_then_drain

    broker_settings(make_settings, kafka.bootstrap_servers)
    insert_rows(database_url, [event_row(f"thing-{n % 25}", n // 25 + 1) for n in range(300)])
    # a relay killed with its batches acknowledged but never settled (no marks of theirs), a second one sends them
    # again and drains the outbox: the records of both are in the topic
    records, _survivor = _kill9_then_drain(
        database_url, kafka, spawn_role, {"PIN_RELAY_BATCH_SIZE": "50"}, after_produce=2, what="mid-batch"
    )
    ends: dict[int, int] = {}
    for record in records:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)

    with pool.connection() as conn:
        (never,) = waiting.consumer_waits(conn, {"news": (TOPIC,)}, {})

    # the marks reach the end of every partition, and everything in the topic, duplicates included, waits for a
    # group that never committed
    assert {p.partition: p.acked_end for p in never.partitions} == ends
    assert never.waiting == len(records) == sum(ends.values())


def test_pruning_a_quiet_partition_leaves_the_age_of_a_later_offset_within_the_grain(
    kafka: EmbeddedKafka, database_url: str, pool: ConnectionPool[Conn], on_broker: tuple[Settings, OutboxRelay]
) -> None:
    settings, relay = on_broker
    for seq in (1, 2, 3):  # one key: offsets 0, 1, 2 of its partition, one batch (one mark) each
        insert_rows(database_url, [event_row("quiet", seq)])
        relay.heartbeat()
        relay.run_once()
    ((partition, end),) = _ends(kafka.bootstrap_servers, TOPIC, 3).items()
    assert end == 3
    # the first two were acknowledged a minute before the third (a quiet partition), within one grain of each other
    with pool.connection() as conn:
        conn.execute(
            "UPDATE outbox.acked_position SET acked_at = acked_at - interval '60 seconds' WHERE last_offset < %s",
            (end - 1,),
        )
    reads = {"catalog": (TOPIC,)}
    _commit(settings, "catalog", {(TOPIC, partition): 0})
    with pool.connection() as conn:
        waiting.prune_acked_positions(conn, reads, waiting.committed_offsets(_admin(settings), reads, 5))
    # catalog applies the first message, then stalls on the second: acknowledged a minute ago, not at the third's time
    _commit(settings, "catalog", {(TOPIC, partition): 1})
    with pool.connection() as conn:
        (catalog,) = waiting.consumer_waits(conn, reads, waiting.committed_offsets(_admin(settings), reads, 5))
    assert catalog.waiting == 2
    assert catalog.oldest_seconds >= 60 - waiting.MARK_GRAIN_SECONDS
