"""A row's Kafka headers: the row's headers plus the envelope. Its value is the one the writer stored, or, for a row
written before the value column existed, the writer's encoding of its payload (``pin.outbox.writer.stored_value``)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pin.outbox.relay.batch import PendingRow

# json.loads without its per-call set-up (the encoding detection of bytes): the same C scanner.
_scan_json: Any = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009 - not in the type stubs

_ENVELOPE_HEADERS = frozenset({"message-id", "contract-version", "event-type"})


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
