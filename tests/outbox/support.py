"""Helpers of the relay tests: a test contract, row inserts, an in-process relay and its fault hooks, topic checks."""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import ClassVar

from confluent_kafka import Producer

from pin.db import connect
from pin.messaging.contracts import Contract
from pin.messaging.kafka import ensure_topics, producer_config
from pin.outbox.relay import OutboxRelay, RelayConfig, RelayHooks
from pin.outbox.relay.batch import PendingRow
from pin.outbox.relay.errors import SendError
from pin.outbox.writer import RELAY_POLICY, MessageContext, OutboxRow, build_rows, outbox_insert
from pin.settings import Settings
from tests.support.kafka import Record

TOPIC = "pin.test.outbox-relay.v1"

# Subprocess relays in tests: short leases so handovers take ~3 s, short send timeouts.
RELAY_TEST_ENV = {
    "PIN_RELAY_LEASE_TTL_SECONDS": "3",
    "PIN_RELAY_HEARTBEAT_SECONDS": "0.5",
    "PIN_RELAY_MESSAGE_TIMEOUT_MS": "3000",
    "PIN_RELAY_BACKOFF_BASE_SECONDS": "0.2",
    "PIN_RELAY_BACKOFF_MAX_SECONDS": "2",
}


class ThingHappened(Contract):
    """A test contract: Seq is the aggregate's version, so per key it is the commit order."""

    TOPIC: ClassVar[str] = TOPIC
    EVENT_TYPE: ClassVar[str] = "pin.test.thing-happened"

    thing_id: str
    seq: int
    blob: str = ""

    def message_key(self) -> str:
        """The aggregate id."""
        return self.thing_id


def event_row(key: str, seq: int, *, blob: str = "", correlation_id: str = "test-run") -> OutboxRow:
    """One outbox row of ThingHappened."""
    context = MessageContext(correlation_id, traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    event = ThingHappened(thing_id=key, seq=seq, blob=blob)
    (row,) = build_rows(*event.recorded(), occurred_at=datetime.now(UTC), context=context, policy=RELAY_POLICY)
    return row


def insert_rows(database_url: str, rows: Iterable[OutboxRow]) -> list[OutboxRow]:
    """Insert rows in one transaction (as a unit of work would); returns them."""
    rows = list(rows)
    with connect(database_url) as conn:
        outbox_insert(conn, rows)
        conn.commit()
    return rows


def scalar(database_url: str, sql: str, params: Sequence[object] = ()) -> object:
    """The first column of the first row."""
    with connect(database_url, autocommit=True) as conn:
        row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return next(iter(row.values()))


def outbox_count(database_url: str) -> int:
    """Rows still in outbox.message."""
    value = scalar(database_url, "SELECT count(*) FROM outbox.message")
    assert isinstance(value, int)
    return value


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll ``predicate`` until true; returns the seconds it took, fails the test at the deadline."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for: {what}")
        time.sleep(interval)
    return time.monotonic() - started


def broker_settings(make_settings: Callable[..., Settings], bootstrap: str) -> Settings:
    """Settings pointing at the test broker, with the test topic created."""
    settings = make_settings(kafka_bootstrap_servers=bootstrap)
    ensure_topics(settings, [TOPIC])
    return settings


class FailOnce(RelayHooks):
    """The next send of each of these messages fails with a transient error (the retry path, in process)."""

    def __init__(self, *message_ids: uuid.UUID) -> None:
        self.pending = {str(message_id) for message_id in message_ids}

    def send_error(self, row: PendingRow) -> SendError | None:
        """A transient failure the first time one of the messages is sent."""
        if row.message_id not in self.pending:
            return None
        self.pending.discard(row.message_id)
        return SendError("TEST_TRANSIENT", "injected transient failure")


def make_relay(
    pool: object,
    settings: Settings,
    *,
    hooks: RelayHooks | None = None,
    ensure_topic: Callable[[str], object] | None = None,
    **config: object,
) -> OutboxRelay:
    """An in-process relay with test timings and a real producer (``ensure_topic``: the broker's by default)."""
    values: dict[str, object] = {
        "lease_ttl_seconds": 3.0,
        "heartbeat_seconds": 0.5,
        "message_timeout_ms": 3000,
        "backoff_base_seconds": 0.5,
        "backoff_max_seconds": 2.0,
        **config,
    }
    relay_config = RelayConfig(**values)  # type: ignore[arg-type]

    def producer() -> Producer:
        return Producer(producer_config(settings, **{"message.timeout.ms": relay_config.message_timeout_ms}))

    return OutboxRelay(
        pool,  # type: ignore[arg-type]
        producer,
        relay_config,
        database_url=settings.database_url,
        ensure_topic=ensure_topic or (lambda topic: ensure_topics(settings, [topic], timeout=5.0)),
        hooks=hooks,
        instance_id=f"test-{uuid.uuid4().hex[:8]}",
    )


def first_seqs_by_key(records: Sequence[Record]) -> dict[str, list[int]]:
    """Per key, the Seq of the first occurrence of each message, in topic order (partition, offset)."""
    seen: set[str] = set()
    by_key: dict[str, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        message_id = record.headers["message-id"]
        if message_id in seen:
            continue
        seen.add(message_id)
        assert record.key is not None
        by_key.setdefault(record.key, []).append(int(record.json()["Seq"]))
    return by_key


def duplicates(records: Sequence[Record]) -> int:
    """How many records repeat a message-id already seen."""
    return len(records) - len({r.headers["message-id"] for r in records})


def drop_producer(relay: OutboxRelay) -> None:
    """Close the relay, which lets its producer go (a connected client makes the embedded broker's stop take 5 s)."""
    relay.close()
    gc.collect()  # a batch object may still hold it in a reference cycle
