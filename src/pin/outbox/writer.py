"""The outbox row: its envelope, headers, columns and JSON encoding (the one encoder of every Kafka value), and the
one insert every row goes through.

Events become rows only through the unit of work (:meth:`pin.unit_of_work.UnitOfWork.record`), which builds them with
:func:`build_rows` and inserts them with :func:`outbox_insert`, or hands them to a set-based statement that embeds
the same insert (:func:`insert_values_sql` for a few rows, :func:`insert_unnest_sql` for a batch). The statements
are in ``queries.sql``; their column lists are generated here from the one column tuple. Why a key's rows are in
commit order: docs/design/relay.md; the set-based writes: docs/design/one-statement-writes.md.

What rows an event becomes and who takes them out is the process's :class:`OutboxPolicy`, built once by the
composition root and handed to every unit of work. In cdc mode (:class:`OutboxMode`) the unit of work ends every
transaction that inserted rows with :func:`outbox_capture`, which deletes them again: the WAL keeps the inserts, in
commit order, for Debezium's outbox router (docs/runbooks/outbox-cdc.md), and the table stays empty.
"""

from __future__ import annotations

import enum
import functools
import json
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import LiteralString

import orjson
import psycopg
from psycopg.types.json import Jsonb

from pin.db import load_queries
from pin.messaging.contracts import Contract, successor_of, utc_iso


class OutboxMode(enum.StrEnum):
    """Who takes the rows out of the outbox (PIN_OUTBOX_MODE): `pin relay`, or Debezium reading the WAL."""

    RELAY = "relay"  # rows wait in the table until the relay published and deleted them
    CDC = "cdc"  # each row is deleted in the transaction that inserted it; the WAL's insert is the message


class Publish(enum.StrEnum):
    """The rows of an event type in migration (PIN_CONTRACT_MIGRATIONS, docs/runbooks/contract-migration.md)."""

    DUAL = "dual"  # the v1 row and the v2 row of each event, with the same MessageId
    V2 = "v2"  # the sunset: the v2 row only


@dataclass(frozen=True)
class OutboxPolicy:
    """What rows the events of this process become and who takes them out: built once by the composition root
    (:func:`pin.roles.start_role`) from the settings and handed to every unit of work, never read from a global."""

    # PIN_OUTBOX_MODE: every process of a deployment runs in the same mode (docs/runbooks/outbox-cdc.md)
    mode: OutboxMode = OutboxMode.RELAY
    # PIN_CONTRACT_MIGRATIONS as the start checks left it (pin.messaging.migrations.publishing): event type -> its
    # rows while in migration; an event type not named writes v1 rows
    publish: Mapping[str, Publish] = field(default_factory=dict)

    @classmethod
    def of(cls, mode: str, publish: Mapping[str, str] | None = None) -> OutboxPolicy:
        """The policy of a mode and migrations as the settings spell them (``"cdc"``, ``{"X": "dual"}``)."""
        return cls(OutboxMode(mode), {event_type: Publish(value) for event_type, value in (publish or {}).items()})


# The default deployment's policy: the relay takes the rows out, no event type is in migration.
RELAY_POLICY = OutboxPolicy()


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


# the rows of one unit of work or batch share their OccurredAt (the cycle's AsOf): written once
_occurred_iso = functools.lru_cache(maxsize=16)(utc_iso)


def build_rows(
    kind: type[Contract],
    key: str,
    payload: Mapping[str, object],
    *,
    occurred_at: datetime,
    context: MessageContext,
    policy: OutboxPolicy,
) -> list[OutboxRow]:
    """The outbox rows of one event: the envelope of SPEC section 6 (MessageId, ContractVersion, OccurredAt,
    headers) around its payload (the contract's fields under their contract names, as ``kind.to_payload()`` or a
    payload builder gives them). The one row builder: the unit of work calls it for every recorded event.

    While the event type is in migration to its successor (``policy.publish``), the event is also the
    successor's row on its own topic (``kind.from_predecessor`` of the payload) under the same MessageId, so a
    group that moves from one topic to the other applies it once (its inbox); after the sunset, only that row.
    Both come from here, so every producer path writes both in its one transaction.
    """
    message_id = uuid.uuid4()
    publish = policy.publish.get(kind.EVENT_TYPE) if policy.publish else None
    successor = successor_of(kind) if publish is not None else None
    if successor is None:
        return [_row(kind, key, payload, message_id, occurred_at, context)]
    second = _row(successor, key, successor.from_predecessor(payload), message_id, occurred_at, context)
    if publish is Publish.V2:
        return [second]
    return [_row(kind, key, payload, message_id, occurred_at, context), second]


def _row(  # noqa: PLR0917 - the private builder of build_rows, called with its arguments in order
    kind: type[Contract],
    key: str,
    payload: Mapping[str, object],
    message_id: uuid.UUID,
    occurred_at: datetime,
    context: MessageContext,
) -> OutboxRow:
    full = {
        **payload,
        "MessageId": str(message_id),
        "ContractVersion": kind.CONTRACT_VERSION,
        "OccurredAt": _occurred_iso(occurred_at),
    }
    headers = {"correlation-id": context.correlation_id, **context.extra_headers}
    if context.traceparent:
        headers["traceparent"] = context.traceparent
    return OutboxRow(
        message_id=message_id,
        topic=kind.TOPIC,
        key=key,
        event_type=kind.EVENT_TYPE,
        contract_version=kind.CONTRACT_VERSION,
        payload=full,
        headers=headers,
        occurred_at=occurred_at,
    )


# The outbox row's columns, in the order of the inserts' parameters, and the array type of each in a batch insert.
_COLUMNS: tuple[tuple[str, str], ...] = (
    ("message_id", "uuid"),
    ("vpart", "smallint"),
    ("topic", "text"),
    ("message_key", "text"),
    ("event_type", "text"),
    ("contract_version", "integer"),
    ("payload", "text"),
    ("value", "text"),
    ("headers", "text"),
    ("correlation_id", "text"),
    ("traceparent", "text"),
    ("occurred_at", "timestamptz"),
)
INSERT_COLUMNS = tuple(name for name, _ in _COLUMNS)
# What a row keeps when the relay moves it to outbox.dead_letter and a replay puts it back (under the same id).
MOVED_COLUMNS = ("id", *INSERT_COLUMNS, "created_at")
MOVED_COLUMNS_SQL = ", ".join(MOVED_COLUMNS)
# The consumer headers as the plain columns Debezium's outbox router places (deploy/debezium/), by header name.
HEADER_COLUMNS = {
    "message-id": "message_id",
    "event-type": "event_type",
    "contract-version": "contract_version",
    "correlation-id": "correlation_id",
    "traceparent": "traceparent",
}


def encode_json(value: Mapping[str, object]) -> str:
    """A headers mapping as JSON text (the one encoding of every path; stored as jsonb)."""
    return json.dumps(dict(value))


_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# orjson writes str, int, bool, None, lists and dicts exactly as _compact does (same escapes, UTF-8 kept), several
# times faster; what it would write otherwise, or refuse, goes to the standard library's encoder (see kafka_value).
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def kafka_value(payload: Mapping[str, object]) -> str:
    """The message value exactly as the relay sends it (stored in the row's ``value``, sent as is): compact UTF-8
    JSON with the keys in jsonb's order, byte for byte what the relay sent when it re-encoded the jsonb column."""
    try:
        return orjson.dumps(_jsonb_form(payload, _float_text), option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        # a value orjson does not write like _compact (a str or int subclass, a time, a dataclass: passed through
        # to the missing default), or refuses (an integer beyond 64 bits, a lone surrogate): the standard library
        return _compact(_jsonb_form(payload, float))


def _float_text(value: float) -> orjson.Fragment:
    """A float as the standard library writes it (orjson writes 1e-07 as 1e-7), for orjson to insert as is."""
    return orjson.Fragment(_compact(value))


def _as_is(text: str) -> str:
    """The payload's jsonb parameter is its value's text: the row's JSON is encoded once."""
    return text


# values that come back out of jsonb as they went in (a bool is an int)
_PLAIN = frozenset({str, int, bool, type(None)})


@functools.lru_cache(maxsize=1024)
def _jsonb_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """An object's keys in jsonb's order, shorter first, then bytewise (cached: a contract's payloads share them)."""
    return tuple(sorted(keys, key=lambda key: (len(key.encode("utf-8")), key.encode("utf-8"))))


def _jsonb_form(value: object, float_form: Callable[[float], object]) -> object:
    """``value`` as it comes back out of a jsonb column: keys in jsonb's order, a float with an exponent and no
    fraction (1e+16) printed by PostgreSQL as the integer it is, any other float as ``float_form`` gives it.

    A UUID or an enum that is neither a str nor an int, which orjson would write but the standard library
    refuses, is refused here."""
    if isinstance(value, dict | Mapping):  # a dict first: the usual case without the ABC's slower check
        out = {key: value[key] for key in _jsonb_order(tuple(value))}
        for key, item in out.items():
            if type(item) not in _PLAIN:
                out[key] = _jsonb_form(item, float_form)
        return out
    if isinstance(value, list | tuple):
        return [item if type(item) in _PLAIN else _jsonb_form(item, float_form) for item in value]
    if isinstance(value, float):
        if value.is_integer() and "e" in repr(value):
            return int(value)
        return float_form(value)
    if isinstance(value, uuid.UUID | enum.Enum) and not isinstance(value, str | int):
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return value


def stored_value(payload: str) -> str:
    """The Kafka value of a payload given as its jsonb text (a row or a dead letter written before the ``value``
    column existed): :func:`kafka_value` of the decoded payload, the one encoder of every path."""
    decoded = json.loads(payload)
    if not isinstance(decoded, dict):
        raise TypeError("an outbox payload is a JSON object")
    return kafka_value(decoded)


_QUERIES = load_queries(__package__)


# The two shapes of the one insert (queries.sql), their column lists generated here from _COLUMNS, and nowhere else:
# a few rows as a VALUES list (the unit of work's insert at commit, and the calendar cluster's one-statement write),
# or a batch as one binary array per column, filtered by a condition (the expire-promotions batch: only the rows of
# the purchases its UPDATE changed). For two rows the VALUES list is the cheaper (docs/design/one-statement-writes.md).
_COLUMN_LIST = ", ".join(INSERT_COLUMNS)


@functools.cache
def insert_values_sql(count: int) -> LiteralString:
    """The insert of ``count`` rows (queries.sql: outbox_insert_values), for the unit of work or for a caller's
    statement (a data-modifying CTE); see :func:`insert_values_params`."""
    rows = ",\n       ".join("(" + ", ".join(f"%({name})s" for name in _value_names(k)) + ")" for k in range(count))
    return _QUERIES["outbox_insert_values"].format(columns=_COLUMN_LIST, rows=rows)


def insert_values_params(rows: Sequence[OutboxRow]) -> dict[str, object]:
    """The parameters of :func:`insert_values_sql` for ``rows``."""
    params: dict[str, object] = {}
    for k, row in enumerate(rows):
        value = kafka_value(row.payload)
        row_values = (
            row.message_id, vpart_of(row.key), row.topic, row.key, row.event_type, row.contract_version,
            Jsonb(value, dumps=_as_is), value, Jsonb(dict(row.headers), dumps=encode_json),
            row.headers.get("correlation-id"), row.headers.get("traceparent"), row.occurred_at,
        )  # fmt: skip
        params.update(zip(_value_names(k), row_values, strict=True))
    return params


@functools.cache
def _value_names(k: int) -> tuple[str, ...]:
    return tuple(f"m{k}_{name}" for name in INSERT_COLUMNS)


def insert_unnest_sql(*, where: str) -> LiteralString:
    """The insert of a batch given as arrays (queries.sql: outbox_insert_unnest), keeping the rows for which
    ``where`` (over ``m.message_key`` and the row's other columns) holds, in the order given; for a caller's
    set-based statement, see :func:`insert_unnest_params`."""
    arrays = ", ".join(f"%(outbox_{name})b::{kind}[]" for name, kind in _COLUMNS)
    values = ", ".join(f"m.{name}::jsonb" if name in {"payload", "headers"} else f"m.{name}" for name in INSERT_COLUMNS)
    return _QUERIES["outbox_insert_unnest"].format(columns=_COLUMN_LIST, values=values, arrays=arrays, where=where)


def insert_unnest_params(rows: Sequence[OutboxRow]) -> dict[str, object]:
    """The parameters of :func:`insert_unnest_sql` for ``rows``: one array per column."""
    values = [kafka_value(row.payload) for row in rows]
    return {
        "outbox_message_id": [row.message_id for row in rows],
        "outbox_vpart": [vpart_of(row.key) for row in rows],
        "outbox_topic": [row.topic for row in rows],
        "outbox_message_key": [row.key for row in rows],
        "outbox_event_type": [row.event_type for row in rows],
        "outbox_contract_version": [row.contract_version for row in rows],
        "outbox_payload": values,
        "outbox_value": values,
        "outbox_headers": _encode_all([row.headers for row in rows]),
        "outbox_correlation_id": [row.headers.get("correlation-id") for row in rows],
        "outbox_traceparent": [row.headers.get("traceparent") for row in rows],
        "outbox_occurred_at": [row.occurred_at for row in rows],
    }


def _encode_all(values: Sequence[Mapping[str, str]]) -> list[str]:
    """Each mapping as JSON text; equal ones (a batch's rows share their headers) are encoded once."""
    encoded: dict[tuple[tuple[str, str], ...], str] = {}
    texts = []
    for value in values:
        key = tuple(value.items())
        text = encoded.get(key)
        if text is None:
            text = encoded[key] = encode_json(value)
        texts.append(text)
    return texts


def outbox_insert(conn: psycopg.Connection[dict[str, object]], rows: Sequence[OutboxRow]) -> int:
    """Insert rows in the caller's transaction, in the order given, with one statement; returns how many."""
    if rows:
        conn.execute(insert_values_sql(len(rows)), insert_values_params(rows))
    return len(rows)


_CAPTURE_DELETE = _QUERIES["outbox_delete_captured"]


def outbox_capture(
    conn: psycopg.Connection[dict[str, object]], message_ids: Sequence[uuid.UUID], mode: OutboxMode
) -> int:
    """The end of a transaction that inserted outbox rows: in cdc mode delete them (Debezium reads the inserts from
    the WAL; its publication publishes inserts only), in relay mode nothing (the relay deletes them once
    published). Returns the rows deleted."""
    if mode is not OutboxMode.CDC or not message_ids:
        return 0
    with conn.cursor() as cur:
        cur.execute(_CAPTURE_DELETE, ("{" + ",".join(map(str, set(message_ids))) + "}",))
        return cur.rowcount


_PUT_BACK = _QUERIES["outbox_put_back"].format(
    moved_columns=MOVED_COLUMNS_SQL, placeholders=", ".join(["%s"] * len(MOVED_COLUMNS))
)


def outbox_put_back(
    conn: psycopg.Connection[dict[str, object]], moved: Sequence[Mapping[str, object]], mode: OutboxMode
) -> int:
    """Insert rows taken out of outbox.dead_letter (their MOVED_COLUMNS, ``payload`` as its jsonb text) under their
    own ids, then :func:`outbox_capture` them in ``mode``. A letter written before the value and header columns
    existed gets them here, exactly as the relay would have encoded them, so that every row has its value."""
    params = []
    for letter in moved:
        row = dict(letter)
        headers = row["headers"] if isinstance(row["headers"], Mapping) else json.loads(str(row["headers"]))
        payload = str(row["payload"])
        row["value"] = row["value"] if row["value"] is not None else stored_value(payload)
        row["correlation_id"] = row["correlation_id"] or headers.get("correlation-id")
        row["traceparent"] = row["traceparent"] or headers.get("traceparent")
        row["payload"] = Jsonb(payload, dumps=_as_is)
        row["headers"] = Jsonb(dict(headers), dumps=encode_json)
        params.append(tuple(row[name] for name in MOVED_COLUMNS))
    if params:
        with conn.cursor() as cur:
            cur.executemany(_PUT_BACK, params)
        at = MOVED_COLUMNS.index("message_id")
        outbox_capture(conn, [uuid.UUID(str(row[at])) for row in params], mode)
    return len(params)
