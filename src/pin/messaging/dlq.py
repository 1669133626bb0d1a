"""Inspecting and replaying dead-lettered messages (`pin dlq list|replay`, SPEC section 9).

A dead letter is the original message (key, value, headers) plus the ``dlt-*`` provenance headers the
consumer runtime added. Listing reads the dead-letter topic from the beginning without a consumer group
commit, so it changes nothing. Replaying publishes the original key, value and headers back to the original
topic: the MessageId is unchanged, so a message that was in fact handled before is skipped by the inbox, and a
fixed consumer handles the rest exactly once. Replay does not remove anything from the dead-letter topic.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from pin.messaging.consumer import DLT_PREFIX, Received
from pin.messaging.kafka import client_config, producer_config, silent_client_logger
from pin.messaging.topics import CONSUMER_GROUPS, dead_letter_topic
from pin.observability.logging import error_text
from pin.settings import ConfigurationError, Settings


class DeadLetterError(RuntimeError):
    """Reading or replaying a dead-letter topic failed (the broker refused, or did not answer in time)."""


@dataclass(frozen=True)
class DeadLetter:
    """One message of a group's dead-letter topic."""

    group: str
    record: Received

    @property
    def provenance(self) -> dict[str, str]:
        """The ``dlt-*`` headers: origin topic, partition, offset, timestamp, group, error, attempts, time."""
        return {n: v.decode("utf-8", "replace") for n, v in self.record.headers if n.startswith(DLT_PREFIX)}

    @property
    def original_headers(self) -> list[tuple[str, bytes]]:
        """The headers the message had before it was dead-lettered."""
        return [(n, v) for n, v in self.record.headers if not n.startswith(DLT_PREFIX)]

    @property
    def message_id(self) -> str | None:
        """The MessageId (header, else the JSON value), or None for a message that has neither."""
        for name, value in self.original_headers:
            if name == "message-id" and value:
                return value.decode("utf-8", "replace")
        try:
            payload = json.loads(self.record.value or b"")
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        raw = payload.get("MessageId") if isinstance(payload, dict) else None
        return str(raw) if raw is not None else None

    def summary(self) -> dict[str, Any]:
        """What an operator needs to decide: where it came from, why it failed (no payload: no PII risk)."""
        origin = self.provenance
        return {
            "group": self.group,
            "dlqPartition": self.record.partition,
            "dlqOffset": self.record.offset,
            "messageId": self.message_id,
            "key": self.record.key.decode("utf-8", "replace") if self.record.key is not None else None,
            "originTopic": origin.get("dlt-original-topic"),
            "originPartition": origin.get("dlt-original-partition"),
            "originOffset": origin.get("dlt-original-offset"),
            "originTimestamp": origin.get("dlt-original-timestamp"),
            "errorType": origin.get("dlt-exception-type"),
            "error": origin.get("dlt-exception-message"),
            "attempts": origin.get("dlt-attempts"),
            "failedAt": origin.get("dlt-failed-at"),
        }


def check_group(group: str) -> str:
    """``group`` if it is one of the consumer groups, else a configuration error (exit 2)."""
    if group not in CONSUMER_GROUPS:
        raise ConfigurationError(f"--group: unknown consumer group {group!r} (one of {', '.join(CONSUMER_GROUPS)})")
    return group


def read_dead_letters(
    settings: Settings, groups: Iterable[str], *, idle_seconds: float = 2.0, timeout: float = 60.0
) -> list[DeadLetter]:
    """Every dead letter of ``groups``, from the beginning; stops once nothing new came for ``idle_seconds``.

    It never relies on watermarks (the embedded broker reports them wrongly) and commits nothing.
    """
    letters: list[DeadLetter] = []
    for group in groups:
        letters.extend(_read_topic(settings, group, idle_seconds=idle_seconds, timeout=timeout))
    return letters


def _read_topic(settings: Settings, group: str, *, idle_seconds: float, timeout: float) -> list[DeadLetter]:
    topic = dead_letter_topic(group)
    config = client_config(
        settings,
        **{"group.id": f"pin-dlq-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
           "enable.partition.eof": True, "logger": silent_client_logger("pin.dlq.kafka")},
    )  # fmt: skip
    consumer = Consumer(config)
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException as exc:
            raise DeadLetterError(f"reading {topic}: {error_text(exc)}") from exc
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions])
        letters: list[DeadLetter] = []
        # The idle window starts once every partition has answered a fetch (a message or an end-of-partition
        # event), not at assign: a new reader needs several round trips before its first fetch, and a loaded
        # broker must not make a short window end before anything was read. The end-of-partition event only
        # says "this fetch came back"; the idle window, not the watermark behind it, decides when to stop.
        silent = set(metadata.partitions)
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline and (silent or time.monotonic() - last < idle_seconds):
            polled = consumer.poll(0.2)
            if polled is None:
                continue
            silent.discard(polled.partition())
            last = time.monotonic()
            error = polled.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise DeadLetterError(f"reading {topic}: {error}")
                continue
            letters.append(DeadLetter(group, Received.of(polled)))
        if silent:
            raise DeadLetterError(f"reading {topic}: partitions {sorted(silent)} did not answer within {timeout:g} s")
        return sorted(letters, key=lambda letter: (letter.record.partition, letter.record.offset))
    finally:
        consumer.close()


def replay(
    settings: Settings, group: str, *, message_id: str | None = None, idle_seconds: float = 2.0
) -> list[DeadLetter]:
    """Publish ``group``'s dead letters (or the one with ``message_id``) back to their original topics."""
    letters = [
        letter
        for letter in read_dead_letters(settings, [group], idle_seconds=idle_seconds)
        if message_id is None or letter.message_id == message_id
    ]
    producer = Producer(producer_config(settings, **{"client.id": f"pin-dlq-replay-{group}", "linger.ms": 0}))
    failures: list[KafkaError] = []
    replayed: list[DeadLetter] = []
    for letter in letters:
        origin = letter.provenance.get("dlt-original-topic")
        if not origin:
            continue  # not written by the runtime: nowhere to send it back
        headers: list[tuple[str, str | bytes | None]] = [*letter.original_headers]
        producer.produce(
            origin,
            key=letter.record.key,
            value=letter.record.value,
            headers=headers,
            on_delivery=lambda err, _msg: failures.append(err) if err is not None else None,
        )
        replayed.append(letter)
    remaining = producer.flush(30)
    producer.close()
    if remaining or failures:
        raise DeadLetterError(f"replay of {group}: {len(failures) + remaining} message(s) not acknowledged")
    return replayed
