"""The consumer runtime every consumer group runs on (SPEC section 7; seed 003, «Доставка, retry/DLQ»).

One process of a group is one :class:`ConsumerRuntime`: a confluent-kafka (librdkafka) consumer of the classic
group protocol that handles its messages in partition order, a batch at a time: what one poll returns (up to
``batch_size`` messages), each partition's messages in one transaction.

Guarantees, and how they are kept:

- **At least once, effect before offset.** Auto-commit is off; a partition's offset is committed after the
  transaction with the effects of the messages before it committed in PostgreSQL: asynchronously once per poll
  (no broker round trip per message), and synchronously when partitions are revoked and when the consumer stops.
  A crash between the two (or a lost asynchronous commit) redelivers the messages; the inbox skips them.
- **Exactly one effect.** The transaction of the effect first inserts the messages' MessageIds into the group's
  inbox (``messaging.inbox``); a conflict means the message was handled before: it is skipped and its offset
  committed (:data:`INBOX_INSERT`, :data:`INBOX_INSERT_MANY`).
- **Batches, and a poison message in one.** The messages of one partition from one poll are handled in one
  transaction (the inbox rows, then each new message's effect, in offset order). A message that cannot be read
  ends the batch before it: the readable messages before it commit in one transaction, it is dead-lettered on its
  own, and the messages after it are the next batch. If anything in a batch's transaction fails, nothing of it is
  kept and the same messages are handled again one per transaction, exactly as a lone message is: the others'
  effects commit once, the failing one is retried and dead-lettered on its own, and the offset never passes it
  before that.
- **Retry without moving past the offset.** A failed message is kept in hand and its partition is paused; the
  loop goes on polling (so ``max.poll.interval.ms`` is never exceeded) and the other partitions go on. When
  the backoff (exponential, with jitter) is over, the same message is tried again; after success the partition
  resumes from the next offset. Two kinds of failure are told apart:

  * the database is unreachable (connection refused or lost, the pool timed out): the message is not at fault,
    so it is retried for as long as the outage lasts (backoff capped at ``backoff_cap``) and never dead-lettered
    (dead-lettering during an outage would empty the partition into the DLQ);
  * anything else (deadlock, serialization failure, a constraint, a bug): after ``max_attempts`` attempts the
    message goes to the dead-letter topic.

- **Unreadable messages go to the DLQ at once** (:class:`UnreadableMessageError`, from the one shared validation of
  :mod:`pin.messaging.envelope` and the groups' tolerant models): larger than ``max_message_bytes``, not JSON,
  nested deeper than 1024, not an object, no MessageId, a string with NUL, a time that is not RFC 3339, a missing
  required field or a wrong type. Decoding is bounded and can raise nothing else; it is caught per message, so one
  unreadable message in a batch is dead-lettered alone while the messages around it are applied. An unknown
  ContractVersion is only a warning; unknown enum values are the handlers' business (they take the neutral path
  and call :meth:`HandlingContext.unknown_value`).
- **Dead-lettering**: the original key, value and headers plus provenance headers (:data:`DLT_HEADERS`) go to
  the group's dead-letter topic; only after the broker acknowledged it is the offset committed. A letter larger
  than the dead-letter producer's bound (``max_message_bytes``, the one setting ``PIN_KAFKA_MAX_MESSAGE_BYTES``)
  is stored whole in ``messaging.dead_letter`` and sent cut, with its size, digest and row id in headers
  (:data:`DLT_TRUNCATION_HEADERS`). A publish the broker does not acknowledge is retried with the message's
  backoff, at most ``dead_letter_attempts`` times; then the letter is parked in ``messaging.dead_letter`` and the
  partition goes on (:meth:`ConsumerRuntime._dead_letter_failed` says why that bound).
- **Shutdown and rebalance finish the batch in hand**: a batch is handled completely (effects committed) between
  two polls, and rebalance callbacks run inside poll, so a revoke never interrupts one; the revoke callback
  commits the revoked partitions' offsets synchronously before they move. A message held for a retry (and the
  messages of its batch behind it) is dropped on revoke without a commit: the partition's next owner reads it
  again.
- **Lag** (``pin_consumer_lag``) comes from librdkafka's statistics every ``statistics_interval_ms``: per fetched
  partition, the high watermark minus the consumer's position (:func:`partition_lag`). It is for operators only;
  the embedded broker reports a wrong high watermark, and nothing here depends on it.
- **Rebalance**: the classic group protocol (the embedded broker has no KIP-848); partitions are resumed when
  assigned, so a partition paused for a retry before a revoke never comes back paused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

import psycopg
import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from opentelemetry.trace import SpanKind
from prometheus_client import Counter, Gauge
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import ValidationError

from pin.messaging import dead_letter_store
from pin.messaging.contracts import utc_iso
from pin.messaging.dead_letter_store import DLT_ORIGINAL_SHA256, DLT_ORIGINAL_SIZE, DLT_STORED_ID, Origin
from pin.messaging.envelope import Envelope, UnreadableMessageError, decode_envelope
from pin.messaging.topics import dead_letter_topic
from pin.observability.tracing import context_from_headers, spans_exported, tracer
from pin.settings import Settings

Conn = psycopg.Connection[dict[str, object]]
T = TypeVar("T")

log = structlog.get_logger(__name__)

SUPPORTED_CONTRACT_VERSION = 1

PROCESSED = Counter(
    "pin_consumer_processed", "Messages whose effect committed (or that needed none).", ["group", "topic"]
)
DUPLICATES = Counter(
    "pin_consumer_duplicates", "Messages skipped because their MessageId was in the inbox.", ["group", "topic"]
)
RETRIES = Counter("pin_consumer_retries", "Failed attempts that will be retried.", ["group", "topic"])
DEAD_LETTERED = Counter(
    "pin_consumer_dead_lettered", "Messages published to the group's dead-letter topic.", ["group", "topic"]
)
DEAD_LETTERS_TRUNCATED = Counter(
    "pin_consumer_dead_letters_truncated",
    "Dead letters too large for the dead-letter producer: cut, full bytes in messaging.dead_letter.",
    ["group", "topic"],
)
DEAD_LETTER_FAILURES = Counter(
    "pin_consumer_dead_letter_failures", "Dead-letter publishes the broker did not acknowledge.", ["group", "topic"]
)
DEAD_LETTERS_PARKED = Counter(
    "pin_consumer_dead_letters_parked",
    "Dead letters the topic refused on every attempt, kept in messaging.dead_letter instead (partition went on).",
    ["group", "topic"],
)
UNKNOWN_VALUES = Counter(
    "pin_consumer_unknown_values", "Enum values this consumer does not know (neutral path taken).", ["group", "field"]
)
LAG = Gauge(
    "pin_consumer_lag",
    "Messages behind the high watermark per assigned partition (informational; from librdkafka statistics).",
    ["group", "topic", "partition"],
)

# Dedup and effect in one transaction: zero rows inserted means the message was handled before.
INBOX_INSERT = """
INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset")
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id
"""

# The same for the messages of one partition from one poll (one transaction): the ids that were not there before.
INBOX_INSERT_MANY = """
INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset")
SELECT %s, m.message_id, %s, %s, m."offset" FROM unnest(%s::uuid[], %s::bigint[]) AS m(message_id, "offset")
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id
"""

# Bounded, oldest first: the prune never holds long locks or scans the whole table.
INBOX_PRUNE = """
WITH old AS (
    SELECT consumer_group, message_id FROM messaging.inbox
    WHERE consumer_group = %s AND processed_at < now() - make_interval(secs => %s)
    ORDER BY processed_at
    LIMIT %s
)
DELETE FROM messaging.inbox AS i USING old
WHERE i.consumer_group = old.consumer_group AND i.message_id = old.message_id
"""

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
# Added to a truncated dead letter only (see messaging/dead_letter_store.py).
DLT_TRUNCATION_HEADERS = (DLT_ORIGINAL_SIZE, DLT_ORIGINAL_SHA256, DLT_STORED_ID)
# The dead-letter producer's message.max.bytes, and the largest value a consumer reads, unless told otherwise.
DEFAULT_MAX_MESSAGE_BYTES: int = Settings.model_fields["kafka_max_message_bytes"].default
_MAX_ERROR_TEXT = 1000


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
        return cls(
            topic=topic,
            partition=partition,
            offset=offset,
            key=message.key(),
            value=message.value(),
            headers=normalize_headers(message.headers()),
            timestamp_ms=message.timestamp()[1],
        )

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


def header_map(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """Kafka headers as text (the last value of a repeated header wins)."""
    return {name: value.decode("utf-8", errors="replace") for name, value in headers}


@dataclass
class HandlingContext:
    """What a handler knows about the message it handles, and how it reports unknown enum values."""

    group: str
    topic: str
    message_id: uuid.UUID
    unknown: list[tuple[str, str]] = field(default_factory=list)

    def unknown_value(self, field_name: str, raw: str) -> None:
        """Record an enum value this consumer does not know; logged and counted once the message is handled."""
        self.unknown.append((field_name, raw))


@dataclass(frozen=True)
class Route(Generic[T]):
    """How a group handles one topic: a pure parse of the payload, then the effect in the caller's transaction."""

    parse: Callable[[Mapping[str, Any]], T]
    apply: Callable[[Conn, T, HandlingContext], None]

    def parse_or_unreadable(self, payload: Mapping[str, Any]) -> T:
        """The handler's model of the payload; a validation error makes the message unreadable."""
        try:
            return self.parse(payload)
        except ValidationError as exc:
            raise UnreadableMessageError(_validation_summary(exc)) from exc


def _validation_summary(exc: ValidationError) -> str:
    """Which fields are wrong and why, without the input values."""
    parts = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()]
    return "invalid payload: " + "; ".join(parts)


class AfterEffectHook(Protocol):
    """Called after a message's effect committed and before its offset is (a test-only fault hook)."""

    def __call__(self, message: Received) -> None:
        """Observe (or sabotage) the gap between effect and offset commit."""


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (not the message's fault)."""
    if isinstance(exc, PoolTimeout | psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.errors.TransactionRollback):
        return False  # deadlock, serialization failure: about this transaction, counted as attempts
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # no SQLSTATE: the client lost or could not open the connection; 08: connection exception;
        # 57P01..57P03: the server is shutting down or restarting; 55000 on connect: database not accepting.
        return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03", "55000"}
    return False


def backoff_delay(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """Exponential backoff with jitter: between half and all of min(cap, base * 2^(attempt-1))."""
    ceiling = min(cap, base * (2.0 ** max(0, attempt - 1)))
    return float(ceiling * (0.5 + 0.5 * rng()))


@dataclass
class _Held:
    """A message kept in hand for a retry while its partition is paused, with the messages of its batch behind it."""

    message: Received
    attempts: int
    retry_at: float
    behind: list[Received] = field(default_factory=list)


@dataclass(frozen=True)
class _Failure:
    exc: BaseException
    dead_letter: bool


@dataclass(frozen=True)
class _Decoded:
    """A readable message of a batch: its envelope, the handler's model of its payload, and the route."""

    message: Received
    headers: dict[str, str]
    envelope: Envelope
    route: Route[Any]
    event: Any


class ConsumerRuntime:
    """One consumer instance of a group: poll, handle, dedup, retry, dead-letter, commit."""

    def __init__(
        self,
        *,
        group: str,
        routes: Mapping[str, Route[Any]],
        pool: ConnectionPool[Conn],
        consumer_config: Mapping[str, Any],
        producer_config: Mapping[str, Any],
        max_attempts: int = 5,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        poll_timeout: float = 0.5,
        batch_size: int = 200,
        db_timeout: float = 5.0,
        dlq_timeout: float = 15.0,
        dead_letter_attempts: int = 3,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        inbox_retention_seconds: float = 14 * 86_400,
        inbox_prune_interval: float = 600.0,
        statistics_interval_ms: int = 10_000,
        after_effect: AfterEffectHook | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dead_letter_attempts < 1:
            raise ValueError("dead_letter_attempts must be at least 1")
        self.group = group
        self._routes = dict(routes)
        self._pool = pool
        # librdkafka's statistics feed the lag gauge (0 disables them)
        self._consumer_config = {"statistics.interval.ms": statistics_interval_ms, **consumer_config}
        # one bound for both: what a consumer reads and what its dead-letter producer may send
        # a record not acknowledged within dlq_timeout fails then, instead of lingering in the queue for minutes
        self._producer_config = {
            **producer_config,
            "message.max.bytes": max_message_bytes,
            "message.timeout.ms": max(1, int(dlq_timeout * 1000)),
        }
        self._max_message_bytes = max_message_bytes
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._poll_timeout = poll_timeout
        self._batch_size = batch_size
        self._db_timeout = db_timeout
        self._dlq_timeout = dlq_timeout
        self._dead_letter_attempts = dead_letter_attempts
        # failed dead-letter publishes per message (topic, partition, offset), until it is kept somewhere
        self._dead_letter_failures: dict[tuple[str, int, int], int] = {}
        self._inbox_retention = inbox_retention_seconds
        self._prune_interval = inbox_prune_interval
        self._after_effect = after_effect
        self._held: dict[tuple[str, int], _Held] = {}
        self._paused: set[tuple[str, int]] = set()
        self._assigned: frozenset[tuple[str, int]] = frozenset()
        self._revoked_in_poll: set[tuple[str, int]] = set()
        # next offset to commit per partition: `_to_commit` not yet sent, `_unconfirmed` sent asynchronously only
        self._to_commit: dict[tuple[str, int], int] = {}
        self._unconfirmed: dict[tuple[str, int], int] = {}
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._log = log.bind(group=group)
        self._debug = False
        self._next_prune = 0.0

    @property
    def assigned_partitions(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this instance owns now (empty while joining or rebalancing)."""
        return self._assigned

    @property
    def topics(self) -> list[str]:
        """The topics this group reads."""
        return sorted(self._routes)

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set; the batch in hand is finished, offsets committed, then the group left."""
        consumer = Consumer({**self._consumer_config, "stats_cb": self._on_stats, "on_commit": self._on_commit})
        self._consumer = consumer
        self._producer = Producer(self._producer_config)
        self._debug = logging.getLogger(__name__).isEnabledFor(logging.DEBUG)
        consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        self._log.info("consumer started", topics=self.topics, batch_size=self._batch_size)
        try:
            while not stop.is_set():
                self._retry_due()
                self._prune_inbox_if_due()
                self._on_batch(self._poll())
                self._commit_async()
                self._producer.poll(0)  # the dead-letter producer's own log lines (librdkafka serves them on poll)
        finally:
            self._held.clear()
            self._paused.clear()
            with contextlib.suppress(Exception):  # a failed last commit only means a redelivery (deduplicated)
                self._commit_sync(None)
            consumer.close()  # leaves the group, so the partitions move at once
            self._producer.flush(5)
            self._producer.close()
            self._consumer = self._producer = None
            self._log.info("consumer stopped")

    # -- the loop ------------------------------------------------------------------------------------------------

    def _poll_wait(self) -> float:
        """Poll no longer than until the next retry is due."""
        if not self._held:
            return self._poll_timeout
        soonest = min(held.retry_at for held in self._held.values())
        return max(0.0, min(self._poll_timeout, soonest - time.monotonic()))

    def _poll(self) -> list[Message]:
        """One message (waiting up to the poll wait), then whatever else is already fetched, up to the batch size.

        ``consume(n, timeout)`` alone would wait for all n messages or the whole timeout, delaying a lone message.
        Rebalance callbacks run inside poll and consume: a message returned after a revoke belongs to the new
        assignment, but the first one was returned before the second call; if its partition was revoked during
        that call it is dropped (its next owner, perhaps this instance again, reads it from the committed offset).
        """
        consumer = self._consumer_or_fail()
        first = consumer.poll(self._poll_wait())
        if first is None:
            return []
        if self._batch_size == 1:
            return [first]
        self._revoked_in_poll = set()
        more = consumer.consume(num_messages=self._batch_size - 1, timeout=0)
        if first.error() is None and (first.topic(), first.partition()) in self._revoked_in_poll:
            return list(more)
        return [first, *more]

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        self._log.warning("consumer error", error=str(error), fatal=error.fatal())
        if error.fatal():
            raise KafkaException(error)

    def _on_batch(self, polled: list[Message]) -> None:
        """The messages of one poll, each partition's in offset order."""
        by_partition: dict[tuple[str, int], list[Received]] = {}
        for item in polled:
            error = item.error()
            if error is not None:
                self._on_error(error)
                continue
            message = Received.of(item)
            by_partition.setdefault(message.partition_key, []).append(message)
        for key, messages in by_partition.items():
            if key in self._held:
                # A paused partition delivers nothing; if buffered messages slip through, put them back for later.
                self._log.warning("message of a paused partition put back", topic=key[0], partition=key[1])
                try:
                    self._consumer_or_fail().seek(TopicPartition(key[0], key[1], messages[0].offset))
                except KafkaException as exc:
                    # cannot put it back: stop here rather than skip it; the next owner reads from the committed offset
                    raise RuntimeError(f"could not seek back {key[0]}[{key[1]}] to {messages[0].offset}") from exc
                continue
            self._process(messages, attempts=1)

    def _retry_due(self) -> None:
        now = time.monotonic()
        for key, held in list(self._held.items()):
            if held.retry_at <= now:
                del self._held[key]
                self._process([held.message, *held.behind], attempts=held.attempts + 1)
                if key not in self._held and key in self._paused:
                    self._paused.discard(key)
                    self._consumer_or_fail().resume([TopicPartition(key[0], key[1])])

    def _process(self, messages: list[Received], *, attempts: int) -> None:
        """Messages of one partition, in order (the first has failed ``attempts - 1`` times before).

        Fresh messages go in batches: the readable ones before an unreadable one in one transaction, then the
        unreadable one alone (to the DLQ at once), then batch mode again. When a batch's transaction fails, its
        messages go one per transaction, as lone messages. A loop, not recursion: a batch of any size with any
        number of unreadable messages in it takes constant stack.
        """
        queue, tries, index = messages, attempts, 0
        while index < len(queue):
            if tries == 1 and len(queue) - index > 1:
                rest, isolated = self._apply_batch(queue[index:])
                queue, index = rest, 0
                if isolated:
                    self._one_by_one(queue)
                    return
                if not queue:
                    return
            message = queue[index]
            failure = self._handle(message, attempts=tries)
            if failure is not None:
                self._hold(message, tries, failure.exc, behind=queue[index + 1 :])
                return
            index, tries = index + 1, 1

    def _one_by_one(self, messages: list[Received]) -> None:
        """Fresh messages of a failed batch, one per transaction: the failing one is found, held and retried alone."""
        for index, message in enumerate(messages):
            failure = self._handle(message, attempts=1)
            if failure is not None:
                self._hold(message, 1, failure.exc, behind=messages[index + 1 :])
                return

    def _handle(self, message: Received, *, attempts: int) -> _Failure | None:
        """One attempt at a message on its own; None once it is handled or dead-lettered (its offset to commit)."""
        failure = self._attempt(message, attempts)
        if failure is not None and failure.dead_letter and not self._dead_letter(message, failure.exc, attempts):
            failure = _Failure(failure.exc, dead_letter=False)  # keep it in hand; try the DLQ again later
        if failure is not None and not failure.dead_letter:
            return failure
        self._done(message)
        return None

    def _attempt(self, message: Received, attempts: int) -> _Failure | None:
        """Handle once; None on success, else the failure and whether it goes to the DLQ now."""
        topic = message.topic
        headers = header_map(message.headers)
        attempt_log = self._log.bind(topic=topic, partition=message.partition, offset=message.offset)
        span_context = context_from_headers(headers)
        with tracer().start_as_current_span(f"{topic} process", context=span_context, kind=SpanKind.CONSUMER) as span:
            span.set_attribute("messaging.consumer.group.name", self.group)
            span.set_attribute("messaging.kafka.offset", message.offset)
            try:
                route = self._routes.get(topic)
                envelope = decode_envelope(message.value, headers, max_bytes=self._max_message_bytes)
                attempt_log = attempt_log.bind(
                    message_id=str(envelope.message_id), correlation_id=envelope.correlation_id
                )
                if route is None:
                    attempt_log.warning("message of a topic this group does not handle skipped")
                    return None
                if envelope.contract_version != SUPPORTED_CONTRACT_VERSION:
                    # seed 003: an unknown ContractVersion is a warning; processing continues (tolerant reader)
                    attempt_log.warning("unknown contract version", contract_version=envelope.contract_version)
                event = route.parse_or_unreadable(envelope.payload)
                context = HandlingContext(self.group, topic, envelope.message_id)
                applied = self._apply(route, event, context, message, envelope.message_id)
            except UnreadableMessageError as exc:
                attempt_log.error("unreadable message", error=str(exc), attempts=attempts)
                return _Failure(exc, dead_letter=True)
            except Exception as exc:  # noqa: BLE001 - every failure is classified, retried or dead-lettered
                return self._classify(exc, attempts, topic, attempt_log)
        self._report_unknown(context, attempt_log)
        if applied:
            PROCESSED.labels(self.group, topic).inc()
            attempt_log.info("message handled", event_type=envelope.event_type, attempts=attempts)
            if self._after_effect is not None:
                self._after_effect(message)
        else:
            DUPLICATES.labels(self.group, topic).inc()
            attempt_log.info("duplicate message skipped", event_type=envelope.event_type)
        return None

    def _apply(
        self, route: Route[Any], event: Any, context: HandlingContext, message: Received, message_id: uuid.UUID
    ) -> bool:
        """The inbox row and the effect in one transaction; False when the message was handled before."""
        with self._pool.connection(timeout=self._db_timeout) as conn, conn.transaction():
            row = conn.execute(
                INBOX_INSERT, (self.group, message_id, message.topic, message.partition, message.offset)
            ).fetchone()
            if row is None:
                return False
            route.apply(conn, event, context)
        return True

    def _apply_batch(self, messages: list[Received]) -> tuple[list[Received], bool]:
        """Apply the longest readable prefix of fresh messages in one transaction.

        Returns what is left, and whether it must go one per transaction (the prefix's transaction failed: nothing
        of it was kept). Otherwise the first message left (if any) is one that cannot be read: it goes alone, and
        the messages after it are a new batch. Reading is caught per message: whatever one message's bytes are,
        they cannot fail the others.
        """
        route = self._routes.get(messages[0].topic)
        if route is None:
            return messages, True  # each is skipped, with its warning, on its own
        decoded: list[_Decoded] = []
        for message in messages:
            try:
                decoded.append(self._read(message, route))
            except Exception:  # noqa: BLE001 - unreadable (or a parse bug): that message goes alone and is classified
                break
        if not decoded:
            return messages, False
        if not self._apply_run(decoded):
            return messages, True
        return messages[len(decoded) :], False

    def _read(self, message: Received, route: Route[Any]) -> _Decoded:
        """A message decoded within the bounds and parsed by its route (else :class:`UnreadableMessageError`)."""
        headers = header_map(message.headers)
        envelope = decode_envelope(message.value, headers, max_bytes=self._max_message_bytes)
        return _Decoded(message, headers, envelope, route, route.parse_or_unreadable(envelope.payload))

    def _apply_run(self, decoded: list[_Decoded]) -> bool:
        """Readable messages of one partition in one transaction: the inbox rows, then each new one's effect, in order.

        False when anything fails: then nothing of them was kept.
        """
        first = decoded[0].message
        # a span per message only when spans leave the process (without a processor the SDK records and drops them)
        spans = spans_exported()
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn, conn.transaction():
                new = {
                    row["message_id"]
                    for row in conn.execute(
                        INBOX_INSERT_MANY,
                        (self.group, first.topic, first.partition,
                         [d.envelope.message_id for d in decoded], [d.message.offset for d in decoded]),
                    ).fetchall()
                }  # fmt: skip
                applied: list[tuple[_Decoded, HandlingContext]] = []
                for item in decoded:
                    message_id = item.envelope.message_id
                    if message_id not in new:
                        continue
                    new.discard(message_id)  # a MessageId twice in one batch: the second is a duplicate
                    context = HandlingContext(self.group, first.topic, message_id)
                    with self._span(item) if spans else contextlib.nullcontext():
                        item.route.apply(conn, item.event, context)
                    applied.append((item, context))
        except Exception as exc:  # noqa: BLE001 - the batch is handled again one message per transaction
            self._log.info(
                "batch failed; handling its messages one by one",
                topic=first.topic,
                partition=first.partition,
                first_offset=first.offset,
                messages=len(decoded),
                error_type=type(exc).__name__,
            )
            return False
        self._after_batch(decoded, applied)
        return True

    def _span(self, item: _Decoded) -> Any:
        """The span of one message's handling, a child of the producer's trace context."""
        return tracer().start_as_current_span(
            f"{item.message.topic} process",
            context=context_from_headers(item.headers),
            kind=SpanKind.CONSUMER,
            attributes={"messaging.consumer.group.name": self.group, "messaging.kafka.offset": item.message.offset},
        )

    def _after_batch(self, decoded: list[_Decoded], applied: list[tuple[_Decoded, HandlingContext]]) -> None:
        """Metrics and logs of a committed batch, the test hook, and its offset to commit."""
        first = decoded[0].message
        topic = first.topic
        applied_ids = {id(item) for item, _ in applied}
        for item, context in applied:
            message_log = None
            if context.unknown or self._debug:
                message_log = self._message_log(item)
            if context.unknown and message_log is not None:
                self._report_unknown(context, message_log)
            if self._debug and message_log is not None:
                message_log.debug("message handled", event_type=item.envelope.event_type, attempts=1)
        for item in decoded:
            if item.envelope.contract_version != SUPPORTED_CONTRACT_VERSION:
                self._message_log(item).warning(
                    "unknown contract version", contract_version=item.envelope.contract_version
                )
            if id(item) not in applied_ids:
                self._message_log(item).info("duplicate message skipped", event_type=item.envelope.event_type)
        if applied:
            PROCESSED.labels(self.group, topic).inc(len(applied))
        if len(decoded) > len(applied):
            DUPLICATES.labels(self.group, topic).inc(len(decoded) - len(applied))
        self._log.info(
            "messages handled",
            topic=topic,
            partition=first.partition,
            first_offset=first.offset,
            last_offset=decoded[-1].message.offset,
            handled=len(applied),
            duplicates=len(decoded) - len(applied),
        )
        if self._after_effect is not None:
            for item, _ in applied:
                self._after_effect(item.message)
        self._done(decoded[-1].message)

    def _message_log(self, item: _Decoded) -> Any:
        message = item.message
        return self._log.bind(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            message_id=str(item.envelope.message_id),
            correlation_id=item.envelope.correlation_id,
        )

    def _report_unknown(self, context: HandlingContext, message_log: Any) -> None:
        for field_name, raw in context.unknown:
            UNKNOWN_VALUES.labels(self.group, field_name).inc()
            message_log.warning("unknown enum value; neutral path taken", field=field_name, value=raw)

    def _classify(self, exc: Exception, attempts: int, topic: str, attempt_log: Any) -> _Failure:
        unavailable = is_database_unavailable(exc)
        give_up = not unavailable and attempts >= self._max_attempts
        attempt_log.warning(
            "message failed",
            error_type=type(exc).__name__,
            error=_error_text(exc),
            attempts=attempts,
            database_unavailable=unavailable,
            dead_letter=give_up,
        )
        if not give_up:
            RETRIES.labels(self.group, topic).inc()
        return _Failure(exc, dead_letter=give_up)

    def _hold(self, message: Received, attempts: int, exc: BaseException, *, behind: list[Received]) -> None:
        key = message.partition_key
        delay = backoff_delay(attempts, base=self._backoff_base, cap=self._backoff_cap)
        if key not in self._paused:
            self._consumer_or_fail().pause([TopicPartition(key[0], key[1])])
            self._paused.add(key)
        self._held[key] = _Held(message, attempts, time.monotonic() + delay, behind)
        del exc
        self._log.info("partition paused for a retry", topic=key[0], partition=key[1], retry_in_s=round(delay, 3))

    # -- offsets --------------------------------------------------------------------------------------------------

    def _done(self, message: Received) -> None:
        """``message`` is handled (effect committed, skipped, or dead-lettered): its partition may commit past it."""
        self._to_commit[message.partition_key] = message.offset + 1
        if self._dead_letter_failures:  # a message whose dead letter failed, then handled after all on a retry
            self._dead_letter_failures.pop((message.topic, message.partition, message.offset), None)

    def _commit_async(self) -> None:
        """Send the offsets handled since the last poll, without waiting (a lost commit only means a redelivery)."""
        if not self._to_commit:
            return
        offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in self._to_commit.items()]
        self._unconfirmed.update(self._to_commit)
        self._to_commit.clear()
        try:
            self._consumer_or_fail().commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self._log.warning("offset commit failed", error=str(exc))

    def _commit_sync(self, partitions: set[tuple[str, int]] | None) -> None:
        """Commit, and wait for, the handled offsets of ``partitions`` (all when None): on revoke and on stop."""
        pending = {**self._unconfirmed, **self._to_commit}
        keys = set(pending) if partitions is None else set(pending) & partitions
        for key in keys:
            self._unconfirmed.pop(key, None)
            self._to_commit.pop(key, None)
        if not keys:
            return
        offsets = [TopicPartition(key[0], key[1], pending[key]) for key in sorted(keys)]
        try:
            self._consumer_or_fail().commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # The inbox makes the redelivery that follows harmless.
            self._log.warning("offset commit failed", error=str(exc), partitions=len(offsets))

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's report of an offset commit (asynchronous ones included); only failures are logged."""
        if error is not None and error.code() != KafkaError._NO_OFFSET:
            self._log.warning("offset commit failed", error=str(error), partitions=len(partitions))

    # -- dead letters -----------------------------------------------------------------------------------------

    def _dead_letter(self, message: Received, exc: BaseException, attempts: int) -> bool:
        """Keep a message that will never be handled; True once it is kept (its offset may be committed).

        Kept means: in the group's dead-letter topic whole; or, when the dead-letter producer cannot carry it whole,
        cut there with its full bytes in ``messaging.dead_letter``; or, after ``dead_letter_attempts`` publishes the
        broker did not acknowledge, parked in ``messaging.dead_letter`` alone (:meth:`_dead_letter_failed`).
        """
        origin = Origin(
            group=self.group, topic=message.topic, partition=message.partition, offset=message.offset,
            timestamp_ms=message.timestamp_ms, error_type=type(exc).__name__, error=_error_text(exc),
            attempts=attempts,
        )  # fmt: skip
        original = [(name, value) for name, value in message.headers if not name.startswith(DLT_PREFIX)]
        provenance = provenance_headers(origin, datetime.now(UTC))
        whole = [*original, *provenance]
        if dead_letter_store.record_size(message.key, message.value, whole) <= self._max_message_bytes:
            error = self._publish(message.key, message.value, whole)
            if error is None:
                return self._dead_lettered(message, origin, stored_id=None)
            if error.code() != KafkaError.MSG_SIZE_TOO_LARGE:  # the broker's own bound may be lower than ours
                return self._dead_letter_failed(message, origin, str(error))
        return self._dead_letter_cut(message, origin, original, provenance)

    def _dead_letter_cut(
        self, message: Received, origin: Origin, original: list[tuple[str, bytes]], provenance: list[tuple[str, bytes]]
    ) -> bool:
        """The full bytes into the database, a copy cut to the bound (naming the row) into the dead-letter topic."""
        try:
            stored_id = self._store(message, origin, dead_letter_store.TRUNCATED)
        except Exception as exc:  # noqa: BLE001 - counted as a failed attempt to keep it; parked later if possible
            return self._dead_letter_failed(message, origin, f"storing its bytes: {type(exc).__name__}")
        truncation = [
            (DLT_ORIGINAL_SIZE, str(len(message.value or b"")).encode()),
            (DLT_ORIGINAL_SHA256, dead_letter_store.sha256_hex(message.value).encode()),
            (DLT_STORED_ID, str(stored_id).encode()),
        ]
        key, value, headers = dead_letter_store.cut_letter(
            message.key, message.value, original, [*provenance, *truncation], self._max_message_bytes
        )
        error = self._publish(key, value, headers)
        if error is not None:
            return self._dead_letter_failed(message, origin, str(error))
        DEAD_LETTERS_TRUNCATED.labels(self.group, message.topic).inc()
        return self._dead_lettered(message, origin, stored_id=stored_id)

    def _publish(self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> KafkaError | None:
        """Send one record to the group's dead-letter topic and wait (at most ``dlq_timeout``) for the broker's ack."""
        producer = self._producer
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
            producer.flush(self._dlq_timeout)
        except KafkaException as exc:  # refused before sending (e.g. larger than message.max.bytes)
            error = exc.args[0]
            return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL, str(exc))
        except BufferError as exc:
            return KafkaError(KafkaError._FAIL, str(exc))
        if not outcome:
            return KafkaError(KafkaError._MSG_TIMED_OUT, f"no acknowledgement within {self._dlq_timeout:g} s")
        return outcome[0]

    def _dead_lettered(self, message: Received, origin: Origin, *, stored_id: uuid.UUID | None) -> bool:
        self._dead_letter_failures.pop((message.topic, message.partition, message.offset), None)
        DEAD_LETTERED.labels(self.group, message.topic).inc()
        self._log.error(
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

    def _dead_letter_failed(self, message: Received, origin: Origin, error: str) -> bool:
        """A dead letter the topic did not take: retried ``dead_letter_attempts`` times, then parked in the database.

        Bounded on purpose: a letter the broker refuses for good (too large for the topic, no such topic, no
        permission) would otherwise hold its partition for ever. Parked, nothing is lost (the row has every byte,
        `pin dlq list` shows it, `pin dlq replay` sends it) and the partition goes on. Only when the database
        cannot take it either is the message held (and retried): then every message of the group is waiting for
        the database anyway, and skipping it would lose it.
        """
        where = (message.topic, message.partition, message.offset)
        failures = self._dead_letter_failures.get(where, 0) + 1
        self._dead_letter_failures[where] = failures
        DEAD_LETTER_FAILURES.labels(self.group, message.topic).inc()
        failure_log = self._log.bind(topic=message.topic, partition=message.partition, offset=message.offset)
        failure_log.error("dead-letter publish failed", error=error, failures=failures, of=self._dead_letter_attempts)
        if failures < self._dead_letter_attempts:
            return False
        try:
            stored_id = self._store(message, origin, dead_letter_store.PARKED)
        except Exception as exc:  # noqa: BLE001 - held and retried: the database is the last place to keep it
            failure_log.error("dead letter could not be parked in the database; held", error_type=type(exc).__name__)
            return False
        self._dead_letter_failures.pop(where, None)
        DEAD_LETTERS_PARKED.labels(self.group, message.topic).inc()
        failure_log.error("dead letter parked in the database", stored_id=str(stored_id), error_type=origin.error_type)
        return True

    def _store(self, message: Received, origin: Origin, disposition: str) -> uuid.UUID:
        with self._pool.connection(timeout=self._db_timeout) as conn:
            return dead_letter_store.store(
                conn, origin, message.key, message.value, message.headers, disposition=disposition
            )

    # -- rebalance, statistics, housekeeping ------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # A partition paused for a retry before it was revoked must not come back paused.
        consumer.resume(partitions)
        self._assigned = self._assigned | {(p.topic, p.partition) for p in partitions}
        self._log.info("partitions assigned", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Called inside poll(): no message is being handled. The offsets of what was handled are committed (and
        # waited for) before the partitions move; held messages are not committed: the next owner reads them
        # again from the committed offset.
        del consumer
        self._revoke([(p.topic, p.partition) for p in partitions], lost=False)
        self._log.info("partitions revoked", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The partitions are already someone else's: their offsets can no longer be committed by this instance.
        del consumer
        self._revoke([(p.topic, p.partition) for p in partitions], lost=True)
        self._log.info("partitions lost", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def _revoke(self, keys: list[tuple[str, int]], *, lost: bool) -> None:
        gone = set(keys)
        if lost:
            for key in gone:
                self._to_commit.pop(key, None)
                self._unconfirmed.pop(key, None)
        else:
            self._commit_sync(gone)
        self._assigned = self._assigned - gone
        self._revoked_in_poll |= gone
        for where in [w for w in self._dead_letter_failures if (w[0], w[1]) in gone]:
            del self._dead_letter_failures[where]
        for topic, partition in keys:
            self._held.pop((topic, partition), None)
            self._paused.discard((topic, partition))
            with contextlib.suppress(KeyError):
                LAG.remove(self.group, topic, str(partition))

    def _on_stats(self, stats_json: str) -> None:
        """librdkafka statistics: per fetched partition, high watermark minus the consumer's position."""
        try:
            stats = json.loads(stats_json)
        except json.JSONDecodeError:
            return
        for topic, topic_stats in stats.get("topics", {}).items():
            for partition, partition_stats in topic_stats.get("partitions", {}).items():
                lag = partition_lag(partition_stats)
                if partition != "-1" and lag is not None:
                    LAG.labels(self.group, topic, partition).set(lag)

    def _prune_inbox_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._prune_interval
        try:
            with self._pool.connection(timeout=self._db_timeout) as conn:
                deleted = conn.execute(INBOX_PRUNE, (self.group, self._inbox_retention, 5_000)).rowcount
            if deleted:
                self._log.info("inbox pruned", deleted=deleted)
        except Exception as exc:  # noqa: BLE001 - housekeeping never stops consumption
            self._log.warning("inbox prune failed", error_type=type(exc).__name__)

    def _consumer_or_fail(self) -> Consumer:
        assert self._consumer is not None, "the runtime is not running"
        return self._consumer


def partition_lag(partition_stats: Mapping[str, Any]) -> int | None:
    """Lag of one partition from librdkafka's statistics, or None when it is not being fetched.

    librdkafka reports ``consumer_lag`` -1 until the application consumed something; then the position is the
    committed offset, or the fetch position, and an idle partition at its end has lag 0.
    """
    if partition_stats.get("fetch_state") != "active":
        return None
    high = int(partition_stats.get("hi_offset", -1))
    if high < 0:
        return None
    reported = int(partition_stats.get("consumer_lag", -1))
    if reported >= 0:
        return reported
    positions = [int(partition_stats.get(name, -1)) for name in ("app_offset", "committed_offset", "next_offset")]
    position = next((value for value in positions if value >= 0), None)
    return max(0, high - position) if position is not None else None


def provenance_headers(origin: Origin, failed_at: datetime) -> list[tuple[str, bytes]]:
    """The :data:`DLT_HEADERS` of a dead letter, in order."""
    values = (origin.topic, str(origin.partition), str(origin.offset), str(origin.timestamp_ms), origin.group,
              origin.error_type, origin.error, str(origin.attempts), utc_iso(failed_at))  # fmt: skip
    return [(name, value.encode()) for name, value in zip(DLT_HEADERS, values, strict=True)]


def _error_text(exc: BaseException) -> str:
    """The error's message, one line, bounded, without NUL (payloads carry no PII by contract, so neither does this)."""
    text = " ".join(str(exc).replace("\x00", " ").split()) or type(exc).__name__
    return text[:_MAX_ERROR_TEXT]
