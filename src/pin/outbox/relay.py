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
- **Pipeline** (while a backlog lasts). While the broker acknowledges one batch, the next is read (leaving
  out every unsettled row by id) and handed to the producer; a row whose key has a row in flight, or a failure
  whose backoff or dead letter is not committed yet, is held back, so the guard above covers those too. Once
  all its outcomes are in, a batch is settled (acked rows deleted, failed rows marked) by a settling thread
  while the next batch is read and produced. At most three batches are unsettled (one in flight, one acked
  waiting for the settling thread, one settling): a crash sends at most those again.
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
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache, partial
from typing import Any, NamedTuple

import psycopg
import structlog
from confluent_kafka import KafkaError, KafkaException, Producer
from psycopg.rows import tuple_row
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
    batch_size: int = 2000
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


class PendingRow(NamedTuple):
    """An outbox row read by its vpart's lease owner, with the lease epoch it was read under.

    ``payload`` and ``headers`` are the columns' JSON text as PostgreSQL prints them: the relay re-encodes the
    payload compactly (:func:`_encode_value`) and never builds a row object per column value. The fields are in
    the order of the read's columns (one tuple per row, no per-column conversion in Python).
    """

    id: int
    message_id: str
    vpart: int
    epoch: int
    topic: str
    key: str
    event_type: str
    contract_version: int
    payload: str
    headers: str
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
    # rows of the batch finished in this step (the pipeline reads one batch and finishes another)
    settled: int = 0

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
# The rows of the batches not yet settled are left out by id: the pipeline reads the next batch while the broker
# acknowledges the previous one (then run without a prepared plan, so the id array is a constant the planner
# hashes). The columns are in PendingRow's order; payload and headers as JSON text.
_OUTBOX_READ_OWNED = """
SELECT m.id, m.message_id::text, m.vpart::int, l.epoch, m.topic, m.message_key, m.event_type, m.contract_version,
       m.payload::text, m.headers::text, m.attempts
FROM outbox.relay_lease l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m
    WHERE m.vpart = l.vpart
      AND m.id <> ALL(%(in_flight)s::bigint[])
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
DELETE FROM outbox.message WHERE id = ANY(%(ids)s::bigint[])
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


# json.loads / json.dumps(..., separators=(",", ":"), ensure_ascii=False) without their per-call set-up (the
# encoding detection of bytes, a new C encoder per call): the same C scanner and encoder, so the same bytes.
_scan_json: Any = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009 - not in the type stubs
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_compact_json: Any = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
)


def _encode_value(payload: str) -> bytes:
    """The message value: the payload (the jsonb column's text) as compact UTF-8 JSON, exactly the bytes of
    ``json.dumps(payload, separators=(",", ":"), ensure_ascii=False)`` on the decoded payload."""
    value = _scan_json(payload, 0)[0]
    if _compact_json is None:  # no C accelerator (not CPython): the same output, slower
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "".join(_compact_json(value, 0)).encode("utf-8")


_ENVELOPE_HEADERS = frozenset({"message-id", "contract-version", "event-type"})


@lru_cache(maxsize=1024)
def _row_headers(text: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The headers column's pairs, and whether it names an envelope header. Cached: the rows of one unit of work
    (one correlation id, one trace) carry the same headers."""
    pairs = tuple((str(k), str(v)) for k, v in _scan_json(text, 0)[0].items())
    return pairs, any(name in _ENVELOPE_HEADERS for name, _value in pairs)


def _kafka_headers(row: PendingRow) -> list[tuple[str, str | bytes | None]]:
    """The row's headers (correlation-id, traceparent, ...) plus the envelope headers of SPEC section 6, which
    win over a row header of the same name; the producer sends the values as UTF-8."""
    pairs, overridden = _row_headers(row.headers)
    envelope = (
        ("message-id", row.message_id),
        ("contract-version", str(row.contract_version)),
        ("event-type", row.event_type),
    )
    if overridden:
        headers = dict(pairs)
        headers.update(envelope)
        return list(headers.items())
    return [*pairs, *envelope]


def _waves(rows: Sequence[PendingRow]) -> Iterator[list[PendingRow]]:
    """Wave n holds the n-th row (in id order) of every key in the batch."""
    per_key: dict[str, list[PendingRow]] = {}
    for row in rows:
        per_key.setdefault(row.key, []).append(row)
    depth = max((len(key_rows) for key_rows in per_key.values()), default=0)
    for n in range(depth):
        yield [key_rows[n] for key_rows in per_key.values() if len(key_rows) > n]


def _id_array(ids: Sequence[int]) -> str:
    """Ids as one bigint[] literal: one text parameter instead of an array psycopg adapts element by element."""
    return "{" + ",".join(map(str, ids)) + "}"


def _sum_cycles(a: RelayCycle, b: RelayCycle) -> RelayCycle:
    """The counters of two cycles added up (``more_waiting`` of either)."""
    return RelayCycle(
        read=a.read + b.read,
        published=a.published + b.published,
        failed=a.failed + b.failed,
        dead_lettered=a.dead_lettered + b.dead_lettered,
        held_back=a.held_back + b.held_back,
        more_waiting=a.more_waiting or b.more_waiting,
        settled=a.settled + b.settled,
    )


def _pending_rows(_cursor: object) -> Callable[[Sequence[Any]], PendingRow]:
    """psycopg row factory: one PendingRow (a tuple) per record, the columns in the read's order."""
    return PendingRow._make


def _deliver(outcomes: dict[int, SendError | None], row_id: int, err: KafkaError | None, _msg: object) -> None:
    """librdkafka's delivery report of one row (called from ``poll``): None = acknowledged."""
    outcomes[row_id] = None if err is None else send_error_of(err)


def _produce_row(producer: Producer, row: PendingRow, outcomes: dict[int, SendError | None]) -> None:
    """Hand one row to the producer; its delivery report lands in ``outcomes``. Raises as ``produce`` does."""
    producer.produce(
        row.topic,
        _encode_value(row.payload),
        row.key,
        on_delivery=partial(_deliver, outcomes, row.id),
        headers=_kafka_headers(row),
    )


class _Batch:
    """Rows read together on their way to the broker: sent wave by wave (a key's n-th row only once its
    (n-1)-th is acknowledged; nothing more of a key after one of its rows failed), settled (deleted, marked or
    dead-lettered) once every row has an outcome."""

    def __init__(self, number: int, rows: list[PendingRow], producer: Producer) -> None:
        self.number = number
        self.rows = rows
        self.ids = [row.id for row in rows]
        self.keys = {row.key for row in rows}
        self.producer = producer
        self.waves = list(_waves(rows))
        self.next_wave = 0
        self.wave: list[PendingRow] = []  # the rows handed to the producer last, awaiting their outcomes
        self.outcomes: dict[int, SendError | None] = {}
        self.expected = 0  # rows handed over so far (each gets exactly one outcome)
        self.acked: list[PendingRow] = []
        self.failures: list[tuple[PendingRow, SendError]] = []
        self.blocked: set[str] = set()
        self.unsent = 0
        self.started = time.monotonic()


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
        self._in_flight: _Batch | None = None  # the pipeline's batch handed to the producer, not yet acked
        # batches acked (or failed) whose rows the settling thread is deleting or marking, oldest first
        self._settling: deque[tuple[_Batch, Future[RelayCycle]]] = deque()
        self._settler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-settle")
        self._active_vparts = 0  # vparts that gave rows to the last batch
        self._next_gauge_refresh = 0.0
        self._seen_topics: set[str] = set(INTEGRATION_TOPICS)
        self._ready_topics: set[str] = set()  # topics known to exist (created or checked)

    # -- batches ----------------------------------------------------------------------------------------

    def run_once(self) -> RelayCycle:
        """Read one batch of owned, due rows; publish; delete the acknowledged; mark or dead-letter the failed.
        The whole round: nothing is left in flight when it returns (what the pipeline had in flight is
        finished first)."""
        self.finish_in_flight()
        rows, read, _held, more_waiting = self._read(None)
        if not rows:
            return RelayCycle(read=read, more_waiting=more_waiting)
        cycle = self._finish(self._begin(rows))
        return replace(cycle, read=read, more_waiting=more_waiting)

    def pump(self) -> RelayCycle:
        """One step of the pipeline. Read the next batch while the broker acknowledges the batch in flight (the
        read leaves out every unsettled row and holds back every row of a key with a row in flight or a failure
        not yet recorded), hand the new batch's first wave to the producer, finish the batch in flight (its
        later waves, its acks) and hand it to the settling thread, which deletes and marks while this thread
        reads and produces the next. Returns the rows read and the counters of the batches settled meanwhile.
        """
        done = self._reap(wait=False)
        previous = self._in_flight
        rows, read, held, more_waiting = self._read(previous)
        self._in_flight = self._begin(rows) if rows else None
        if previous is not None:
            done = _sum_cycles(done, self._complete_and_settle(previous))
        if self._in_flight is not None and not (more_waiting or held):
            # no backlog: finish this batch now rather than after the next read (commit -> ack latency)
            batch, self._in_flight = self._in_flight, None
            done = _sum_cycles(done, self._complete_and_settle(batch))
        done = _sum_cycles(done, self._reap(wait=False))
        return replace(done, read=read, held_back=done.held_back + held, more_waiting=more_waiting or held > 0)

    def _complete_and_settle(self, batch: _Batch) -> RelayCycle:
        """Await the batch's outcomes, then hand it to the settling thread; the counters of the batches that
        had to be waited for (one batch settles at a time: when the database is behind, wait for it)."""
        self._complete(batch)
        done = RelayCycle()
        while self._settling:
            done = _sum_cycles(done, self._reap(wait=True, oldest_only=True))
        self._settling.append((batch, self._settler.submit(self._settle_batch, batch)))
        return done

    def finish_in_flight(self) -> RelayCycle:
        """Finish the batch in flight and wait until every batch is settled (before a stop, a lease release or
        a synchronous round); returns their counters."""
        batch, self._in_flight = self._in_flight, None
        done = RelayCycle() if batch is None else self._complete_and_settle(batch)
        return _sum_cycles(done, self._reap(wait=True))

    def _reap(self, *, wait: bool, oldest_only: bool = False) -> RelayCycle:
        """Collect the settled batches (all, or only the oldest; waiting for them, or only those done)."""
        total = RelayCycle()
        error: BaseException | None = None
        while self._settling and (wait or self._settling[0][1].done()):
            _batch, future = self._settling.popleft()
            try:
                total = _sum_cycles(total, future.result())
            except Exception as exc:  # noqa: BLE001 - its rows stay in the outbox and are sent again
                error = error or exc
            if oldest_only:
                break
        if error is not None:
            raise error
        return total

    def _read(self, in_flight: _Batch | None) -> tuple[list[PendingRow], int, int, bool]:
        """The next batch: (rows to send, rows read, rows held back behind a key in flight, more waiting?)."""
        # share the batch among the vparts that had rows last time (all owned ones at first), so one hot vpart
        # still gets whole batches and many busy vparts are read evenly
        limit = self._config.batch_size
        per_vpart = max(8, math.ceil(limit / max(1, self._active_vparts or len(self._owned))))
        unsettled: list[int] = []
        held_keys: set[str] = set()
        if in_flight is not None:
            unsettled += in_flight.ids
            held_keys |= in_flight.keys  # a row in flight may still fail
        for batch, _future in self._settling:
            unsettled += batch.ids
            held_keys |= batch.blocked  # a failure whose backoff or dead letter is not committed yet
        params = {
            "owner": self.instance_id,
            "per_vpart": per_vpart,
            "limit": limit,
            "in_flight": _id_array(unsettled),
        }
        with self._pool.connection() as conn, conn.cursor(row_factory=_pending_rows) as cur:
            # with ids to leave out: planned with them (a hashed constant); without: the prepared plan (trickle)
            rows = cur.execute(_OUTBOX_READ_OWNED, params, prepare=False if unsettled else None).fetchall()
        per_vpart_counts = Counter(row.vpart for row in rows)
        self._active_vparts = len(per_vpart_counts)
        more_waiting = bool(rows) and (len(rows) >= limit or max(per_vpart_counts.values()) >= per_vpart)
        if not held_keys or not rows:
            return rows, len(rows), 0, more_waiting
        sendable = [row for row in rows if row.key not in held_keys]
        return sendable, len(rows), len(rows) - len(sendable), more_waiting

    def _begin(self, rows: list[PendingRow]) -> _Batch:
        """A new batch; its first wave goes to the producer (not awaited)."""
        self._batches += 1
        batch = _Batch(self._batches, rows, self._producer)
        self._send_next_wave(batch)
        return batch

    def _finish(self, batch: _Batch) -> RelayCycle:
        """Await the batch's outcomes wave by wave, then settle it (in this thread)."""
        self._complete(batch)
        return self._settle_batch(batch)

    def _complete(self, batch: _Batch) -> None:
        """Await the batch's outcomes wave by wave (a key's next row goes out once its previous is acked)."""
        self._await_wave(batch)
        while batch.next_wave < len(batch.waves):
            self._send_next_wave(batch)
            self._await_wave(batch)
        self._maybe_pause("after-ack", batch.number)

    def _settle_batch(self, batch: _Batch) -> RelayCycle:
        """Delete the batch's acknowledged rows, mark or dead-letter its failed ones; its counters."""
        published, dead_lettered = self._settle(batch.acked, batch.failures)
        cycle = RelayCycle(
            published=published,
            failed=len(batch.failures),
            dead_lettered=dead_lettered,
            held_back=batch.unsent,
            settled=len(batch.rows),
        )
        log.info(
            "outbox batch published",
            count=published,
            vparts=sorted({row.vpart for row in batch.rows}),
            failed=cycle.failed,
            dead_lettered=dead_lettered,
            held_back=batch.unsent,
            duration_ms=round((time.monotonic() - batch.started) * 1000),
        )
        return cycle

    def _send_next_wave(self, batch: _Batch) -> None:
        """Hand the batch's next wave to the producer, but no row of a key that failed in this batch."""
        wave = batch.waves[batch.next_wave]
        batch.next_wave += 1
        sendable = [row for row in wave if row.key not in batch.blocked] if batch.blocked else wave
        batch.unsent += len(wave) - len(sendable)
        batch.wave = sendable
        batch.expected += len(sendable)
        outcomes = batch.outcomes
        topic_errors = {topic: self._topic_ready(topic) for topic in {row.topic for row in sendable}}
        fail_once = self._faults.fail_once
        for row in sendable:
            error = topic_errors[row.topic]
            if error is None and fail_once and uuid.UUID(row.message_id) in fail_once:
                fail_once.discard(uuid.UUID(row.message_id))
                error = SendError("TEST_TRANSIENT", "injected transient failure")
            if error is None:
                try:
                    _produce_row(batch.producer, row, outcomes)
                except BufferError:  # librdkafka's local queue is full: let it drain, then try once more
                    error = self._produce_again(batch.producer, row, outcomes)
                except KafkaException as exc:
                    error = send_error_of(exc.args[0])
            if error is not None:
                outcomes[row.id] = error
        batch.producer.poll(0)
        self._maybe_pause("after-produce", batch.number)

    def _produce_again(
        self, producer: Producer, row: PendingRow, outcomes: dict[int, SendError | None]
    ) -> SendError | None:
        producer.flush(self._config.message_timeout_ms / 1000)
        try:
            _produce_row(producer, row, outcomes)
        except BufferError:
            return SendError("_QUEUE_FULL", "the producer queue stayed full", retriable=True)
        except KafkaException as exc:
            return send_error_of(exc.args[0])
        return None

    def _await_wave(self, batch: _Batch) -> None:
        """Serve delivery reports until every row of the wave has its outcome (or librdkafka's own timeout
        plus a margin passed), then sort the wave into acknowledged and failed rows."""
        outcomes = batch.outcomes
        # nothing else in flight: flush, which sends at once instead of after linger.ms (commit -> ack latency of
        # a trickle); with another batch in flight only poll, which does not wait for that batch's acks
        serve = batch.producer.flush if self._in_flight is None else batch.producer.poll
        deadline = time.monotonic() + self._config.message_timeout_ms / 1000 + 5
        while len(outcomes) < batch.expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("kafka delivery reports timed out", missing=batch.expected - len(outcomes))
                break
            serve(min(remaining, 0.1))
        broken: SendError | None = None
        for row in batch.wave:
            error = outcomes.setdefault(
                row.id, SendError("_UNRESOLVED", "no delivery report before the flush timeout", True)
            )
            if error is None:
                batch.acked.append(row)
                continue
            batch.failures.append((row, error))
            batch.blocked.add(row.key)  # no later row of this key goes out in this batch
            if error.code in {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"}:
                self._ready_topics.discard(row.topic)  # deleted meanwhile? the next batch checks it again
            if error.fatal:
                broken = error
        batch.wave = []
        if broken is not None:
            if batch.producer is self._producer:
                log.warning("kafka producer unusable: replacing it", error=broken.text())
                self._producer = self._producer_factory()
            batch.producer = self._producer

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
        """One transaction: delete the acknowledged rows (one statement), mark or dead-letter the failed ones."""
        dead_lettered = 0
        published = 0
        with self._pool.connection() as conn:
            if acked:
                with conn.cursor(row_factory=tuple_row) as cur:
                    ids = _id_array([row.id for row in acked])
                    records = cur.execute(_OUTBOX_DELETE_PUBLISHED, {"ids": ids}).fetchall()
                per_topic = Counter(topic for topic, _latency in records)
                for topic, count in per_topic.items():
                    metrics.PUBLISHED.labels(topic=topic).inc(count)
                metrics.observe_publish_latencies([latency if latency > 0.0 else 0.0 for _topic, latency in records])
                published = len(records)
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

    def _maybe_pause(self, point: str, batch: int) -> None:
        """Test-only: freeze here (the heartbeat goes on) so a test can kill -9 the process at this point."""
        if self._faults.pause_at != point or batch != self._faults.pause_on_batch:
            return
        log.warning("relay test fault: paused", point=point, batch=batch)
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
        """Publish until ``stop`` is set, pipelined (:meth:`pump`); the batch in flight is finished (acknowledged
        and settled) before leaving."""
        self.start()
        failures = 0
        log.info("outbox relay started", instance=self.instance_id, owned=len(self._owned))
        try:
            while not stop.is_set():
                liveness.beat()  # /healthz/liveness fails if this loop stops turning (a hung call)
                self._wake.clear()
                try:
                    if self._has_excess():
                        self.finish_in_flight()  # no row of a vpart we give back stays unsettled
                        self.release_excess()
                    cycle = self.pump()
                except Exception as exc:  # noqa: BLE001 - the loop survives database and broker failures
                    failures += 1
                    log.warning("outbox relay cycle failed", error=str(exc), consecutive_failures=failures)
                    stop.wait(min(5.0, 0.2 * 2 ** min(failures, 5)))
                    continue
                failures = 0
                if self._in_flight is None and not cycle.is_full:
                    self._idle(stop)
        finally:
            self._finish_before_stop()
            self.close()
            log.info("outbox relay stopped", instance=self.instance_id)

    def _has_excess(self) -> bool:
        """More vparts than the fair share (a new instance came): they are given back between batches."""
        return len(self._owned) > self._target  # no lock: a stale answer only moves the release by a batch

    def _finish_before_stop(self) -> None:
        try:
            self.finish_in_flight()
        except Exception as exc:  # noqa: BLE001 - its rows stay in the outbox and are sent again
            log.warning("outbox relay could not settle the batch in flight", error=str(exc))

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

        def add(cycle: RelayCycle) -> None:
            totals["cycles"] += 1
            for name, value in cycle.as_dict().items():
                totals[name] += value

        try:
            while True:
                cycle = self.pump()
                add(cycle)
                if self._in_flight is None and cycle.read == 0:
                    if not self._settling:
                        break
                    add(self.finish_in_flight())  # then look once more: what was left out is settled now
                    continue
                if cycle.settled and cycle.published == 0 and cycle.dead_lettered == 0:
                    add(self.finish_in_flight())  # a whole batch failed: stop rather than spin
                    break
        finally:
            self._finish_before_stop()
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
