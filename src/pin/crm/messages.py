"""crm's tolerant-reader view of the calendar events it reads (seed 003; SPEC section 6)."""

from __future__ import annotations

import uuid

from pin.messaging.appointment_events import AppointmentEvent
from pin.messaging.tolerant import Rfc3339Time


class AppointmentCancelled(AppointmentEvent):
    """pin.calendar.appointment-cancelled: the fields the lead feed needs."""

    reason: str
    cancelled_by: str | None = None
    rescheduled_to_appointment_id: uuid.UUID | None = None
    occurred_at: Rfc3339Time | None = None


class AppointmentCreated(AppointmentEvent):
    """pin.calendar.appointment-created: crm reads it only for the second half of a reschedule."""

    rescheduled_from_appointment_id: uuid.UUID | None = None
    occurred_at: Rfc3339Time | None = None
