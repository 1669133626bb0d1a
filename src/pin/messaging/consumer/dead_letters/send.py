"""Dead-lettering a message the group will never handle: into ``pin.dlq.<group>.v1``, else kept in the database.

The rules (provenance headers, truncation, the bounded publish attempts, parking) are in docs/design/consumers.md
and docs/runbooks/consumers.md; the rows are :mod:`pin.messaging.consumer.dead_letters.store`'s.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.consumer.dead_letters import index, store
from pin.messaging.consumer.dead_letters.store import DLT_ORIGINAL_SHA256, DLT_ORIGINAL_SIZE, DLT_STORED_ID, Origin
from pin.messaging.consumer.metrics import (
    DEAD_LETTER_FAILURES,
    DEAD_LETTERED,
    DEAD_LETTERS_PARKED,
    DEAD_LETTERS_TRUNCATED,
)
from pin.messaging.consumer.received import Received
from pin.messaging.contracts import utc_iso
from pin.messaging.topics import dead_letter_topic

# Provenance headers added to a dead-lettered message (the names follow Spring Kafka's kafka_dlt-* convention).
DLT_PREFIX = "dlt-"
DLT_HEADERS = (
    "dlt-original-topic",
    "dlt-original-partition",
    "dlt-original-offset",
    "dlt-original-timestamp",
    "dlt-consumer-group",
    "dlt-exception-type",
    "dlt-exception-message",
    "dlt-attempts",
    "dlt-failed-at",
)
_MAX_ERROR_TEXT = 1000

# A message by where it was read: (topic, partition, offset).
_Where = tuple[str, int, int]


@dataclass
class DeadLetterSender:
    """A group's dead-letter sender: publishes, cuts, counts the failed publishes, parks."""

    group: str
    pool: ConnectionPool[Conn]
    log: Any
    # the dead-letter producer's bound (a larger letter is cut, its full bytes stored)
    max_message_bytes: int
    # seconds to wait for the broker's acknowledgement of one letter
    dlq_timeout: float
    # publishes the broker did not acknowledge before the letter is parked in the database
    attempts: int
    # seconds to wait for a database connection
    db_timeout: float
    # the dead-letter producer, while the runtime runs
    producer: Producer | None = None
    # failed dead-letter publishes per message, until it is kept somewhere
    _failures: dict[_Where, int] = field(default_factory=dict, init=False)

    def settled(self, message: Received) -> None:
        """``message`` is handled after all (e.g. on a retry after a failed dead letter): forget its failures."""
        if self._failures:
            self._failures.pop(_where(message), None)

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """Forget the failures of partitions this instance no longer owns."""
        # lanes write other messages' counts meanwhile: a copy of the keys (taken at once), then pop
        for where in [w for w in list(self._failures) if (w[0], w[1]) in partitions]:
            self._failures.pop(where, None)

    def send(self, message: Received, exc: BaseException, attempts: int) -> bool:
        """Keep a message that will never be handled; True once it is kept (its offset may be committed).

        Kept means: in the group's dead-letter topic whole; or, when the dead-letter producer cannot carry it whole,
        cut there with its full bytes in ``messaging.dead_letter``; or, after ``attempts`` publishes the broker did
        not acknowledge, parked in ``messaging.dead_letter`` alone (:meth:`_failed`).
        """
        origin = Origin(
            group=self.group, topic=message.topic, partition=message.partition, offset=message.offset,
            timestamp_ms=message.timestamp_ms, error_type=type(exc).__name__, error=error_line(exc),
            attempts=attempts,
        )  # fmt: skip
        original = [(name, value) for name, value in message.headers if not name.startswith(DLT_PREFIX)]
        if not self._index(message, origin, original):
            return False  # indexed before it is published, so that no letter is in the topic and not in the index
        provenance = provenance_headers(origin, datetime.now(UTC))
        whole = [*original, *provenance]
        if store.record_size(message.key, message.value, whole) <= self.max_message_bytes:
            error = self._publish(message.key, message.value, whole)
            if error is None:
                return self._sent(message, origin, stored_id=None)
            if error.code() != KafkaError.MSG_SIZE_TOO_LARGE:  # the broker's own bound may be lower than ours
                return self._failed(message, origin, str(error))
        return self._send_cut(message, origin, original, provenance)

    def _send_cut(
        self, message: Received, origin: Origin, original: list[tuple[str, bytes]], provenance: list[tuple[str, bytes]]
    ) -> bool:
        """The full bytes into the database, a copy cut to the bound (naming the row) into the dead-letter topic."""
        try:
            stored_id = self._store(message, origin, store.TRUNCATED, original)
        except Exception as exc:  # noqa: BLE001 - counted as a failed attempt to keep it; parked later if possible
            return self._failed(message, origin, f"storing its bytes: {type(exc).__name__}")
        truncation = [
            (DLT_ORIGINAL_SIZE, str(len(message.value or b"")).encode()),
            (DLT_ORIGINAL_SHA256, store.sha256_hex(message.value).encode()),
            (DLT_STORED_ID, str(stored_id).encode()),
        ]
        key, value, headers = store.cut_letter(
            message.key, message.value, original, [*provenance, *truncation], self.max_message_bytes
        )
        error = self._publish(key, value, headers)
        if error is not None:
            return self._failed(message, origin, str(error))
        DEAD_LETTERS_TRUNCATED.labels(self.group, message.topic).inc()
        return self._sent(message, origin, stored_id=stored_id)

    def _publish(self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> KafkaError | None:
        """Send one record to the group's dead-letter topic and wait (at most ``dlq_timeout``) for the broker's ack."""
        producer = self.producer
        assert producer is not None
        outcome: list[KafkaError | None] = []
        record_headers: list[tuple[str, str | bytes | None]] = [*headers]
        try:
            producer.produce(
                dead_letter_topic(self.group),
                key=key,
                value=value,
                headers=record_headers,
                on_delivery=lambda err, _msg: outcome.append(err),
            )
            producer.flush(self.dlq_timeout)
        except KafkaException as exc:  # refused before sending (e.g. larger than message.max.bytes)
            error = exc.args[0]
            return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))
        except BufferError as exc:
            return KafkaError(KafkaError._FAIL, str(exc))
        if not outcome:
            return KafkaError(KafkaError._MSG_TIMED_OUT, f"no acknowledgement within {self.dlq_timeout:g} s")
        return outcome[0]

    def _sent(self, message: Received, origin: Origin, *, stored_id: uuid.UUID | None) -> bool:
        self._failures.pop(_where(message), None)
        DEAD_LETTERED.labels(self.group, message.topic).inc()
        self.log.error(
            "message dead-lettered",
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            error_type=origin.error_type,
            attempts=origin.attempts,
            dead_letter_topic=dead_letter_topic(self.group),
            truncated=stored_id is not None,
            stored_id=str(stored_id) if stored_id is not None else None,
        )
        return True

    def _failed(self, message: Received, origin: Origin, error: str) -> bool:
        """A dead letter the topic did not take: retried ``attempts`` times, then parked in the database.

        Bounded on purpose: a letter the broker refuses for good (too large for the topic, no such topic, no
        permission) would otherwise hold its partition for ever. Parked, nothing is lost (the row has every byte,
        `pin dlq list` shows it, `pin dlq replay` sends it) and the partition goes on. Only when the database
        cannot take it either is the message held (and retried): then every message of the group is waiting for
        the database anyway, and skipping it would lose it.
        """
        where = _where(message)
        failures = self._failures.get(where, 0) + 1
        self._failures[where] = failures
        DEAD_LETTER_FAILURES.labels(self.group, message.topic).inc()
        failure_log = self.log.bind(topic=message.topic, partition=message.partition, offset=message.offset)
        failure_log.error("dead-letter publish failed", error=error, failures=failures, of=self.attempts)
        if failures < self.attempts:
            return False
        try:
            original = [(name, value) for name, value in message.headers if not name.startswith(DLT_PREFIX)]
            stored_id = self._store(message, origin, store.PARKED, original)
        except Exception as exc:  # noqa: BLE001 - held and retried: the database is the last place to keep it
            failure_log.error("dead letter could not be parked in the database; held", error_type=type(exc).__name__)
            return False
        self._failures.pop(where, None)
        DEAD_LETTERS_PARKED.labels(self.group, message.topic).inc()
        failure_log.error("dead letter parked in the database", stored_id=str(stored_id), error_type=origin.error_type)
        return True

    def _store(
        self, message: Received, origin: Origin, disposition: str, original: list[tuple[str, bytes]]
    ) -> uuid.UUID:
        """The full bytes into ``messaging.dead_letter``, and the index row pointed at them, in one transaction."""
        with self.pool.connection(timeout=self.db_timeout) as conn:
            stored_id = store.store(conn, origin, message.key, message.value, message.headers, disposition=disposition)
            index.write(
                conn, origin, message.key, message.value, original, disposition=disposition, stored_id=stored_id
            )
            return stored_id

    def _index(self, message: Received, origin: Origin, original: list[tuple[str, bytes]]) -> bool:
        """Index the letter (``messaging.dead_letter_index``); False, logged, when the database does not take it."""
        try:
            with self.pool.connection(timeout=self.db_timeout) as conn:
                index.write(conn, origin, message.key, message.value, original)
        except Exception as exc:  # noqa: BLE001 - held and retried like a letter the topic did not take
            self.log.error(
                "dead letter not indexed; held", topic=message.topic, partition=message.partition,
                offset=message.offset, error_type=type(exc).__name__,
            )  # fmt: skip
            return False
        return True


def provenance_headers(origin: Origin, failed_at: datetime) -> list[tuple[str, bytes]]:
    """The :data:`DLT_HEADERS` of a dead letter, in order."""
    values = (origin.topic, str(origin.partition), str(origin.offset), str(origin.timestamp_ms), origin.group,
              origin.error_type, origin.error, str(origin.attempts), utc_iso(failed_at))  # fmt: skip
    return [(name, value.encode()) for name, value in zip(DLT_HEADERS, values, strict=True)]


def error_line(exc: BaseException) -> str:
    """The error's message, one line, bounded, without NUL (payloads carry no PII by contract, so neither does this)."""
    text = " ".join(str(exc).replace("\x00", " ").split()) or type(exc).__name__
    return text[:_MAX_ERROR_TEXT]


def _where(message: Received) -> _Where:
    return (message.topic, message.partition, message.offset)
