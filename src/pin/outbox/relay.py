"""The outbox relay: publishes outbox rows to Kafka at least once, in commit order per key, from any number
of instances (SPEC section 5; research/outbox.md, design B).

- **Ownership.** The key space is cut into ``VPARTS`` virtual partitions. Each relay instance holds leases on
  a fair share of them (``outbox.relay_lease``: owner, epoch, expiry on the database clock, renewed by a
  heartbeat thread). Only the owner of an unexpired lease reads a vpart, so one key has one publisher at a
  time; a dead instance's leases expire and the survivors take them within ``lease_ttl + heartbeat``.
  Leases live in a table, not in session advisory locks, so they work behind transaction-mode poolers.
- **No cursor.** Rows are read ``ORDER BY id`` and deleted by primary key once acknowledged: a row that commits
  late is simply read later (a cursor on ids would skip it: research/outbox.md, pitfall 1).
- **Per-key order.** A key's rows are in commit order by id (see ``outbox/writer.py``). A row is read only if no
  earlier row of its key is in backoff or dead-lettered (the head-of-key guard). Inside a batch a key's rows go
  out in waves (the n-th row of each key in wave n, one flush per wave), and a key whose row failed sends
  nothing more in that batch, so a later row can never be on the topic before an earlier one that failed.
  The guard works on ``message_key`` across topics: an aggregate's events keep their order whatever topic.
- **Fencing.** Retry marks and dead-letter moves apply only while the lease (owner and epoch) is still ours.
  Deleting acknowledged rows is never fenced: the broker has them. A stale owner can cause duplicates, never
  reordering or loss; consumers deduplicate by ``message-id``.
- **Wake-up.** A statement-level trigger NOTIFYs ``pin_outbox`` at commit; a LISTEN thread wakes the loop.
  Polling every ``poll_interval_seconds`` is the fallback (NOTIFY is lost across reconnects).
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import psycopg
import structlog
from confluent_kafka import KafkaError, KafkaException, Producer
from psycopg_pool import ConnectionPool

from pin.messaging.topics import INTEGRATION_TOPICS
from pin.observability import liveness
from pin.outbox import metrics
from pin.outbox.writer import VPARTS
from pin.settings import ConfigurationError

log = structlog.get_logger(__name__)

Conn = psycopg.Connection[dict[str, object]]

NOTIFY_CHANNEL = "pin_outbox"


@dataclass(frozen=True)
class RelayConfig:
    """How a relay instance paces, batches, leases and retries."""

    # Rows per batch (about: spread evenly over the owned vparts, at least 8 each); one DELETE per batch.
    batch_size: int = 500
    # Seconds between reads when no NOTIFY arrives (the fallback: NOTIFY is lost across reconnects).
    poll_interval_seconds: float = 1.0
    # Seconds between lease renewals (and acquisitions of a fair share).
    heartbeat_seconds: float = 1.0
    # Lease lifetime on the database clock: a dead instance's vparts are taken over after at most this.
    lease_ttl_seconds: float = 5.0
    # Failures of a row (broker unavailability not counted) before it is dead-lettered.
    max_attempts: int = 10
    # First retry delay of a failed row; doubles per attempt, with +-20 % jitter.
    backoff_base_seconds: float = 0.5
    # Longest retry delay; also how long a drained broker outage can delay a row after the broker returns.
    backoff_max_seconds: float = 15.0
    # librdkafka message.timeout.ms: a send fails after this, so a batch never hangs on a dead broker.
    message_timeout_ms: int = 10_000
    # Seconds between refreshes of the backlog, lag and dead-letter gauges (one bounded query each).
    gauge_refresh_seconds: float = 5.0
    # Cap of the backlog count (a bounded count, never a scan of a huge table per refresh).
    backlog_count_cap: int = 100_000

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RelayConfig:
        """Defaults overridden by PIN_RELAY_<FIELD> variables (e.g. PIN_RELAY_BATCH_SIZE=1000)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for item in fields(cls):
            name = f"PIN_RELAY_{item.name.upper()}"
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            caster = int if item.type in ("int", int) else float
            try:
                value = caster(raw)
            except ValueError:
                raise ConfigurationError(f"{name}: expected a number, got {raw!r}") from None
            if value <= 0:
                raise ConfigurationError(f"{name}: must be greater than 0")
            values[item.name] = value
        config = cls(**values)
        if config.lease_ttl_seconds < 2 * config.heartbeat_seconds:
            raise ConfigurationError("PIN_RELAY_LEASE_TTL_SECONDS: must be at least twice the heartbeat")
        return config


@dataclass
class RelayFaults:
    """Test-only fault injection; production never sets it.

    ``pause_at`` ("after-produce" or "after-ack") freezes the publishing thread at that point of batch number
    ``pause_on_batch`` (the heartbeat goes on), so a test can kill -9 the process there. ``fail_once`` holds
    message ids whose next send fails with a transient error (in-process tests of the retry path).
    Read from PIN_RELAY_TEST_FAULT, e.g. ``after-ack:1``.
    """

    pause_at: str | None = None
    pause_on_batch: int = 1
    fail_once: set[uuid.UUID] = field(default_factory=set)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RelayFaults:
        """The faults PIN_RELAY_TEST_FAULT asks for (none when unset)."""
        env = os.environ if environ is None else environ
        raw = env.get("PIN_RELAY_TEST_FAULT", "")
        if not raw:
            return cls()
        point, _, batch = raw.partition(":")
        if point not in ("after-produce", "after-ack") or not (batch or "1").isdigit():
            raise ConfigurationError(f"PIN_RELAY_TEST_FAULT: expected after-produce|after-ack[:N], got {raw!r}")
        return cls(pause_at=point, pause_on_batch=int(batch or "1"))


@dataclass(frozen=True)
class PendingRow:
    """An outbox row read by its vpart's lease owner, with the lease epoch it was read under."""

    id: int
    message_id: uuid.UUID
    vpart: int
    epoch: int
    topic: str
    key: str
    event_type: str
    contract_version: int
    payload: Mapping[str, object]
    headers: Mapping[str, str]
    attempts: int


@dataclass(frozen=True)
class SendError:
    """Why a send failed, and how the relay treats it."""

    code: str
    reason: str
    # broker unavailability or a broken producer: retried with backoff for ever, never dead-lettered
    retriable: bool = False
    # the broker will never accept this message: dead-lettered at once
    permanent: bool = False
    # the producer instance is unusable and is replaced
    fatal: bool = False

    def text(self) -> str:
        """One line for last_error / dead_letter.error: code and broker text, never the payload."""
        return f"{self.code}: {self.reason}"[:1000]


# Errors the broker will repeat for ever for this message, whatever we do.
_PERMANENT_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.TOPIC_EXCEPTION,  # invalid topic name
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
    }
)
_UNKNOWN_TOPIC_CODES = frozenset({KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})
# The broker (or the way to it) is unavailable: nothing is wrong with the message. Retried for ever with
# backoff, never dead-lettered. (librdkafka's retriable() flag is not set on delivery-report errors such as
# _MSG_TIMED_OUT, so the codes are listed.)
_UNAVAILABLE_CODES = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._QUEUE_FULL,
        KafkaError._RESOLVE,
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
    }
)
# The idempotent producer's own state is broken (seen after a broker freeze: PRODUCER_FENCED for every send):
# replace the producer; the message is fine, so this never counts towards dead-lettering.
_PRODUCER_STATE_CODES = frozenset(
    {
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError._FATAL,
        KafkaError._FENCED,
        KafkaError._INCONSISTENT,
        KafkaError._GAPLESS_GUARANTEE,
    }
)


def send_error_of(error: KafkaError) -> SendError:
    """Classify a librdkafka error."""
    code = error.code()
    producer_broken = bool(error.fatal()) or code in _PRODUCER_STATE_CODES
    return SendError(
        code=str(error.name()),
        reason=str(error.str()),
        retriable=code in _UNAVAILABLE_CODES or producer_broken,
        permanent=code in _PERMANENT_CODES,
        fatal=producer_broken,
    )


@dataclass(frozen=True)
class RelayCycle:
    """The counters of one batch."""

    read: int = 0
    published: int = 0
    failed: int = 0
    dead_lettered: int = 0
    held_back: int = 0
    # some vpart gave as many rows as it was asked for: more are probably waiting
    more_waiting: bool = False

    @property
    def is_full(self) -> bool:
        """The batch limit was hit: the next batch should start at once."""
        return self.more_waiting

    def as_dict(self) -> dict[str, int]:
        """The counters as JSON-ready values."""
        return {
            "read": self.read,
            "published": self.published,
            "failed": self.failed,
            "dead_lettered": self.dead_lettered,
            "held_back": self.held_back,
        }


# --- SQL -------------------------------------------------------------------------------------------------

# outbox_read_owned: rows of the vparts whose unexpired lease we hold, due, behind no waiting row of their key.
# Per vpart, in id order, at most per_vpart rows: each vpart is read along its (vpart, id) index and stops
# early, so the cost of a batch does not grow with the backlog (one global ORDER BY id over all owned rows
# did: 2.5 s per batch at 200 000 rows). Order only matters within a key, and a key lives in one vpart; the
# outer LIMIT keeps an id-order prefix of every vpart.
# Not a FOR UPDATE claim: the lease is the claim, and a row lock could not be held across a broker flush
# without a transaction left open for seconds.
_OUTBOX_READ_OWNED = """
SELECT m.id, m.message_id, m.vpart, l.epoch, m.topic, m.message_key, m.event_type, m.contract_version,
       m.payload, m.headers, m.attempts
FROM outbox.relay_lease l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m
    WHERE m.vpart = l.vpart
      AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())
      AND NOT EXISTS (
          SELECT 1 FROM outbox.message e
          WHERE e.message_key = m.message_key AND e.id < m.id AND e.next_attempt_at > now()
      )
      AND NOT EXISTS (SELECT 1 FROM outbox.dead_letter d WHERE d.message_key = m.message_key)
    ORDER BY m.id
    LIMIT %(per_vpart)s
) m
WHERE l.owner = %(owner)s AND l.expires_at > now()
ORDER BY m.id
LIMIT %(limit)s
"""

# outbox_delete_published: strictly by primary key, only rows the broker acknowledged (pitfall 11).
_OUTBOX_DELETE_PUBLISHED = """
DELETE FROM outbox.message WHERE id = ANY(%(ids)s)
RETURNING topic, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8 AS latency
"""

_FENCE = "l.vpart = m.vpart AND l.owner = %(owner)s AND l.epoch = %(epoch)s AND l.expires_at > now()"

# outbox_mark_failed: attempts + 1 and a backoff, while the lease is still ours.
_OUTBOX_MARK_FAILED = f"""
UPDATE outbox.message m
SET attempts = m.attempts + 1,
    next_attempt_at = now() + make_interval(secs => %(delay)s),
    last_error = %(error)s
FROM outbox.relay_lease l
WHERE m.id = %(id)s AND {_FENCE}
RETURNING m.attempts
"""

# outbox_dead_letter: move the row aside with its error in one statement, while the lease is still ours.
_OUTBOX_DEAD_LETTER = f"""
WITH moved AS (
    DELETE FROM outbox.message m USING outbox.relay_lease l
    WHERE m.id = %(id)s AND {_FENCE}
    RETURNING m.*
)
INSERT INTO outbox.dead_letter
    (id, message_id, vpart, topic, message_key, event_type, contract_version, payload, headers,
     occurred_at, created_at, attempts, error, permanent)
SELECT id, message_id, vpart, topic, message_key, event_type, contract_version, payload, headers,
       occurred_at, created_at, attempts + 1, %(error)s, %(permanent)s
FROM moved
RETURNING id
"""

_INSTANCE_HEARTBEAT = """
INSERT INTO outbox.relay_instance (instance_id, expires_at)
VALUES (%(owner)s, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (instance_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
"""
_INSTANCE_PURGE = "DELETE FROM outbox.relay_instance WHERE expires_at < now() - interval '1 minute'"
_INSTANCE_COUNT_LIVE = "SELECT count(*) AS live FROM outbox.relay_instance WHERE expires_at > now()"
_INSTANCE_DELETE = "DELETE FROM outbox.relay_instance WHERE instance_id = %(owner)s"

# lease_renew: a lease that already expired is not renewed (another instance may hold it by now).
_LEASE_RENEW = """
UPDATE outbox.relay_lease SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE owner = %(owner)s AND expires_at > now()
RETURNING vpart, epoch
"""
_LEASE_ACQUIRE_FREE = """
WITH free AS (
    SELECT vpart FROM outbox.relay_lease
    WHERE owner IS NULL OR expires_at <= now()
    ORDER BY vpart
    LIMIT %(limit)s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE outbox.relay_lease l
SET owner = %(owner)s, epoch = l.epoch + 1, expires_at = now() + make_interval(secs => %(ttl)s),
    acquired_at = now()
FROM free
WHERE l.vpart = free.vpart
RETURNING l.vpart, l.epoch
"""
_LEASE_RELEASE = """
UPDATE outbox.relay_lease SET owner = NULL, expires_at = '-infinity'
WHERE owner = %(owner)s AND vpart = ANY(%(vparts)s)
"""

_GAUGE_BACKLOG = """
SELECT topic, count(*) AS rows FROM (SELECT topic FROM outbox.message LIMIT %(cap)s) s GROUP BY topic
"""
_GAUGE_OLDEST = """
SELECT EXTRACT(EPOCH FROM now() - created_at)::float8 AS age FROM outbox.message ORDER BY id LIMIT 1
"""
_GAUGE_DEAD_LETTERS = "SELECT count(*) AS rows FROM (SELECT 1 FROM outbox.dead_letter LIMIT %(cap)s) s"


# --- the relay -------------------------------------------------------------------------------------------


def _encode_value(payload: Mapping[str, object]) -> bytes:
    """The message value: the payload as compact UTF-8 JSON."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _kafka_headers(row: PendingRow) -> list[tuple[str, bytes]]:
    """The row's headers (correlation-id, traceparent, ...) plus the envelope headers of SPEC section 6."""
    headers = {str(k): str(v) for k, v in row.headers.items()}
    headers.update(
        {
            "message-id": str(row.message_id),
            "contract-version": str(row.contract_version),
            "event-type": row.event_type,
        }
    )
    return [(name, value.encode("utf-8")) for name, value in headers.items()]


def _waves(rows: Sequence[PendingRow]) -> Iterator[list[PendingRow]]:
    """Wave n holds the n-th row (in id order) of every key in the batch."""
    per_key: dict[str, list[PendingRow]] = {}
    for row in rows:
        per_key.setdefault(row.key, []).append(row)
    depth = max((len(key_rows) for key_rows in per_key.values()), default=0)
    for n in range(depth):
        yield [key_rows[n] for key_rows in per_key.values() if len(key_rows) > n]


class OutboxRelay:
    """One relay instance: leases, publishing loop, wake-up listener and gauges."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        producer_factory: Callable[[], Producer],
        config: RelayConfig | None = None,
        *,
        database_url: str | None = None,
        ensure_topic: Callable[[str], object] | None = None,
        faults: RelayFaults | None = None,
        instance_id: str | None = None,
    ) -> None:
        self._pool = pool
        self._producer_factory = producer_factory
        self._producer = producer_factory()
        self._config = config or RelayConfig()
        self._database_url = database_url
        self._ensure_topic = ensure_topic
        self._faults = faults or RelayFaults()
        self.instance_id = instance_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._owned: dict[int, int] = {}  # vpart -> epoch, as of the last heartbeat
        self._target = VPARTS
        self._lease_lock = threading.Lock()  # serializes lease changes (heartbeat vs. release between batches)
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._batches = 0
        self._active_vparts = 0  # vparts that gave rows to the last batch
        self._next_gauge_refresh = 0.0
        self._seen_topics: set[str] = set(INTEGRATION_TOPICS)
        self._ready_topics: set[str] = set()  # topics known to exist (created or checked)

    # -- one batch --------------------------------------------------------------------------------------

    def run_once(self) -> RelayCycle:
        """Read one batch of owned, due rows; publish; delete the acknowledged; mark or dead-letter the failed."""
        # share the batch among the vparts that had rows last time (all owned ones at first), so one hot vpart
        # still gets whole batches and many busy vparts are read evenly
        limit = self._config.batch_size
        per_vpart = max(8, math.ceil(limit / max(1, self._active_vparts or len(self._owned))))
        rows = self._read_batch(per_vpart, limit)
        per_vpart_counts = Counter(row.vpart for row in rows)
        self._active_vparts = len(per_vpart_counts)
        if not rows:
            return RelayCycle()
        self._batches += 1
        started = time.monotonic()
        acked, failures, unsent = self._publish(rows)
        self._maybe_pause("after-ack")
        published, dead_lettered = self._settle(acked, failures)
        cycle = RelayCycle(
            read=len(rows),
            published=published,
            failed=len(failures),
            dead_lettered=dead_lettered,
            held_back=unsent,
            more_waiting=len(rows) >= limit or max(per_vpart_counts.values()) >= per_vpart,
        )
        log.info(
            "outbox batch published",
            count=published,
            vparts=sorted({row.vpart for row in rows}),
            failed=cycle.failed,
            dead_lettered=dead_lettered,
            held_back=unsent,
            duration_ms=round((time.monotonic() - started) * 1000),
        )
        return cycle

    def _read_batch(self, per_vpart: int, limit: int) -> list[PendingRow]:
        params = {"owner": self.instance_id, "per_vpart": per_vpart, "limit": limit}
        with self._pool.connection() as conn:
            records = conn.execute(_OUTBOX_READ_OWNED, params).fetchall()
        return [
            PendingRow(
                id=int(str(r["id"])),
                message_id=uuid.UUID(str(r["message_id"])),
                vpart=int(str(r["vpart"])),
                epoch=int(str(r["epoch"])),
                topic=str(r["topic"]),
                key=str(r["message_key"]),
                event_type=str(r["event_type"]),
                contract_version=int(str(r["contract_version"])),
                payload=r["payload"],  # type: ignore[arg-type]
                headers=r["headers"],  # type: ignore[arg-type]
                attempts=int(str(r["attempts"])),
            )
            for r in records
        ]

    def _publish(self, rows: Sequence[PendingRow]) -> tuple[list[PendingRow], list[tuple[PendingRow, SendError]], int]:
        """Send the batch wave by wave; returns (acknowledged, failed, rows held back behind a failure)."""
        acked: list[PendingRow] = []
        failures: list[tuple[PendingRow, SendError]] = []
        blocked: set[str] = set()
        unsent = 0
        for wave in _waves(rows):
            sendable = [row for row in wave if row.key not in blocked]
            unsent += len(wave) - len(sendable)
            outcomes = self._send_wave(sendable)
            for row in sendable:
                error = outcomes[row.id]
                if error is None:
                    acked.append(row)
                else:
                    failures.append((row, error))
                    blocked.add(row.key)  # no later row of this key goes out in this batch
            broken = next((e for e in outcomes.values() if e is not None and e.fatal), None)
            if broken is not None:
                log.warning("kafka producer unusable: replacing it", error=broken.text())
                self._producer = self._producer_factory()
        return acked, failures, unsent

    def _send_wave(self, rows: Sequence[PendingRow]) -> dict[int, SendError | None]:
        """Produce the rows and flush once; every row gets an outcome (None = acknowledged)."""
        outcomes: dict[int, SendError | None] = {}
        topic_errors = {topic: self._topic_ready(topic) for topic in {row.topic for row in rows}}
        for row in rows:
            if topic_errors[row.topic] is not None:
                outcomes[row.id] = topic_errors[row.topic]
                continue
            if row.message_id in self._faults.fail_once:
                self._faults.fail_once.discard(row.message_id)
                outcomes[row.id] = SendError("TEST_TRANSIENT", "injected transient failure")
                continue
            outcomes_error = self._produce(row, outcomes)
            if outcomes_error is not None:
                outcomes[row.id] = outcomes_error
        self._maybe_pause("after-produce")
        remaining = self._producer.flush(self._config.message_timeout_ms / 1000 + 5)
        if remaining:
            log.warning("kafka flush timed out", still_queued=remaining)
        for row in rows:
            outcomes.setdefault(row.id, SendError("_UNRESOLVED", "no delivery report before the flush timeout", True))
        for row in rows:
            error = outcomes[row.id]
            if error is not None and error.code in {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"}:
                self._ready_topics.discard(row.topic)  # deleted meanwhile? the next batch checks it again
        return outcomes

    def _produce(self, row: PendingRow, outcomes: dict[int, SendError | None]) -> SendError | None:
        def on_delivery(err: KafkaError | None, _msg: object, row_id: int = row.id) -> None:
            outcomes[row_id] = None if err is None else send_error_of(err)

        arguments: dict[str, Any] = {
            "value": _encode_value(row.payload),
            "key": row.key.encode("utf-8"),
            "headers": _kafka_headers(row),
            "on_delivery": on_delivery,
        }
        for _ in range(2):
            try:
                self._producer.produce(row.topic, **arguments)
            except BufferError:  # librdkafka's local queue is full: let it drain, then try once more
                self._producer.flush(self._config.message_timeout_ms / 1000)
                continue
            except KafkaException as exc:
                return send_error_of(exc.args[0])
            self._producer.poll(0)
            return None
        return SendError("_QUEUE_FULL", "the producer queue stayed full", retriable=True)

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
            metadata = self._producer.list_topics(topic, timeout=5.0)
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

    def _settle(self, acked: Sequence[PendingRow], failures: Sequence[tuple[PendingRow, SendError]]) -> tuple[int, int]:
        """One transaction: delete the acknowledged rows, mark or dead-letter the failed ones."""
        dead_lettered = 0
        published = 0
        with self._pool.connection() as conn:
            if acked:
                for record in conn.execute(_OUTBOX_DELETE_PUBLISHED, {"ids": [row.id for row in acked]}).fetchall():
                    topic = str(record["topic"])
                    metrics.PUBLISHED.labels(topic=topic).inc()
                    metrics.PUBLISH_LATENCY.observe(max(0.0, float(str(record["latency"]))))
                    published += 1
            for row, error in failures:
                dead_lettered += self._record_failure(conn, row, error)
        return published, dead_lettered

    def _record_failure(self, conn: Conn, row: PendingRow, error: SendError) -> int:
        """Back off a failed row, or dead-letter it; returns 1 when it was dead-lettered."""
        metrics.PUBLISH_ERRORS.labels(topic=row.topic).inc()
        attempts = row.attempts + 1
        log.warning(
            "outbox send failed",
            message_id=str(row.message_id),
            topic=row.topic,
            error=error.text(),
            attempts=attempts,
        )
        fence = {"id": row.id, "owner": self.instance_id, "epoch": row.epoch, "error": error.text()}
        exhausted = not error.retriable and attempts >= self._config.max_attempts
        if error.permanent or exhausted:
            moved = conn.execute(_OUTBOX_DEAD_LETTER, {**fence, "permanent": error.permanent}).fetchone()
            if moved is None:
                return 0  # the lease moved on: its new owner decides
            metrics.DEAD_LETTERED.labels(topic=row.topic).inc()
            log.error(
                "outbox message dead-lettered",
                message_id=str(row.message_id),
                topic=row.topic,
                vpart=row.vpart,
                error=error.text(),
                permanent=error.permanent,
                attempts=attempts,
            )
            return 1
        conn.execute(_OUTBOX_MARK_FAILED, {**fence, "delay": self._backoff_seconds(attempts)})
        return 0

    def _backoff_seconds(self, attempts: int) -> float:
        growth = float(2 ** min(attempts - 1, 30))
        delay = min(self._config.backoff_max_seconds, self._config.backoff_base_seconds * growth)
        return delay * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not cryptography

    def _maybe_pause(self, point: str) -> None:
        """Test-only: freeze here (the heartbeat goes on) so a test can kill -9 the process at this point."""
        if self._faults.pause_at != point or self._batches != self._faults.pause_on_batch:
            return
        log.warning("relay test fault: paused", point=point, batch=self._batches)
        while True:
            time.sleep(3600)

    # -- leases -----------------------------------------------------------------------------------------

    def heartbeat(self) -> dict[int, int]:
        """Register this instance, renew our leases, take free vparts up to a fair share; returns owned vparts."""
        ttl = self._config.lease_ttl_seconds
        params = {"owner": self.instance_id, "ttl": ttl}
        with self._lease_lock, self._pool.connection() as conn:
            conn.execute(_INSTANCE_HEARTBEAT, params)
            conn.execute(_INSTANCE_PURGE)
            live_row = conn.execute(_INSTANCE_COUNT_LIVE).fetchone()
            live = max(1, int(str(live_row["live"]))) if live_row else 1
            target = math.ceil(VPARTS / live)
            owned = {int(str(r["vpart"])): int(str(r["epoch"])) for r in conn.execute(_LEASE_RENEW, params)}
            acquired: dict[int, int] = {}
            if len(owned) < target:
                records = conn.execute(_LEASE_ACQUIRE_FREE, {**params, "limit": target - len(owned)}).fetchall()
                acquired = {int(str(r["vpart"])): int(str(r["epoch"])) for r in records}
            conn.commit()
            lost = set(self._owned) - set(owned)
            self._owned = {**owned, **acquired}
            self._target = target
        metrics.OWNED_VPARTS.set(len(self._owned))
        if acquired or lost:
            log.info(
                "outbox leases changed", acquired=sorted(acquired), lost=sorted(lost), owned=len(self._owned), live=live
            )
        if acquired:
            self._wake.set()
        return dict(self._owned)

    def release_excess(self) -> None:
        """Between batches: give back vparts beyond the fair share so a newly started instance gets its part."""
        with self._lease_lock:
            excess = sorted(self._owned)[self._target :]
            if not excess:
                return
            with self._pool.connection() as conn:
                conn.execute(_LEASE_RELEASE, {"owner": self.instance_id, "vparts": excess})
            for vpart in excess:
                self._owned.pop(vpart, None)
        metrics.OWNED_VPARTS.set(len(self._owned))
        log.info("outbox leases released", released=excess, owned=len(self._owned))

    def release_all(self) -> None:
        """Give back every lease and unregister (graceful stop): the others take over at once, not after a TTL."""
        with self._lease_lock:
            with self._pool.connection() as conn:
                conn.execute(_LEASE_RELEASE, {"owner": self.instance_id, "vparts": list(range(VPARTS))})
                conn.execute(_INSTANCE_DELETE, {"owner": self.instance_id})
            self._owned = {}
        metrics.OWNED_VPARTS.set(0)

    def owned_vparts(self) -> list[int]:
        """The vparts this instance held at its last heartbeat."""
        return sorted(self._owned)

    # -- gauges -----------------------------------------------------------------------------------------

    def refresh_gauges(self) -> None:
        """Backlog per topic, lag and dead letters: bounded queries, run every few seconds, never per scrape."""
        cap = {"cap": self._config.backlog_count_cap}
        with self._pool.connection() as conn:
            backlog = {str(r["topic"]): int(str(r["rows"])) for r in conn.execute(_GAUGE_BACKLOG, cap)}
            oldest = conn.execute(_GAUGE_OLDEST).fetchone()
            dead = conn.execute(_GAUGE_DEAD_LETTERS, cap).fetchone()
        self._seen_topics |= set(backlog)
        for topic in self._seen_topics:  # a topic that emptied reports 0, not its last value
            metrics.BACKLOG.labels(topic=topic).set(backlog.get(topic, 0))
        metrics.LAG.set(max(0.0, float(str(oldest["age"]))) if oldest else 0.0)
        metrics.DEAD_LETTERS.set(int(str(dead["rows"])) if dead else 0)

    # -- loops ------------------------------------------------------------------------------------------

    def start(self, *, listen: bool = True) -> None:
        """Take the first leases, then start the heartbeat (and the LISTEN) threads."""
        self._closing.clear()
        try:
            self.heartbeat()
        except (psycopg.Error, OSError) as exc:
            log.warning("outbox heartbeat failed", error=str(exc))
        self._threads = [threading.Thread(target=self._heartbeat_loop, name="relay-heartbeat", daemon=True)]
        if listen and self._database_url:
            self._threads.append(threading.Thread(target=self._listen_loop, name="relay-listen", daemon=True))
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop the threads, flush the producer, release the leases."""
        self._closing.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        # the batch in hand was flushed and settled already; this only drains stray callbacks, and must stay
        # short so a stop during a broker outage ends within an orchestrator's grace period
        self._producer.flush(1.0)
        try:
            self.release_all()
        except (psycopg.Error, OSError) as exc:
            log.warning("outbox lease release failed; they expire by themselves", error=str(exc))

    def run(self, stop: threading.Event) -> None:
        """Publish until ``stop`` is set; the batch in hand is finished (flushed and settled) before leaving."""
        self.start()
        failures = 0
        log.info("outbox relay started", instance=self.instance_id, owned=len(self._owned))
        try:
            while not stop.is_set():
                liveness.beat()  # /healthz/liveness fails if this loop stops turning (a hung call)
                self._wake.clear()
                try:
                    self.release_excess()
                    cycle = self.run_once()
                except Exception as exc:  # noqa: BLE001 - the loop survives database and broker failures
                    failures += 1
                    log.warning("outbox relay cycle failed", error=str(exc), consecutive_failures=failures)
                    stop.wait(min(5.0, 0.2 * 2 ** min(failures, 5)))
                    continue
                failures = 0
                if not cycle.is_full:
                    self._idle(stop)
        finally:
            self.close()
            log.info("outbox relay stopped", instance=self.instance_id)

    def _idle(self, stop: threading.Event) -> None:
        """Wait for a NOTIFY, the next poll, or the stop request, whichever comes first."""
        deadline = time.monotonic() + self._config.poll_interval_seconds
        while not stop.is_set() and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(min(remaining, 0.2))

    def drain(self) -> dict[str, int]:
        """`pin relay --once`: publish what is there (in this instance's share) and stop; returns the totals."""
        self.start(listen=False)
        totals = {"read": 0, "published": 0, "failed": 0, "dead_lettered": 0, "held_back": 0, "cycles": 0}
        try:
            while True:
                cycle = self.run_once()
                totals["cycles"] += 1
                for name, value in cycle.as_dict().items():
                    totals[name] += value
                if cycle.read == 0 or (cycle.published == 0 and cycle.dead_lettered == 0):
                    break
        finally:
            self.close()
        return totals

    def _heartbeat_loop(self) -> None:
        while not self._closing.wait(self._config.heartbeat_seconds):
            try:
                self.heartbeat()
                if time.monotonic() >= self._next_gauge_refresh:
                    self._next_gauge_refresh = time.monotonic() + self._config.gauge_refresh_seconds
                    self.refresh_gauges()
            except Exception as exc:  # noqa: BLE001 - a database outage must not kill the heartbeat
                log.warning("outbox heartbeat failed", error=str(exc))

    def _listen_loop(self) -> None:
        """LISTEN pin_outbox on a dedicated connection; reconnect after any failure."""
        assert self._database_url is not None
        while not self._closing.is_set():
            try:
                with psycopg.connect(self._database_url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._wake.set()  # notifications sent while we were away are lost: look once
                    while not self._closing.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wake.set()
            except psycopg.Error as exc:
                log.warning("outbox listen connection lost", error=str(exc))
                self._closing.wait(1.0)
