"""Dead letters the dead-letter topic cannot carry whole (*truncated* or *parked*), kept with their original bytes in
``messaging.dead_letter``, one row per origin (group, topic, partition, offset); see docs/design/consumers.md,
"Dead letters". The statements are named in this package's ``queries.sql``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pin.db import Conn, load_queries

DLT_ORIGINAL_SIZE = "dlt-original-size"
DLT_ORIGINAL_SHA256 = "dlt-original-sha256"
DLT_STORED_ID = "dlt-stored-id"
STORED_TABLE = "messaging.dead_letter"
TRUNCATED = "truncated"
PARKED = "parked"

# What a record adds beyond its key, value and header bytes (record and batch framing, varints), rounded up.
RECORD_OVERHEAD = 1024
# The most of a cut value a truncated letter carries: enough to recognize the message, the rest is in the row.
PREVIEW_BYTES = 64 * 1024

Headers = Sequence[tuple[str, bytes]]

_QUERIES = load_queries(__package__)
_STORE = _QUERIES["dead_letter_store"]
_READ = _QUERIES["dead_letters_read"]


@dataclass(frozen=True)
class Origin:
    """Where a dead letter came from and why it failed."""

    group: str
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    error_type: str
    error: str
    attempts: int


@dataclass(frozen=True)
class StoredLetter:
    """One row of ``messaging.dead_letter``: a message's original bytes and where it came from."""

    id: uuid.UUID
    origin: Origin
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    value_size: int
    value_sha256: str
    disposition: str
    failed_at: datetime


def sha256_hex(value: bytes | None) -> str:
    """The hex sha256 digest of a value (of no bytes for a message without one)."""
    return hashlib.sha256(value or b"").hexdigest()


def headers_size(headers: Iterable[tuple[str, bytes | None]]) -> int:
    """The bytes the headers add to a record (names and values)."""
    return sum(len(name.encode("utf-8", "surrogatepass")) + len(value or b"") for name, value in headers)


def record_size(key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> int:
    """What a record of this key, value and headers weighs against a producer's ``message.max.bytes``."""
    return len(key or b"") + len(value or b"") + headers_size(headers) + RECORD_OVERHEAD


def cut_letter(
    key: bytes | None, value: bytes | None, original: Headers, provenance: Headers, bound: int
) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """The key, value and headers of a truncated letter that fits in ``bound`` bytes.

    The provenance headers always go; the original headers only if they take at most a quarter of the room left
    (else they are only in the row), the key at most a quarter of what is then left, the value what remains,
    at most :data:`PREVIEW_BYTES`.
    """
    room = bound - record_size(None, None, provenance)
    kept = list(original) if headers_size(original) <= room // 4 else []
    room -= headers_size(kept)
    cut_key = key[: max(0, room // 4)] if key is not None else None
    room -= len(cut_key or b"")
    cut_value = (value or b"")[: max(0, min(PREVIEW_BYTES, room))]
    return cut_key, cut_value, [*kept, *provenance]


def store(
    conn: Conn, origin: Origin, key: bytes | None, value: bytes | None, headers: Headers, *, disposition: str
) -> uuid.UUID:
    """Keep a message's original bytes (or update the row of an earlier try); returns the row's id."""
    row = conn.execute(
        _STORE,
        (origin.group, origin.topic, origin.partition, origin.offset, origin.timestamp_ms, key, value,
         [name.encode("utf-8", "surrogatepass") for name, _ in headers], [v for _, v in headers],
         len(value or b""), sha256_hex(value), disposition, origin.error_type, origin.error, origin.attempts),
    ).fetchone()  # fmt: skip
    assert row is not None, "an upsert with RETURNING returns its row"
    stored_id = row["id"]
    assert isinstance(stored_id, uuid.UUID)
    return stored_id


def load(conn: Conn, stored_id: uuid.UUID) -> StoredLetter | None:
    """The stored letter with this id, or None."""
    row = conn.execute(_READ, {"ids": [stored_id], "groups": []}).fetchone()
    return _letter(row) if row is not None else None


def parked(conn: Conn, groups: Sequence[str]) -> list[StoredLetter]:
    """The parked letters of ``groups`` (those the dead-letter topic never took), oldest first."""
    return [_letter(row) for row in conn.execute(_READ, {"ids": [], "groups": list(groups)}).fetchall()]


def _letter(row: dict[str, object]) -> StoredLetter:
    names = row["header_names"] or []
    values = row["header_values"] or []
    assert isinstance(names, list)
    assert isinstance(values, list)
    origin = Origin(
        group=str(row["consumer_group"]), topic=str(row["topic"]), partition=_int(row["partition"]),
        offset=_int(row["offset"]), timestamp_ms=_int(row["original_timestamp_ms"]),
        error_type=str(row["error_type"]), error=str(row["error"]), attempts=_int(row["attempts"]),
    )  # fmt: skip
    key, value, failed_at, stored_id = row["message_key"], row["message_value"], row["failed_at"], row["id"]
    assert isinstance(failed_at, datetime)
    assert isinstance(stored_id, uuid.UUID)
    return StoredLetter(
        id=stored_id,
        origin=origin,
        key=bytes(key) if isinstance(key, bytes | memoryview) else None,
        value=bytes(value) if isinstance(value, bytes | memoryview) else None,
        headers=[(bytes(n).decode("utf-8", "surrogatepass"), bytes(v)) for n, v in zip(names, values, strict=True)],
        value_size=_int(row["value_size"]),
        value_sha256=str(row["value_sha256"]),
        disposition=str(row["disposition"]),
        failed_at=failed_at,
    )


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value
