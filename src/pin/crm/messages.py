"""crm's tolerant-reader view of the calendar events it reads (seed 003; SPEC section 6)."""

from __future__ import annotations

import uuid

from pin.messaging.tolerant import Rfc3339Time, TolerantModel


class AppointmentCancelled(TolerantModel):
    """pin.calendar.appointment-cancelled: the fields the lead feed needs."""

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: str
    start_at: Rfc3339Time
    time_zone: str
    reason: str
    cancelled_by: str | None = None
    rescheduled_to_appointment_id: uuid.UUID | None = None
    occurred_at: Rfc3339Time | None = None


class AppointmentCreated(TolerantModel):
    """pin.calendar.appointment-created: crm reads it only for the second half of a reschedule."""

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: str
    start_at: Rfc3339Time
    time_zone: str
    rescheduled_from_appointment_id: uuid.UUID | None = None
    occurred_at: Rfc3339Time | None = None
