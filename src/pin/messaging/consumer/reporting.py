"""One way to trace, log and count a message's handling, whether in a batch or on its own (a batch of one)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from opentelemetry.trace import Span, SpanKind

from pin.faults import Fault
from pin.messaging.consumer.dead_letters.send import error_line
from pin.messaging.consumer.metrics import DUPLICATES, PROCESSED, RETRIES, UNKNOWN_VALUES, observe_event_ages
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.retry import Failure
from pin.messaging.consumer.routes import HandlingContext
from pin.messaging.envelope import Decoded, Envelope
from pin.observability.tracing import context_from_headers, tracer


def message_span(group: str, message: Received, headers: Mapping[str, str]) -> AbstractContextManager[Span]:
    """The span of one message's handling, a child of the producer's trace context."""
    return tracer().start_as_current_span(
        f"{message.topic} process",
        context=context_from_headers(headers),
        kind=SpanKind.CONSUMER,
        attributes={"messaging.consumer.group.name": group, "messaging.kafka.offset": message.offset},
    )


def message_log(log: Any, message: Received, envelope: Envelope | None = None) -> Any:
    """``log`` bound to where the message was read and, once it is decoded, its MessageId and CorrelationId."""
    bound = log.bind(topic=message.topic, partition=message.partition, offset=message.offset)
    return with_envelope(bound, envelope) if envelope is not None else bound


def with_envelope(log: Any, envelope: Envelope) -> Any:
    """A message's log bound to its MessageId and CorrelationId."""
    return log.bind(message_id=str(envelope.message_id), correlation_id=envelope.correlation_id)


def warn_if_unknown_contract(log: Any, item: Decoded) -> None:
    """A ContractVersion other than the route's contract's is a warning; processing continues (tolerant reader).
    ``log`` is bound to the message only for that line (binding costs more than the check)."""
    envelope, expected = item.envelope, item.route.contract_version
    if envelope.contract_version != expected:
        message_log(log, item.message, envelope).warning(
            "unknown contract version", contract_version=envelope.contract_version, expected=expected
        )


def report_unknown_values(group: str, context: HandlingContext, log: Any) -> None:
    """Count and log the enum values the handler did not know (it took the neutral path)."""
    for field_name, raw in context.unknown:
        UNKNOWN_VALUES.labels(group, field_name).inc()
        log.warning("unknown enum value; neutral path taken", field=field_name, value=raw)


def log_duplicate(log: Any, envelope: Envelope) -> None:
    """A message whose MessageId was in the inbox: skipped."""
    log.info("duplicate message skipped", event_type=envelope.event_type)


def report_run(
    group: str,
    log: Any,
    decoded: list[Decoded],
    applied: list[tuple[Decoded, HandlingContext]],
    *,
    at: datetime | None,
    debug: bool,
    attempts: int | None = None,
) -> None:
    """Metrics and logs of a committed run of messages (``at``: its transaction's database time).

    A batch logs per message only what is unusual (or on debug), then one summary. A message handled on its own
    (``attempts``: a retry, or one of a failed batch; a batch of one) gets its own "message handled" line instead.
    """
    first = decoded[0].message
    each = debug or attempts is not None
    for item, context in applied:
        if context.unknown or each:
            item_log = message_log(log, item.message, item.envelope)
            report_unknown_values(group, context, item_log)
            if attempts is not None:
                item_log.info("message handled", event_type=item.envelope.event_type, attempts=attempts)
            elif debug:
                item_log.debug("message handled", event_type=item.envelope.event_type, attempts=1)
    # every one applied (the usual case): none is a duplicate
    applied_ids = {id(item) for item, _ in applied} if len(applied) < len(decoded) else None
    for item in decoded:
        # a message's log is bound only for a line it writes (binding costs more than the rest of this loop)
        warn_if_unknown_contract(log, item)
        if applied_ids is not None and id(item) not in applied_ids:
            log_duplicate(message_log(log, item.message, item.envelope), item.envelope)
    if applied:
        PROCESSED.labels(group, first.topic).inc(len(applied))
        if at is not None:
            observe_event_ages(group, first.topic, at, (item.envelope.occurred_at for item, _ in applied))
    if len(decoded) > len(applied):
        DUPLICATES.labels(group, first.topic).inc(len(decoded) - len(applied))
    if attempts is None:
        log.info(
            "messages handled",
            topic=first.topic,
            partition=first.partition,
            first_offset=first.offset,
            last_offset=decoded[-1].message.offset,
            handled=len(applied),
            duplicates=len(decoded) - len(applied),
        )


def report_failure(group: str, log: Any, message: Received, failure: Failure, *, attempts: int) -> None:
    """A failed attempt logged, and counted as a retry unless it is dead-lettered now."""
    log.warning(
        "unreadable message" if failure.fault.dead_letters else "message failed",
        error_type=type(failure.exc).__name__,
        error=error_line(failure.exc),
        attempts=attempts,
        fault=failure.fault.value,
        database_unavailable=failure.fault is Fault.INFRASTRUCTURE,
        dead_letter=failure.dead_letter,
    )
    if not failure.dead_letter:
        RETRIES.labels(group, message.topic).inc()
