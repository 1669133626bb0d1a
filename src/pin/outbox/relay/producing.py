"""Hands a batch to Kafka wave by wave and sorts its rows into acknowledged and failed by their delivery reports."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import structlog
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pin.outbox.relay.batch import Batch, PendingRow
from pin.outbox.relay.encoding import kafka_headers
from pin.outbox.relay.errors import SendError, send_error_of
from pin.outbox.relay.hooks import RelayHooks
from pin.outbox.writer import stored_value

log = structlog.get_logger(__name__)


def _deliver(batch: Batch, row_id: int, err: KafkaError | None, msg: Message) -> None:
    """librdkafka's delivery report of one row (called from ``poll``): None = acknowledged, at the partition and
    offset kept in ``batch.positions``."""
    if err is None:
        batch.positions[row_id] = (msg.partition() or 0, msg.offset() or 0)
    batch.outcomes[row_id] = None if err is None else send_error_of(err)


def _produce_row(producer: Producer, row: PendingRow, batch: Batch) -> None:
    """Hand one row to the producer; its delivery report lands in ``batch``. Raises as ``produce`` does."""
    producer.produce(
        row.topic,
        row.value if row.value is not None else stored_value(row.payload or "{}"),
        row.key,
        on_delivery=partial(_deliver, batch, row.id),
        headers=kafka_headers(row),
    )


class BatchProducer:
    """The relay's Kafka producer (replaced when it breaks) and the topics it knows to exist."""

    def __init__(
        self,
        producer_factory: Callable[[], Producer],
        message_timeout_ms: int,
        ensure_topic: Callable[[str], object] | None,
        hooks: RelayHooks,
    ) -> None:
        self._producer_factory = producer_factory
        self.producer: Producer | None = producer_factory()  # None once closed
        self._message_timeout_ms = message_timeout_ms
        self._ensure_topic = ensure_topic
        self._hooks = hooks
        self._ready_topics: set[str] = set()  # topics known to exist (created or checked)
        # a test's hooks may fail rows before they are sent; production's fail none (not asked row by row)
        self._fails_rows = type(hooks).send_error is not RelayHooks.send_error
        self._batches = 0

    def produce(self, rows: list[PendingRow]) -> Batch:
        """A new batch; its first wave goes to the producer (not awaited)."""
        self._batches += 1
        batch = Batch(self._batches, rows, self._current())
        self._send_wave(batch)
        return batch

    def await_outcomes(self, batch: Batch, *, flush: bool) -> None:
        """Await the batch's outcomes wave by wave (a key's next row goes out once its previous is acked).
        ``flush`` when nothing else is in flight: it sends at once instead of after linger.ms (the commit ->
        ack latency of a trickle); otherwise only poll, which does not wait for the other batch's acks."""
        self._await_wave(batch, flush)
        while batch.next_wave < len(batch.waves):
            self._send_wave(batch)
            self._await_wave(batch, flush)
        self._hooks.after_ack(batch.number)

    def broker_answers(self, timeout: float) -> bool:
        """Whether the broker answers a metadata request within ``timeout`` seconds (a relay that gave up asks)."""
        producer = self.producer
        if producer is None:
            return False
        try:
            producer.list_topics(timeout=timeout)
        except KafkaException:
            return False
        return True

    def close(self, timeout: float) -> None:
        """Serve the stray delivery callbacks for at most ``timeout`` seconds, then let the producer go."""
        if self.producer is not None:
            self.producer.flush(timeout)
            self.producer = None

    def _current(self) -> Producer:
        assert self.producer is not None, "the relay was closed"
        return self.producer

    def _send_wave(self, batch: Batch) -> None:
        """Hand the batch's next wave to the producer, but no row of a key that failed in this batch."""
        wave = batch.waves[batch.next_wave]
        batch.next_wave += 1
        sendable = [row for row in wave if row.key not in batch.blocked] if batch.blocked else wave
        batch.unsent += len(wave) - len(sendable)
        batch.wave = sendable
        batch.expected += len(sendable)
        outcomes = batch.outcomes
        topic_errors = {topic: self._topic_ready(topic) for topic in {row.topic for row in sendable}}
        send_error = self._hooks.send_error if self._fails_rows else None
        for row in sendable:
            error = topic_errors[row.topic] or (send_error(row) if send_error is not None else None)
            if error is None:
                try:
                    _produce_row(batch.producer, row, batch)
                except BufferError:  # librdkafka's local queue is full: let it drain, then try once more
                    error = self._produce_again(batch.producer, row, batch)
                except KafkaException as exc:
                    error = send_error_of(exc.args[0])
            if error is not None:
                outcomes[row.id] = error
        batch.producer.poll(0)
        self._hooks.after_produce(batch.number)

    def _produce_again(self, producer: Producer, row: PendingRow, batch: Batch) -> SendError | None:
        producer.flush(self._message_timeout_ms / 1000)
        try:
            _produce_row(producer, row, batch)
        except BufferError:
            return SendError("_QUEUE_FULL", "the producer queue stayed full", retriable=True)
        except KafkaException as exc:
            return send_error_of(exc.args[0])
        return None

    def _await_wave(self, batch: Batch, flush: bool) -> None:
        """Serve delivery reports until every row of the wave has its outcome (or librdkafka's own timeout
        plus a margin passed), then sort the wave into acknowledged and failed rows."""
        outcomes = batch.outcomes
        serve = batch.producer.flush if flush else batch.producer.poll
        deadline = time.monotonic() + self._message_timeout_ms / 1000 + 5
        while len(outcomes) < batch.expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("kafka delivery reports timed out", missing=batch.expected - len(outcomes))
                break
            serve(min(remaining, 0.1))
        broken: SendError | None = None
        if len(outcomes) == batch.expected and all(outcome is None for outcome in outcomes.values()):
            batch.acked += batch.wave  # every row acknowledged (the usual wave): nothing to sort
            batch.wave = []
            return
        for row in batch.wave:
            error = outcomes.setdefault(
                row.id, SendError("_UNRESOLVED", "no delivery report before the flush timeout", True)
            )
            if error is None:
                batch.acked.append(row)
                continue
            batch.failures.append((row, error))
            batch.blocked.add(row.key)  # no later row of this key goes out in this batch
            if error.unknown_topic:
                self._ready_topics.discard(row.topic)  # deleted meanwhile? the next batch checks it again
            if error.fatal:
                broken = error
        batch.wave = []
        if broken is not None:
            if batch.producer is self.producer:
                log.warning("kafka producer unusable: replacing it", error=broken.text())
                self.producer = self._producer_factory()
            batch.producer = self._current()

    def _topic_ready(self, topic: str) -> SendError | None:
        """Before the first send to a topic: create it if missing (with SPEC's partitions, before any metadata
        request lets a broker auto-create it its own way). If it is missing and cannot be created, its rows can
        never be delivered: a permanent error. Checked once per topic per process while it works."""
        if topic in self._ready_topics or self._ensure_topic is None:
            return None
        error = self._create_topic(topic)
        if error is not None and not error.retriable and self._topic_exists(topic):
            error = None  # not allowed to create topics, but this one is there
        if error is None:
            self._ready_topics.add(topic)
        return error

    def _topic_exists(self, topic: str) -> bool:
        try:
            metadata = self._current().list_topics(topic, timeout=5.0)
        except KafkaException:
            return False
        found = metadata.topics.get(topic)
        return found is not None and found.error is None and bool(found.partitions)

    def _create_topic(self, topic: str) -> SendError | None:
        """Create the topic if missing; None when it exists afterwards."""
        if self._ensure_topic is None:
            return None
        try:
            self._ensure_topic(topic)
        except KafkaException as exc:
            error = send_error_of(exc.args[0])
            if error.retriable:  # the broker is away: not the topic's fault
                return error
            return SendError(error.code, f"unknown topic and creating it failed: {error.reason}", permanent=True)
        except Exception as exc:  # noqa: BLE001 - e.g. a timeout: we do not know, so it is not final
            return SendError("TOPIC_CHECK_FAILED", f"creating the topic if missing failed: {exc}", retriable=True)
        return None
