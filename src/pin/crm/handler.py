"""crm's message handlers: the lead feed, written in the consumer runtime's transaction (seed 003)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from pin.crm.domain import FEED_TEXTS, FeedEntryKind, entry_kind_for
from pin.crm.messages import AppointmentCancelled, AppointmentCreated
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.appointment_events import AppointmentCancelledBy, AppointmentCancelReason, EventKind
from pin.messaging.consumer import HandlingContext, Route, each
from pin.messaging.tolerant import known

log = structlog.get_logger(__name__)

# A terminal appointment has one entry: a second, different message about it adds nothing.
_INSERT_TERMINAL = """
INSERT INTO crm.lead_feed_entry
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,
     appointment_kind, start_at, time_zone, message_id, occurred_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, COALESCE(%s::timestamptz, now()))
ON CONFLICT (appointment_id) DO NOTHING
"""

# The cancellation half of a reschedule: creates the entry, or completes the one its appointment-created made.
_UPSERT_RESCHEDULE_FROM_CANCELLED = """
INSERT INTO crm.lead_feed_entry AS e
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason, cancelled_by, text,
     appointment_kind, start_at, time_zone, rescheduled_to_appointment_id, message_id, occurred_at)
VALUES (%s, %s, %s, %s, 'Rescheduled', %s, %s, %s, %s, %s, %s, %s, %s, COALESCE(%s::timestamptz, now()))
ON CONFLICT (appointment_id) DO UPDATE
SET reason = EXCLUDED.reason,
    cancelled_by = EXCLUDED.cancelled_by,
    agent_user_id = EXCLUDED.agent_user_id,
    appointment_kind = EXCLUDED.appointment_kind,
    start_at = EXCLUDED.start_at,
    time_zone = EXCLUDED.time_zone,
    occurred_at = LEAST(e.occurred_at, EXCLUDED.occurred_at)
WHERE e.entry_kind = 'Rescheduled' AND e.reason IS NULL
"""

# The creation half of a reschedule (RescheduledFromAppointmentId): the entry lives under the old appointment.
_UPSERT_RESCHEDULE_FROM_CREATED = """
INSERT INTO crm.lead_feed_entry AS e
    (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, text,
     rescheduled_to_appointment_id, rescheduled_start_at, message_id, occurred_at)
VALUES (%s, %s, %s, %s, 'Rescheduled', %s, %s, %s, %s, COALESCE(%s::timestamptz, now()))
ON CONFLICT (appointment_id) DO UPDATE
SET rescheduled_start_at = EXCLUDED.rescheduled_start_at
WHERE e.entry_kind = 'Rescheduled' AND e.rescheduled_start_at IS NULL
"""


def record_cancellation(conn: Conn, event: AppointmentCancelled, context: HandlingContext) -> None:
    """One feed entry per terminal appointment, by Reason; a reschedule is linked to the new appointment."""
    reason = known(AppointmentCancelReason, event.reason)
    if reason is None:
        context.unknown_value("Reason", event.reason)  # seed 003: neutral «запись отменена»
    _report_unknown_kind_and_actor(event, context)
    kind = entry_kind_for(reason, rescheduled=event.rescheduled_to_appointment_id is not None)
    common = (event.tenant_id, event.investor_user_id, event.agent_user_id, event.appointment_id)
    if kind is FeedEntryKind.RESCHEDULED:
        conn.execute(
            _UPSERT_RESCHEDULE_FROM_CANCELLED,
            (*common, event.reason, event.cancelled_by, FEED_TEXTS[kind], event.kind, event.start_at,
             event.time_zone, event.rescheduled_to_appointment_id, context.message_id, event.occurred_at),
        )  # fmt: skip
        return
    cursor = conn.execute(
        _INSERT_TERMINAL,
        (*common, kind.value, event.reason, event.cancelled_by, FEED_TEXTS[kind], event.kind, event.start_at,
         event.time_zone, context.message_id, event.occurred_at),
    )  # fmt: skip

    def check() -> None:
        if not cursor.rowcount:
            log.info("appointment already has its feed entry", appointment_id=str(event.appointment_id))

    context.after_results(check)


def _report_unknown_kind_and_actor(event: AppointmentCancelled, context: HandlingContext) -> None:
    """Seed 003: unknown CancelledBy or Kind values are kept raw («сохранить строку как есть»: the entry stores
    both as received), warned and counted."""
    if event.cancelled_by is not None and known(AppointmentCancelledBy, event.cancelled_by) is None:
        context.unknown_value("CancelledBy", event.cancelled_by)
    if known(EventKind, event.kind) is None:
        context.unknown_value("Kind", event.kind)


def record_creation(conn: Conn, event: AppointmentCreated, context: HandlingContext) -> None:
    """The second half of a reschedule links the old appointment's entry to this one; other bookings add nothing."""
    if event.rescheduled_from_appointment_id is None:
        return
    conn.execute(
        _UPSERT_RESCHEDULE_FROM_CREATED,
        (event.tenant_id, event.investor_user_id, event.agent_user_id, event.rescheduled_from_appointment_id,
         FEED_TEXTS[FeedEntryKind.RESCHEDULED], event.appointment_id, event.start_at, context.message_id,
         event.occurred_at),
    )  # fmt: skip


def _parse_cancelled(payload: Mapping[str, Any]) -> AppointmentCancelled:
    return AppointmentCancelled.model_validate(payload)


def _parse_created(payload: Mapping[str, Any]) -> AppointmentCreated:
    return AppointmentCreated.model_validate(payload)


def routes() -> dict[str, Route[Any]]:
    """The topics crm reads and how it handles each."""
    return {
        topics.APPOINTMENT_CANCELLED: Route(_parse_cancelled, each(record_cancellation)),
        topics.APPOINTMENT_CREATED: Route(_parse_created, each(record_creation)),
    }
