"""notifications' message handlers: decide with the domain, deliver through the port, in the runtime's transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import structlog
from prometheus_client import Counter

from pin.db import Conn, load_queries
from pin.messaging import topics
from pin.messaging.appointment_events import AppointmentCancelledBy, AppointmentCancelReason, EventKind
from pin.messaging.consumer import HandlingContext, Items, Route
from pin.messaging.tolerant import known
from pin.notifications.delivery import DatabaseDelivery, Delivered, Notification, NotificationDelivery
from pin.notifications.domain import (
    Meeting,
    Notice,
    PurchaseStatus,
    cancellation_notices,
    confirmation_notice,
    creation_notices,
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

_QUERIES = load_queries(__package__)
_MARK_TERMINAL = _QUERIES["appointment_state_mark_terminal"]
_MARK_CONFIRMED = _QUERIES["appointment_state_mark_confirmed"]

# A batch's notifications to deliver, each with the context of the message it comes from.
_Pending = list[tuple[Notification, HandlingContext]]


class NotificationHandlers:
    """The handlers of the notifications group over one delivery channel, each taking a batch of one topic."""

    def __init__(self, delivery: NotificationDelivery) -> None:
        self._delivery = delivery

    def on_cancelled(self, conn: Conn, items: Items[AppointmentCancelled]) -> None:
        """AppointmentCancelled to the recipients of seed 003's table; remembers the appointments are terminal."""
        pending: _Pending = []
        for event, context in items:
            reason = known(AppointmentCancelReason, event.reason)
            if reason is None:
                context.unknown_value("Reason", event.reason)  # seed 003: both sides, neutral text
            if event.cancelled_by is not None and known(AppointmentCancelledBy, event.cancelled_by) is None:
                context.unknown_value("CancelledBy", event.cancelled_by)
            notices = cancellation_notices(
                reason,
                rescheduled=event.rescheduled_to_appointment_id is not None,
                agent=event.agent_user_id,
                investor=event.investor_user_id,
                meeting=self._meeting(event.kind, event, context),
            )
            pending.extend(_notifications(notices, event.tenant_id, event.appointment_id, context))
        conn.execute(_MARK_TERMINAL, _appointments(event for event, _ in items))
        self._deliver(conn, pending)

    def on_confirmed(self, conn: Conn, items: Items[AppointmentConfirmed]) -> None:
        """The investor hears of the confirmation, unless the appointment already ended (stale: no-op)."""
        rows = conn.execute(_MARK_CONFIRMED, _appointments(event for event, _ in items)).fetchall()
        status = {row["appointment_id"]: row["status"] for row in rows}
        pending: _Pending = []
        for event, context in items:
            if status[event.appointment_id] == "Terminal":
                log.warning("stale appointment-confirmed after the terminal event ignored",
                            appointment_id=str(event.appointment_id), message_id=str(context.message_id))  # fmt: skip
                continue
            notice = confirmation_notice(
                investor=event.investor_user_id, meeting=self._meeting(event.kind, event, context)
            )
            pending.extend(_notifications([notice], event.tenant_id, event.appointment_id, context))
        self._deliver(conn, pending)

    def on_created(self, conn: Conn, items: Items[AppointmentCreated]) -> None:
        """The agent hears of a new booking; both participants hear of the new appointment of a reschedule."""
        pending: _Pending = []
        for event, context in items:
            notices = creation_notices(
                agent=event.agent_user_id,
                investor=event.investor_user_id,
                meeting=self._meeting(event.kind, event, context),
                pending=event.status == "Pending",
                rescheduled=event.rescheduled_from_appointment_id is not None,
            )
            pending.extend(_notifications(notices, event.tenant_id, event.appointment_id, context))
        self._deliver(conn, pending)

    def on_event_status_changed(self, conn: Conn, items: Items[CalendarEventStatusChanged]) -> None:
        """Nobody is told: the appointment events already tell both sides of an appointment's event."""
        del conn, items

    def on_purchase_changed(self, conn: Conn, items: Items[PurchaseChanged]) -> None:
        """Seed 002: the buyer hears «срок истёк» when the purchase expires."""
        pending: _Pending = []
        for event, context in items:
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
            pending.extend(_notifications(notices, event.tenant_id, event.purchase_id, context))
        self._deliver(conn, pending)

    def _meeting(self, raw_kind: str, event: AppointmentConfirmed | AppointmentCancelled | AppointmentCreated,
                 context: HandlingContext) -> Meeting:  # fmt: skip
        kind = known(EventKind, raw_kind)
        if kind is None:
            context.unknown_value("Kind", raw_kind)
        return Meeting(kind, event.start_at, event.time_zone)

    def _deliver(self, conn: Conn, pending: _Pending) -> None:
        """The batch's notifications in one delivery; each message logs its own that were not new."""
        if not pending:
            return
        delivered = self._delivery.deliver(conn, [notification for notification, _ in pending])
        start = 0
        for end in range(1, len(pending) + 1):  # one check per message, over its notifications (consecutive)
            if end == len(pending) or pending[end][1] is not pending[start][1]:
                pending[start][1].after_results(partial(_log_if_not_new, delivered, pending, start, end))
                start = end


def _appointments(events: Iterable[AppointmentCancelled | AppointmentConfirmed]) -> tuple[list[uuid.UUID], ...]:
    """Each appointment once, with the tenant of its first message (a later one finds the row and keeps it)."""
    tenants: dict[uuid.UUID, uuid.UUID] = {}
    for event in events:
        tenants.setdefault(event.appointment_id, event.tenant_id)
    return list(tenants), list(tenants.values())


def _notifications(
    notices: Iterable[Notice], tenant: uuid.UUID, subject: uuid.UUID, context: HandlingContext
) -> _Pending:
    return [(Notification(tenant, subject, context.message_id, notice), context) for notice in notices]


def _log_if_not_new(delivered: Delivered, pending: _Pending, start: int, end: int) -> None:
    new = delivered()
    for index in range(start, end):
        if not new[index]:
            notification = pending[index][0]
            log.info("already notified", template_key=notification.notice.template_key,
                     subject_id=str(notification.subject_id))  # fmt: skip


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
