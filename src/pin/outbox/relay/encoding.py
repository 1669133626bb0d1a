"""A row's Kafka headers: the row's headers plus the envelope. Its value is the one the writer stored, or, for a row
written before the value column existed, the writer's encoding of its payload (``pin.outbox.writer.stored_value``)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pin.outbox.relay.batch import PendingRow

# json.loads without its per-call set-up (the encoding detection of bytes): the same C scanner.
_scan_json: Any = getattr(json.JSONDecoder(), "scan_once")  # noqa: B009 - not in the type stubs

Pair = tuple[str, str | bytes | None]


@lru_cache(maxsize=1024)
def _around_message_id(text: str, contract_version: int, event_type: str) -> tuple[tuple[Pair, ...], tuple[Pair, ...]]:
    """A row's headers but its MessageId: those before it and those after it. Cached: the rows of one unit of work
    (one correlation id, one trace, one contract) carry the same headers column, and only the MessageId differs."""
    headers: dict[str, str | bytes | None] = {str(k): str(v) for k, v in _scan_json(text, 0)[0].items()}
    # the envelope headers of SPEC section 6 win over a row header of the same name, at its place; else appended
    headers.update({"message-id": None, "contract-version": str(contract_version), "event-type": event_type})
    pairs = list(headers.items())
    at = list(headers).index("message-id")
    return tuple(pairs[:at]), tuple(pairs[at + 1 :])


def kafka_headers(row: PendingRow) -> list[Pair]:
    """The row's headers (correlation-id, traceparent, ...) plus the envelope headers of SPEC section 6, which
    win over a row header of the same name; the producer sends the values as UTF-8."""
    before, after = _around_message_id(row.headers, row.contract_version, row.event_type)
    return [*before, ("message-id", row.message_id), *after]
