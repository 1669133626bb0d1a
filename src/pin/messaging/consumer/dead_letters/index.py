"""The index of the consumer groups' dead letters (``messaging.dead_letter_index``): a row per letter, written by the
runtime before it publishes the letter, so that operators (the console, `pin dlq`) list, filter and replay them from
the database and never read a dead-letter topic to do so.

A row holds the letter's origin, key, MessageId, headers, error and attempts, and its value (null when
``messaging.dead_letter`` keeps the full bytes: a truncated or parked letter). An operator's replay or discard marks
it resolved (kept, hidden by default); a letter dead-lettered again opens it again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pin.db import Conn, load_queries
from pin.messaging.consumer.dead_letters.store import Headers, Origin
from pin.messaging.envelope import UnreadableMessageError, decode_envelope

_QUERIES = load_queries(__package__)

WHOLE = "whole"
REPLAYED = "replayed"
DISCARDED = "discarded"
# The characters of a key kept as text (filters, links): keys are identifiers, a longer one is hostile.
KEY_TEXT_CHARS = 200


def message_id_of(headers: Headers, value: bytes | None) -> str | None:
    """A message's MessageId: its ``message-id`` header, else its envelope's; None when it has neither."""
    for name, header in headers:
        if name == "message-id" and header:
            return header.decode("utf-8", "replace")
    try:  # the consumers' bounded decoder: a hostile value (too deep, not JSON) has no MessageId, no crash
        return str(decode_envelope(value, {}, max_bytes=None).message_id)
    except UnreadableMessageError:
        return None


def key_text(key: bytes | None) -> str | None:
    """The key as bounded UTF-8 text (undecodable bytes replaced, NUL dropped): what filters and links use."""
    if key is None:
        return None
    return key.decode("utf-8", "replace").replace("\x00", "")[:KEY_TEXT_CHARS]


def _uuid_or_none(text: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if text else None
    except ValueError:
        return None


def write(
    conn: Conn,
    origin: Origin,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    *,
    disposition: str = WHOLE,
    stored_id: uuid.UUID | None = None,
) -> int:
    """Index one dead letter (or update its row); its id. ``value`` is dropped when ``stored_id`` keeps it."""
    params = {
        "group": origin.group, "topic": origin.topic, "partition": origin.partition, "offset": origin.offset,
        "key": key, "key_text": key_text(key), "message_id": _uuid_or_none(message_id_of(headers, value)),
        "value": value if stored_id is None else None,
        "header_names": [name.encode("utf-8", "surrogatepass") for name, _ in headers],
        "header_values": [header for _, header in headers], "value_size": len(value or b""),
        "error_type": origin.error_type, "error": origin.error, "attempts": origin.attempts,
        "disposition": disposition, "stored_id": stored_id,
    }  # fmt: skip
    row = conn.execute(_QUERIES["dead_letter_index_write"], params).fetchone()
    assert row is not None, "an upsert with RETURNING returns its row"
    return int(str(row["id"]))


@dataclass(frozen=True)
class LetterFilter:
    """Which of the groups' dead letters an operator means: every field optional, all of them must hold."""

    group: str | None = None
    topic: str | None = None
    key: str | None = None
    error: str | None = None  # a piece of the error type or text, any case
    since: datetime | None = None
    until: datetime | None = None
    resolved: bool = False  # resolved letters (replayed, discarded) too
    ids: tuple[int, ...] | None = None
    message_id: uuid.UUID | None = None

    def params(self) -> dict[str, Any]:
        """The filter's bound parameters."""
        return {
            "group": self.group, "topic": self.topic, "key": self.key, "error": self.error, "since": self.since,
            "until": self.until, "resolved": self.resolved, "ids": list(self.ids) if self.ids is not None else None,
            "message_id": self.message_id,
        }  # fmt: skip

    def described(self) -> dict[str, Any]:
        """The filter as the audit trail records it (identifiers and times only)."""
        shown = {name: value for name, value in self.params().items() if value not in (None, False)}
        return {
            name: value.isoformat()
            if isinstance(value, datetime)
            else str(value)
            if isinstance(value, uuid.UUID)
            else value
            for name, value in shown.items()
        }


def page(conn: Conn, where: LetterFilter, *, before: int | None, limit: int) -> list[dict[str, Any]]:
    """One page of the letters ``where`` selects, newest first, after the keyset cursor ``before`` (an id)."""
    return list(
        conn.execute(
            _QUERIES["dead_letter_index_page"], {**where.params(), "before": before, "limit": limit}
        ).fetchall()
    )


def one(conn: Conn, letter_id: int) -> dict[str, Any] | None:
    """One letter with its bytes (the full ones where ``messaging.dead_letter`` keeps them), or None."""
    row = conn.execute(_QUERIES["dead_letter_index_one"], {"id": letter_id}).fetchone()
    if row is None:
        return None
    names, values = row.pop("header_names"), row.pop("header_values")
    assert isinstance(names, list)
    assert isinstance(values, list)
    row["headers"] = [(bytes(n).decode("utf-8", "replace"), bytes(v)) for n, v in zip(names, values, strict=True)]
    for column in ("message_key", "message_value"):
        row[column] = _bytes(row[column])
    return dict(row)


def _bytes(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, bytes | memoryview) else None


def resolve(conn: Conn, ids: Sequence[int], *, resolution: str, audit_id: int) -> list[int]:
    """Mark the open letters ``ids`` resolved by the action ``audit_id``; the ids marked."""
    rows = conn.execute(
        _QUERIES["dead_letter_index_resolve"], {"ids": list(ids), "resolution": resolution, "audit_id": audit_id}
    )
    return [int(str(row["id"])) for row in rows.fetchall()]
