"""Reading a consumed message's value: the one envelope and payload validation every consumer group shares.

Whatever the bytes, :func:`decode_envelope` returns an :class:`Envelope` or raises :class:`UnreadableMessageError`,
nothing else; the bounds that make this hold are in docs/design/consumers.md, "Dead letters".
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import orjson
from pydantic import BeforeValidator

from pin.faults import Unreadable
from pin.rfc3339 import RFC3339

if TYPE_CHECKING:  # the consumer package's modules raise this module's UnreadableMessageError
    from pin.messaging.consumer.received import Received
    from pin.messaging.consumer.routes import Route

NUL = "\x00"
# A time this close to the ends of Python's range cannot be moved to another zone (OverflowError in a handler).
_MARGIN = timedelta(days=2)
# The range a time must lie in, computed once (two datetime.replace calls per time were a third of reading one).
_EARLIEST = datetime.min.replace(tzinfo=UTC) + _MARGIN
_LATEST = datetime.max.replace(tzinfo=UTC) - _MARGIN
_is_rfc3339 = RFC3339.fullmatch  # pin.rfc3339's rule, looked up once (this runs for every time of every message)
_MAX_HEADER_TEXT = 200


class UnreadableMessageError(Unreadable):
    """The message can never be read (too large, not JSON, too deep, not an object, no MessageId, a bad field)."""


# Envelope and Decoded are named tuples: immutable, and built for every message at a third of a frozen dataclass's
# cost (a frozen dataclass sets each field through object.__setattr__).
class Envelope(NamedTuple):
    """The envelope of SPEC section 6 around a contract's payload."""

    message_id: uuid.UUID
    contract_version: int | None
    event_type: str | None
    correlation_id: str | None
    occurred_at: datetime | None
    payload: Mapping[str, Any]


class Decoded(NamedTuple):
    """A readable consumed message: its headers as text, its envelope, the route and the route's model of its
    payload."""

    message: Received
    headers: dict[str, str]
    envelope: Envelope
    route: Route[Any]
    event: Any


def decode_message(message: Received, route: Route[Any], max_bytes: int) -> Decoded:
    """A consumed message decoded within the bounds and parsed by its route (else :class:`UnreadableMessageError`):
    a consumer's one way to read a message, in a batch or on its own."""
    headers = header_map(message.headers)
    envelope = decode_envelope(message.value, headers, max_bytes=max_bytes)
    return Decoded(message, headers, envelope, route, route.parse_or_unreadable(envelope.payload))


def header_map(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """Kafka headers as text (the last value of a repeated header wins)."""
    return {name: value.decode("utf-8", errors="replace") for name, value in headers}


def decode_envelope(value: bytes | None, headers: Mapping[str, str], *, max_bytes: int | None) -> Envelope:
    """Parse a message value within the bounds; raises :class:`UnreadableMessageError` and nothing else.

    ``max_bytes`` None: no size bound (for bytes bounded elsewhere already, such as a dead letter's).
    """
    payload = _json_object(value, max_bytes)
    # JSON text cannot hold a raw NUL byte (orjson refuses it), so a NUL in a string is always escaped: without
    # the escape in the bytes there is nothing to look for.
    where = _first_nul(payload) if value is not None and b"\\u0000" in value else None
    if where is not None:
        raise UnreadableMessageError(f"{where}: a string holds NUL (U+0000), which PostgreSQL text cannot hold")
    occurred = payload.get("OccurredAt")
    try:
        occurred_at = parse_rfc3339(occurred) if occurred is not None else None
    except ValueError as exc:
        raise UnreadableMessageError(f"OccurredAt: {exc}") from None
    # positional: this runs for every message
    return Envelope(
        _message_id(payload, headers),
        _contract_version(payload, headers),
        _bounded(headers.get("event-type")),
        _bounded(headers.get("correlation-id")),
        occurred_at,
        payload,
    )


def _bounded(header: str | None) -> str | None:
    """A header as logged with every line about the message: a hostile one must not make each line megabytes."""
    return header[:_MAX_HEADER_TEXT] if header is not None else None


def _json_object(value: bytes | None, max_bytes: int | None) -> dict[str, Any]:
    if value is None:
        raise UnreadableMessageError("the message has no value")
    if max_bytes is not None and len(value) > max_bytes:
        raise UnreadableMessageError(f"the value is {len(value)} bytes, more than the {max_bytes} a consumer reads")
    try:
        payload = orjson.loads(value)
    except orjson.JSONDecodeError as exc:  # invalid UTF-8, bad syntax, nesting deeper than 1024
        raise UnreadableMessageError(f"the value is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise UnreadableMessageError("the value is not a JSON object")
    return payload


def _first_nul(payload: dict[str, Any]) -> str | None:
    """The path of the first key or string holding NUL, or None; iterative (the depth is bounded, the stack is not)."""
    stack: list[tuple[str, Any]] = [("$", payload)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if NUL in node:
                return path
        elif isinstance(node, dict):
            for key, item in node.items():
                if NUL in key:
                    return f"{path} (a key)"
                stack.append((f"{path}.{key[:40]}" if len(path) < 200 else path, item))
        elif isinstance(node, list):
            stack.extend((f"{path}[{index}]" if len(path) < 200 else path, item) for index, item in enumerate(node))
    return None


def _message_id(payload: Mapping[str, Any], headers: Mapping[str, str]) -> uuid.UUID:
    raw = payload.get("MessageId", headers.get("message-id"))
    if isinstance(raw, str):
        try:
            return uuid.UUID(raw)
        except ValueError:
            pass
    raise UnreadableMessageError("MessageId is missing or not a UUID")


def _contract_version(payload: Mapping[str, Any], headers: Mapping[str, str]) -> int | None:
    """The ContractVersion, or None when it is not an integer (an unknown version: a warning, not unreadable)."""
    raw = payload.get("ContractVersion", headers.get("contract-version"))
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and len(raw) < 20:
        try:
            return int(raw)
        except ValueError:
            return None
    return None


def parse_rfc3339(raw: object) -> datetime:
    """An RFC 3339 time with an offset, as an aware datetime in UTC; ValueError for anything else."""
    if not isinstance(raw, str) or len(raw) > 64:
        raise ValueError("not an RFC 3339 time with an offset (e.g. 2026-12-01T07:00:00Z)")
    return _parse_text(raw)


# A message's OccurredAt is read twice, by the envelope and by its group's model, from the same string: the second
# reading is a look-up. Bounded (at most 64 characters a key); a failure is not kept (lru_cache keeps no exception).
@lru_cache(maxsize=256)
def _parse_text(raw: str) -> datetime:
    if _is_rfc3339(raw) is None:
        raise ValueError("not an RFC 3339 time with an offset (e.g. 2026-12-01T07:00:00Z)")
    try:
        value = datetime.fromisoformat(raw.upper()).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError("not a valid RFC 3339 time") from None
    if not _EARLIEST <= value <= _LATEST:
        raise ValueError("a time outside the range this system can hold")
    return value


# A time field of a consumer's tolerant model: RFC 3339 text only (no Unix numbers, no naive times).
Rfc3339Time = Annotated[datetime, BeforeValidator(parse_rfc3339)]
