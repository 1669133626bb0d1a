"""notifications' tolerant-reader view of the events it reads (seed 003, seed 002; SPEC section 6)."""

from __future__ import annotations

import uuid

from pin.messaging.appointment_events import AppointmentEvent
from pin.messaging.tolerant import Rfc3339Time, TolerantModel


class AppointmentCancelled(AppointmentEvent):
    """pin.calendar.appointment-cancelled: who is told, and the time for the text."""

    reason: str
    cancelled_by: str | None = None
    rescheduled_to_appointment_id: uuid.UUID | None = None


class AppointmentConfirmed(AppointmentEvent):
    """pin.calendar.appointment-confirmed."""


class AppointmentCreated(AppointmentEvent):
    """pin.calendar.appointment-created (a booking, or the new half of a reschedule)."""

    status: str
    rescheduled_from_appointment_id: uuid.UUID | None = None


class CalendarEventStatusChanged(TolerantModel):
    """pin.calendar.event-status-changed: read, but it tells no one anything (the appointment events do)."""

    calendar_event_id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: str
    status: str


class PurchaseChanged(TolerantModel):
    """pin.promotion.purchase-changed: the buyer hears when a purchase expires."""

    purchase_id: uuid.UUID
    tenant_id: uuid.UUID
    # additive field (SPEC section 6): a producer without it leaves nobody to tell
    buyer_user_id: uuid.UUID | None = None
    package_code: str
    status: str
    ends_at: Rfc3339Time
    version: int
