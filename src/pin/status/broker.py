"""`pin status`'s reads from the broker: each group's committed offsets against the end offsets of the topics it
subscribes to, and the messages in its dead-letter topic. Informational: the embedded broker's watermarks are wrong."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from pin.consumer_groups import topics_of
from pin.messaging import topics
from pin.messaging.kafka import client_config, silent_client_logger
from pin.observability.logging import error_text
from pin.settings import Settings
from pin.status.snapshot import BrokerUnavailable, GroupOffsets, PartitionLag, Unavailable

# the partition count of every topic on the broker
Partitions = dict[str, int]


def consumer_offsets(settings: Settings, timeout: float) -> dict[str, GroupOffsets | Unavailable] | BrokerUnavailable:
    """Every consumer group's offsets, or why the broker could not be asked at all."""
    if not settings.kafka_bootstrap_servers:
        return BrokerUnavailable("PIN_KAFKA_BOOTSTRAP_SERVERS is not set")
    probe = _consumer_of(settings, topics.STATUS_PROBE_GROUP, timeout)
    try:
        existing = {name: len(meta.partitions) for name, meta in probe.list_topics(timeout=timeout).topics.items()}
    except KafkaException as exc:
        return BrokerUnavailable(f"broker unreachable ({error_text(exc)})")
    finally:
        probe.close()
    return {group: _group_offsets(settings, group, existing, timeout) for group in topics.CONSUMER_GROUPS}


def _consumer_of(settings: Settings, group: str, timeout: float) -> Any:
    overrides = {
        "group.id": group,  # only to read the group's commits: no subscribe, so it never joins the group
        "enable.auto.commit": False,
        "socket.timeout.ms": max(1000, int(timeout * 1000)),
        "logger": silent_client_logger("pin.status.kafka"),  # the report says "n/a" instead
    }
    return Consumer(client_config(settings, **overrides))


def _group_offsets(settings: Settings, group: str, existing: Partitions, timeout: float) -> GroupOffsets | Unavailable:
    group_topics = topics_of(group)  # the group's route table: what it really subscribes to
    dead_letter_topic = topics.dead_letter_topic(group)
    consumer = _consumer_of(settings, group, timeout)
    try:
        return GroupOffsets(
            partitions=_lags(consumer, [t for t in group_topics if t in existing], existing, timeout),
            missing_topics=tuple(t for t in (*group_topics, dead_letter_topic) if t not in existing),
            dead_lettered=_messages_in(consumer, dead_letter_topic, existing, timeout),
            dead_letter_topic=dead_letter_topic,
        )
    except KafkaException as exc:
        return Unavailable(f"broker: {error_text(exc)}")
    finally:
        consumer.close()


def _lags(consumer: Any, present: list[str], existing: Partitions, timeout: float) -> tuple[PartitionLag, ...]:
    """The group's committed offset against the end offset of every partition of the topics it reads."""
    wanted = [TopicPartition(t, p) for t in present for p in range(existing[t])]
    committed = consumer.committed(wanted, timeout=timeout) if wanted else []
    lags = []
    for tp in committed:
        low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout)
        start = tp.offset if tp.offset >= 0 else low  # nothing committed: everything retained is ahead
        committed_offset = tp.offset if tp.offset >= 0 else None
        lags.append(PartitionLag(tp.topic, tp.partition, committed_offset, end=high, lag=max(0, high - start)))
    return tuple(lags)


def _messages_in(consumer: Any, topic: str, existing: Partitions, timeout: float) -> int | None:
    """The messages retained in ``topic`` (None: no such topic)."""
    if topic not in existing:
        return None
    total = 0
    for p in range(existing[topic]):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        total += max(0, high - low)
    return total
