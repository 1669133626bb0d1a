"""Inspecting and replaying dead-lettered messages (`pin dlq list|replay`, SPEC section 9): listing commits nothing,
replay sends the original key, value and headers (or a stored letter's full bytes) back to the original topic;
see docs/design/consumers.md, "Dead letters".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from pin.db import ConnectionPolicy, connect
from pin.messaging.consumer.dead_letters import store
from pin.messaging.consumer.dead_letters.index import message_id_of
from pin.messaging.consumer.dead_letters.send import DLT_PREFIX, provenance_headers
from pin.messaging.consumer.dead_letters.store import (
    DLT_ORIGINAL_SHA256,
    DLT_ORIGINAL_SIZE,
    DLT_STORED_ID,
    StoredLetter,
)
from pin.messaging.consumer.received import Received
from pin.messaging.kafka import client_config, producer_config, silent_client_logger
from pin.messaging.topics import CONSUMER_GROUPS, dead_letter_topic
from pin.observability.logging import error_text
from pin.settings import ConfigurationError, Settings

# The group id of a dead-letter reader is this plus a random suffix: it assigns partitions and never commits, so
# that no reader moves another's position (the operator's ACLs name the prefix).
DLQ_READER_GROUP_PREFIX = "pin-dlq-reader-"


class DeadLetterError(RuntimeError):
    """Reading or replaying a dead-letter topic failed (the broker refused, or did not answer in time)."""


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter of a group: a message of its dead-letter topic, or a row parked in the database."""

    group: str
    record: Received | None
    parked: StoredLetter | None = None

    @property
    def provenance(self) -> dict[str, str]:
        """The ``dlt-*`` headers: origin topic, partition, offset, timestamp, group, error, attempts, time."""
        if self.parked is not None:
            headers = provenance_headers(self.parked.origin, self.parked.failed_at)
            return {name: value.decode() for name, value in headers}
        assert self.record is not None
        return {n: v.decode("utf-8", "replace") for n, v in self.record.headers if n.startswith(DLT_PREFIX)}

    @property
    def original_headers(self) -> list[tuple[str, bytes]]:
        """The headers the message had before it was dead-lettered (of a cut letter: those that fitted)."""
        if self.parked is not None:
            return list(self.parked.headers)
        assert self.record is not None
        return [(n, v) for n, v in self.record.headers if not n.startswith(DLT_PREFIX)]

    @property
    def stored_id(self) -> uuid.UUID | None:
        """The ``messaging.dead_letter`` row with the full bytes: of a parked or a truncated letter, else None."""
        if self.parked is not None:
            return self.parked.id
        try:
            raw = self.provenance.get(DLT_STORED_ID)
            return uuid.UUID(raw) if raw else None
        except ValueError:
            return None

    @property
    def message_id(self) -> str | None:
        """The MessageId (header, else the JSON value), or None for a message that has neither."""
        value = self.parked.value if self.parked is not None else self.record.value if self.record else None
        return message_id_of(self.original_headers, value)

    def summary(self) -> dict[str, Any]:
        """What an operator needs to decide: where it came from, why it failed, where its bytes are (no payload)."""
        origin = self.provenance
        key = self.parked.key if self.parked is not None else self.record.key if self.record else None
        stored_id = self.stored_id
        return {
            "group": self.group,
            "dlqPartition": self.record.partition if self.record else None,
            "dlqOffset": self.record.offset if self.record else None,
            "messageId": self.message_id,
            "key": key.decode("utf-8", "replace")[:200] if key is not None else None,
            "originTopic": origin.get("dlt-original-topic"),
            "originPartition": origin.get("dlt-original-partition"),
            "originOffset": origin.get("dlt-original-offset"),
            "originTimestamp": origin.get("dlt-original-timestamp"),
            "errorType": origin.get("dlt-exception-type"),
            "error": origin.get("dlt-exception-message"),
            "attempts": origin.get("dlt-attempts"),
            "failedAt": origin.get("dlt-failed-at"),
            # the topic holds a copy cut to the dead-letter producer's bound; the full bytes are in the row
            "truncated": self.parked is None and stored_id is not None,
            # the topic never took it: the row is the dead letter
            "parked": self.parked is not None,
            "originalSize": self.parked.value_size if self.parked else _int_or_none(origin.get(DLT_ORIGINAL_SIZE)),
            "sha256": self.parked.value_sha256 if self.parked else origin.get(DLT_ORIGINAL_SHA256),
            "fullBytesAt": f"{store.STORED_TABLE} id={stored_id}" if stored_id is not None else None,
        }


def _int_or_none(raw: str | None) -> int | None:
    return int(raw) if raw is not None and raw.isdecimal() else None


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
    if settings.database.url:
        letters.extend(read_parked(settings, list(groups)))
    return letters


def read_parked(settings: Settings, groups: Sequence[str]) -> list[DeadLetter]:
    """The letters of ``groups`` parked in the database (the dead-letter topic refused them)."""
    try:
        with _database(settings) as conn:
            return [DeadLetter(row.origin.group, None, row) for row in store.parked(conn, groups)]
    except psycopg.Error as exc:
        raise DeadLetterError(f"reading {store.STORED_TABLE}: {error_text(exc)}") from exc


def _database(settings: Settings) -> psycopg.Connection[dict[str, object]]:
    """A connection for the stored dead letters; a failure is a one-line :class:`DeadLetterError`."""
    try:
        url = settings.database.require_url()
        return connect(url, policy=ConnectionPolicy.from_settings(settings, "command"))
    except (psycopg.Error, ConfigurationError) as exc:
        raise DeadLetterError(f"reading {store.STORED_TABLE}: {error_text(exc)}") from exc


def _read_topic(settings: Settings, group: str, *, idle_seconds: float, timeout: float) -> list[DeadLetter]:
    topic = dead_letter_topic(group)
    config = client_config(
        settings,
        **{"group.id": f"{DLQ_READER_GROUP_PREFIX}{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
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
        letters: list[Received] = []
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
            letters.append(Received.of(polled))
        if silent:
            raise DeadLetterError(f"reading {topic}: partitions {sorted(silent)} did not answer within {timeout:g} s")
        return [DeadLetter(group, record) for record in sorted(letters, key=lambda r: (r.partition, r.offset))]
    finally:
        consumer.close()


def replay(
    settings: Settings, group: str, *, message_id: str | None = None, idle_seconds: float = 2.0
) -> list[DeadLetter]:
    """Publish ``group``'s dead letters (or the one with ``message_id``) back to their original topics.

    A truncated or parked letter is sent as the database row has it: the full original bytes.
    """
    letters = [
        letter
        for letter in read_dead_letters(settings, [group], idle_seconds=idle_seconds)
        if (message_id is None or letter.message_id == message_id) and letter.provenance.get("dlt-original-topic")
    ]  # a letter without an origin was not written by the runtime: nowhere to send it back
    originals = _originals(settings, letters)
    largest = max((store.record_size(k, v, h) for _, k, v, h in originals), default=0)
    # the producer must carry the largest original whole (the broker took it once); never below librdkafka's default
    producer = Producer(producer_config(settings, **{"client.id": f"pin-dlq-replay-{group}", "linger.ms": 0,
                                                     "message.max.bytes": max(1_000_000, largest)}))  # fmt: skip
    failures: list[KafkaError] = []
    for origin, key, value, headers in originals:
        producer.produce(
            origin,
            key=key,
            value=value,
            headers=list[tuple[str, str | bytes | None]](headers),
            on_delivery=lambda err, _msg: failures.append(err) if err is not None else None,
        )
    remaining = producer.flush(30)
    producer.close()
    if remaining or failures:
        raise DeadLetterError(f"replay of {group}: {len(failures) + remaining} message(s) not acknowledged")
    return letters


Original = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]


def _originals(settings: Settings, letters: list[DeadLetter]) -> list[Original]:
    """(origin topic, key, value, headers) of each letter, the full bytes from the database where they are kept."""
    stored: dict[uuid.UUID, StoredLetter] = {}
    wanted = [letter.stored_id for letter in letters if letter.parked is None and letter.stored_id is not None]
    try:
        if wanted:
            with _database(settings) as conn:
                stored = {i: row for i in wanted if (row := store.load(conn, i)) is not None}
    except psycopg.Error as exc:
        raise DeadLetterError(f"reading {store.STORED_TABLE}: {error_text(exc)}") from exc
    missing = [i for i in wanted if i not in stored]
    if missing:
        raise DeadLetterError(f"{store.STORED_TABLE} id={missing[0]}: no such row (the full bytes)")
    originals: list[Original] = []
    for letter in letters:
        topic = letter.provenance["dlt-original-topic"]
        full = letter.parked or (stored.get(letter.stored_id) if letter.stored_id else None)
        if full is not None:
            originals.append((topic, full.key, full.value, list(full.headers)))
        else:
            assert letter.record is not None
            originals.append((topic, letter.record.key, letter.record.value, letter.original_headers))
    return originals
