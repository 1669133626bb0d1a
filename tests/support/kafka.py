"""Reading topics from the beginning, without a consumer group (so nothing is committed)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from pin.messaging.topics import PARTITIONS


@dataclass(frozen=True)
class Record:
    """One message as read back from the broker."""

    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes
    headers: dict[str, str]

    def json(self) -> dict[str, Any]:
        """The value parsed as JSON."""
        parsed: dict[str, Any] = json.loads(self.value)
        return parsed


def read_topic(
    bootstrap: str, topic: str, *, expected: int | None = None, timeout: float = 20.0, idle: float = 2.0
) -> list[Record]:
    """Every message of ``topic`` from offset 0, in partition order.

    Stops when ``expected`` messages arrived (or the timeout passed), or, with ``expected=None``, after
    ``idle`` seconds without a new message. Never relies on watermarks (Tansu reports them wrongly).
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pin-test-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    last_message = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(records) >= expected:
                break
            if expected is None and time.monotonic() - last_message > idle:
                break
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            last_message = time.monotonic()
            key = message.key()
            records.append(
                Record(
                    topic=message.topic(),
                    partition=message.partition(),
                    offset=message.offset(),
                    key=key.decode() if key is not None else None,
                    value=message.value() or b"",
                    headers={k: (v or b"").decode() for k, v in (message.headers() or [])},
                )
            )
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))
