"""A row's Kafka value and headers: the payload as compact UTF-8 JSON, the row's headers plus the envelope."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pin.outbox.relay.batch import PendingRow

# json.loads / json.dumps(..., separators=(",", ":"), ensure_ascii=False) without their per-call set-up (the
# encoding detection of bytes, a new C encoder per call): the same C scanner and encoder, so the same bytes.
_scan_json: Any = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009 - not in the type stubs
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_compact_json: Any = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, True)
)

_ENVELOPE_HEADERS = frozenset({"message-id", "contract-version", "event-type"})


def encode_value(payload: str) -> bytes:
    """The message value: the payload (the jsonb column's text) as compact UTF-8 JSON, exactly the bytes of
    ``json.dumps(payload, separators=(",", ":"), ensure_ascii=False)`` on the decoded payload."""
    value = _scan_json(payload, 0)[0]
    if _compact_json is None:  # no C accelerator (not CPython): the same output, slower
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "".join(_compact_json(value, 0)).encode("utf-8")


@lru_cache(maxsize=1024)
def _row_headers(text: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    """The headers column's pairs, and whether it names an envelope header. Cached: the rows of one unit of work
    (one correlation id, one trace) carry the same headers."""
    pairs = tuple((str(k), str(v)) for k, v in _scan_json(text, 0)[0].items())
    return pairs, any(name in _ENVELOPE_HEADERS for name, _value in pairs)


def kafka_headers(row: PendingRow) -> list[tuple[str, str | bytes | None]]:
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
