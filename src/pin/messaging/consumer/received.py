"""A consumed message as the runtime keeps it, and its Kafka headers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Message


@dataclass(frozen=True)
class Received:
    """One consumed message, as the runtime keeps it (librdkafka's Message types every field as optional)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int

    @classmethod
    def of(cls, message: Message) -> Received:
        """Copy a consumed message out of librdkafka's object."""
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None, "a consumed message has a topic"
        assert partition is not None, "a consumed message has a partition"
        assert offset is not None, "a consumed message has an offset"
        # positional: this runs for every message (the keywords of a frozen dataclass cost a third more)
        return cls(
            topic, partition, offset, message.key(), message.value(), normalize_headers(message.headers()),
            message.timestamp()[1],
        )  # fmt: skip

    @property
    def partition_key(self) -> tuple[str, int]:
        """(topic, partition)."""
        return (self.topic, self.partition)


def normalize_headers(
    headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
) -> list[tuple[str, bytes]]:
    """Kafka headers as (name, bytes) pairs, in order."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or []
    return [(name, value.encode() if isinstance(value, str) else (value or b"")) for name, value in pairs]
