"""Writes integration events as outbox rows inside the caller's transaction.

Per-key order: every producer changes (and so row-locks) the aggregate whose id is the key before the unit
of work inserts the outbox rows, so two transactions of one aggregate serialize on that lock and the later
one takes its identity value after the earlier committed. Ordered by id, a key's rows are in commit order.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from pin.messaging.contracts import Contract, utc_iso

# Virtual partitions of the key space; the relay's unit of ownership. Changing it re-homes keys: never
# change it while rows are waiting.
VPARTS = 64


def vpart_of(key: str) -> int:
    """The stable virtual partition of a message key."""
    return zlib.crc32(key.encode("utf-8")) % VPARTS


@dataclass(frozen=True)
class OutboxRow:
    """One message as the relay will send it."""

    message_id: uuid.UUID
    topic: str
    key: str
    event_type: str
    contract_version: int
    payload: Mapping[str, object]
    headers: Mapping[str, str]
    occurred_at: datetime


@dataclass
class MessageContext:
    """Where a message comes from: the correlation id (job run id or request id) and the trace."""

    correlation_id: str
    traceparent: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)


def build_row(contract: Contract, *, occurred_at: datetime, context: MessageContext) -> OutboxRow:
    """The envelope of SPEC section 6 around a contract: MessageId, ContractVersion, OccurredAt, headers."""
    message_id = uuid.uuid4()
    payload = {
        **contract.to_payload(),
        "MessageId": str(message_id),
        "ContractVersion": contract.CONTRACT_VERSION,
        "OccurredAt": utc_iso(occurred_at),
    }
    headers = {"correlation-id": context.correlation_id, **context.extra_headers}
    if context.traceparent:
        headers["traceparent"] = context.traceparent
    return OutboxRow(
        message_id=message_id,
        topic=contract.TOPIC,
        key=contract.message_key(),
        event_type=contract.EVENT_TYPE,
        contract_version=contract.CONTRACT_VERSION,
        payload=payload,
        headers=headers,
        occurred_at=occurred_at,
    )


_INSERT = """
INSERT INTO outbox.message
    (message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, occurred_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""


# The columns an insert fills, in the order of :func:`insert_params` (for a caller that writes rows itself).
INSERT_COLUMNS = ("message_id", "vpart", "topic", "message_key", "event_type", "contract_version", "payload",
                  "headers", "occurred_at")  # fmt: skip


def insert_params(row: OutboxRow) -> tuple[object, ...]:
    """The values of one row's insert, in the order of INSERT_COLUMNS."""
    return (
        row.message_id,
        vpart_of(row.key),
        row.topic,
        row.key,
        row.event_type,
        row.contract_version,
        Jsonb(dict(row.payload)),
        Jsonb(dict(row.headers)),
        row.occurred_at,
    )


def outbox_insert(conn: psycopg.Connection[dict[str, object]], rows: Iterable[OutboxRow]) -> int:
    """Insert rows in the caller's transaction; returns how many."""
    params = [insert_params(row) for row in rows]
    if params:
        with conn.cursor() as cur:
            cur.executemany(_INSERT, params)
    return len(params)
