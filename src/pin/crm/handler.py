"""crm's message handlers: the lead feed, a batch at a time, in the consumer runtime's transaction (seed 003)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any, TypeVar, cast

import structlog

from pin.crm.domain import FEED_TEXTS, FeedEntryKind, entry_kind_for
from pin.crm.messages import AppointmentCancelled, AppointmentCreated
from pin.db import Conn, load_queries
from pin.messaging import topics
from pin.messaging.appointment_events import AppointmentCancelledBy, AppointmentCancelReason, EventKind
from pin.messaging.consumer import HandlingContext, Items, Route
from pin.messaging.tolerant import known

log = structlog.get_logger(__name__)

_QUERIES = load_queries(__package__)
_INSERT_TERMINAL = _QUERIES["lead_feed_insert_terminal"]
_UPSERT_RESCHEDULE_FROM_CANCELLED = _QUERIES["lead_feed_upsert_reschedule_from_cancelled"]
_UPSERT_RESCHEDULE_FROM_CREATED = _QUERIES["lead_feed_upsert_reschedule_from_created"]

T = TypeVar("T")


def record_cancellations(conn: Conn, items: Items[AppointmentCancelled]) -> None:
    """One feed entry per terminal appointment, by Reason; a reschedule is linked to the new appointment."""
    _by_appointment(conn, items, lambda event: event.appointment_id, _record_cancellations)


def record_creations(conn: Conn, items: Items[AppointmentCreated]) -> None:
    """The second half of a reschedule links the old appointment's entry to this one; other bookings add nothing."""
    reschedules = [(event, context) for event, context in items if event.rescheduled_from_appointment_id is not None]
    _by_appointment(conn, reschedules, lambda event: event.rescheduled_from_appointment_id, _record_creations)


def _by_appointment(
    conn: Conn,
    items: Items[T],
    appointment: Callable[[T], uuid.UUID | None],
    record: Callable[[Conn, Items[T]], None],
) -> None:
    """``record`` once over the messages whose appointment no other one of the batch names, then per other message.

    Entries of different appointments are independent, so the messages about an appointment no other message of the
    batch names are written together, each row's ON CONFLICT guard deciding as for a lone message. An appointment
    named by several messages (rare: distinct MessageIds about one appointment) takes their statements one message
    at a time, in offset order, as one message per transaction would.
    """
    keys = [appointment(event) for event, _ in items]
    counts = Counter(keys)
    if len(counts) == len(keys):  # every appointment named once (the usual case)
        record(conn, items)
        return
    record(conn, [item for item, key in zip(items, keys, strict=True) if counts[key] == 1])
    for item, key in zip(items, keys, strict=True):
        if counts[key] > 1:
            record(conn, [item])


def _record_cancellations(conn: Conn, items: Items[AppointmentCancelled]) -> None:
    """The cancellations of distinct appointments: one statement for the terminal entries, one for the reschedules."""
    terminal: list[tuple[Any, ...]] = []
    rescheduled: list[tuple[Any, ...]] = []
    checks: list[tuple[AppointmentCancelled, HandlingContext]] = []
    for event, context in items:
        reason = known(AppointmentCancelReason, event.reason)
        if reason is None:
            context.unknown_value("Reason", event.reason)  # seed 003: neutral «запись отменена»
        _report_unknown_kind_and_actor(event, context)
        kind = entry_kind_for(reason, rescheduled=event.rescheduled_to_appointment_id is not None)
        common = (event.tenant_id, event.investor_user_id, event.agent_user_id, event.appointment_id)
        if kind is FeedEntryKind.RESCHEDULED:
            rescheduled.append(
                (*common, event.reason, event.cancelled_by, FEED_TEXTS[kind], event.kind, event.start_at,
                 event.time_zone, event.rescheduled_to_appointment_id, context.message_id, event.occurred_at)
            )  # fmt: skip
            continue
        terminal.append(
            (*common, kind.value, event.reason, event.cancelled_by, FEED_TEXTS[kind], event.kind, event.start_at,
             event.time_zone, context.message_id, event.occurred_at)
        )  # fmt: skip
        checks.append((event, context))
    if rescheduled:
        conn.execute(_UPSERT_RESCHEDULE_FROM_CANCELLED, _columns(rescheduled))
    if terminal:
        cursor = conn.execute(_INSERT_TERMINAL, _columns(terminal))
        inserted = cache(partial(_inserted, cursor, {event.appointment_id for event, _ in checks}))
        for event, context in checks:
            context.after_results(partial(_log_if_not_inserted, event, inserted))


def _inserted(cursor: Any, sent: set[uuid.UUID]) -> set[uuid.UUID]:
    """The appointments whose terminal entry was new (all of them, the usual case, without converting the rows)."""
    if cursor.rowcount == len(sent):
        return sent
    return {cast(uuid.UUID, row["appointment_id"]) for row in cursor.fetchall()}


def _log_if_not_inserted(event: AppointmentCancelled, inserted: Callable[[], set[uuid.UUID]]) -> None:
    if event.appointment_id not in inserted():
        log.info("appointment already has its feed entry", appointment_id=str(event.appointment_id))


def _report_unknown_kind_and_actor(event: AppointmentCancelled, context: HandlingContext) -> None:
    """Seed 003: unknown CancelledBy or Kind values are kept raw («сохранить строку как есть»: the entry stores
    both as received), warned and counted."""
    if event.cancelled_by is not None and known(AppointmentCancelledBy, event.cancelled_by) is None:
        context.unknown_value("CancelledBy", event.cancelled_by)
    if known(EventKind, event.kind) is None:
        context.unknown_value("Kind", event.kind)


def _record_creations(conn: Conn, items: Items[AppointmentCreated]) -> None:
    """The creation halves of reschedules of distinct old appointments, in one statement."""
    if not items:
        return
    text = FEED_TEXTS[FeedEntryKind.RESCHEDULED]
    conn.execute(
        _UPSERT_RESCHEDULE_FROM_CREATED,
        _columns([(event.tenant_id, event.investor_user_id, event.agent_user_id,
                   event.rescheduled_from_appointment_id, text, event.appointment_id, event.start_at,
                   context.message_id, event.occurred_at) for event, context in items]),
    )  # fmt: skip


def _columns(rows: list[tuple[Any, ...]]) -> tuple[list[Any], ...]:
    """Rows as one list per column: the statements' array parameters."""
    return tuple(list(column) for column in zip(*rows, strict=True))


def _parse_cancelled(payload: Mapping[str, Any]) -> AppointmentCancelled:
    return AppointmentCancelled.model_validate(payload)


def _parse_created(payload: Mapping[str, Any]) -> AppointmentCreated:
    return AppointmentCreated.model_validate(payload)


def routes() -> dict[str, Route[Any]]:
    """The topics crm reads and how it handles each."""
    return {
        topics.APPOINTMENT_CANCELLED: Route(_parse_cancelled, record_cancellations),
        topics.APPOINTMENT_CREATED: Route(_parse_created, record_creations),
    }
