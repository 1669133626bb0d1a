"""notifications' message handlers: decide with the domain, deliver through the port, in the runtime's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import structlog
from prometheus_client import Counter

from pin.db import Conn
from pin.messaging import topics
from pin.messaging.appointment_events import AppointmentCancelledBy, AppointmentCancelReason, EventKind
from pin.messaging.consumer import HandlingContext, Route
from pin.messaging.tolerant import known
from pin.notifications.delivery import DatabaseDelivery, Delivered, Notification, NotificationDelivery
from pin.notifications.domain import (
    Meeting,
    Notice,
    PurchaseStatus,
    cancellation_notices,
    confirmation_notice,
    creation_notice,
    purchase_notices,
)
from pin.notifications.messages import (
    AppointmentCancelled,
    AppointmentConfirmed,
    AppointmentCreated,
    CalendarEventStatusChanged,
    PurchaseChanged,
)

log = structlog.get_logger(__name__)

EXPIRED_WITHOUT_BUYER = Counter(
    "pin_notifications_expired_purchase_without_buyer",
    "Expired purchases whose message has no BuyerUserId: nobody was told «срок истёк».",
)

# The terminal outcome wins: once Terminal, an appointment never goes back to Confirmed here.
_MARK_TERMINAL = """
INSERT INTO notifications.appointment_state (appointment_id, tenant_id, status) VALUES (%s, %s, 'Terminal')
ON CONFLICT (appointment_id) DO UPDATE SET status = 'Terminal', updated_at = now()
"""
_MARK_CONFIRMED = """
INSERT INTO notifications.appointment_state AS s (appointment_id, tenant_id, status) VALUES (%s, %s, 'Confirmed')
ON CONFLICT (appointment_id) DO UPDATE SET updated_at = now()
RETURNING s.status
"""


class NotificationHandlers:
    """The handlers of the notifications group over one delivery channel."""

    def __init__(self, delivery: NotificationDelivery) -> None:
        self._delivery = delivery

    def on_cancelled(self, conn: Conn, event: AppointmentCancelled, context: HandlingContext) -> None:
        """AppointmentCancelled to the recipients of seed 003's table; remembers the appointment is terminal."""
        reason = known(AppointmentCancelReason, event.reason)
        if reason is None:
            context.unknown_value("Reason", event.reason)  # seed 003: both sides, neutral text
        if event.cancelled_by is not None and known(AppointmentCancelledBy, event.cancelled_by) is None:
            context.unknown_value("CancelledBy", event.cancelled_by)
        conn.execute(_MARK_TERMINAL, (event.appointment_id, event.tenant_id))
        notices = cancellation_notices(
            reason,
            rescheduled=event.rescheduled_to_appointment_id is not None,
            agent=event.agent_user_id,
            investor=event.investor_user_id,
            meeting=self._meeting(event.kind, event, context),
        )
        self._deliver(conn, notices, event.tenant_id, event.appointment_id, context)

    def on_confirmed(self, conn: Conn, event: AppointmentConfirmed, context: HandlingContext) -> None:
        """The investor hears of the confirmation, unless the appointment already ended (stale: no-op)."""
        row = conn.execute(_MARK_CONFIRMED, (event.appointment_id, event.tenant_id)).fetchone()
        if row is not None and row["status"] == "Terminal":
            log.warning("stale appointment-confirmed after the terminal event ignored",
                        appointment_id=str(event.appointment_id), message_id=str(context.message_id))  # fmt: skip
            return
        notice = confirmation_notice(investor=event.investor_user_id, meeting=self._meeting(event.kind, event, context))
        self._deliver(conn, [notice], event.tenant_id, event.appointment_id, context)

    def on_created(self, conn: Conn, event: AppointmentCreated, context: HandlingContext) -> None:
        """The agent hears of a new booking or of the new appointment of a reschedule."""
        notice = creation_notice(
            agent=event.agent_user_id,
            meeting=self._meeting(event.kind, event, context),
            pending=event.status == "Pending",
            rescheduled=event.rescheduled_from_appointment_id is not None,
        )
        self._deliver(conn, [notice], event.tenant_id, event.appointment_id, context)

    def on_event_status_changed(self, conn: Conn, event: CalendarEventStatusChanged, context: HandlingContext) -> None:
        """Nobody is told: the appointment events already tell both sides of an appointment's event."""
        del conn, event, context

    def on_purchase_changed(self, conn: Conn, event: PurchaseChanged, context: HandlingContext) -> None:
        """Seed 002: the buyer hears «срок истёк» when the purchase expires."""
        status = known(PurchaseStatus, event.status)
        if status is None:
            context.unknown_value("Status", event.status)
        if status is PurchaseStatus.EXPIRED and event.buyer_user_id is None:
            # BuyerUserId is this project's additive field: a producer of the contract without it leaves nobody
            # to tell; that must show, not pass silently.
            EXPIRED_WITHOUT_BUYER.inc()
            log.warning("expired purchase without BuyerUserId; nobody notified",
                        purchase_id=str(event.purchase_id), message_id=str(context.message_id))  # fmt: skip
        notices = purchase_notices(status, buyer=event.buyer_user_id, package_code=event.package_code)
        self._deliver(conn, notices, event.tenant_id, event.purchase_id, context)

    def _meeting(self, raw_kind: str, event: AppointmentConfirmed | AppointmentCancelled | AppointmentCreated,
                 context: HandlingContext) -> Meeting:  # fmt: skip
        kind = known(EventKind, raw_kind)
        if kind is None:
            context.unknown_value("Kind", raw_kind)
        return Meeting(kind, event.start_at, event.time_zone)

    def _deliver(
        self, conn: Conn, notices: Iterable[Notice], tenant: uuid.UUID, subject: uuid.UUID, context: HandlingContext
    ) -> None:
        for notice in notices:
            delivered = self._delivery.deliver(conn, Notification(tenant, subject, context.message_id, notice))
            context.after_results(partial(_log_if_not_new, delivered, notice, subject))


def _log_if_not_new(delivered: Delivered, notice: Notice, subject: uuid.UUID) -> None:
    if not delivered():
        log.info("already notified", template_key=notice.template_key, subject_id=str(subject))


def _parser(model: Any) -> Any:
    def parse(payload: Mapping[str, Any]) -> Any:
        return model.model_validate(payload)

    return parse


def routes(delivery: NotificationDelivery | None = None) -> dict[str, Route[Any]]:
    """The topics notifications reads and how it handles each (database delivery unless another is given)."""
    handlers = NotificationHandlers(delivery or DatabaseDelivery())
    return {
        topics.APPOINTMENT_CANCELLED: Route(_parser(AppointmentCancelled), handlers.on_cancelled),
        topics.APPOINTMENT_CONFIRMED: Route(_parser(AppointmentConfirmed), handlers.on_confirmed),
        topics.APPOINTMENT_CREATED: Route(_parser(AppointmentCreated), handlers.on_created),
        topics.EVENT_STATUS_CHANGED: Route(_parser(CalendarEventStatusChanged), handlers.on_event_status_changed),
        topics.PURCHASE_CHANGED: Route(_parser(PurchaseChanged), handlers.on_purchase_changed),
    }
