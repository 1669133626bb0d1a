"""What the consumers (crm, notifications) read of the calendar's appointment events: the shared fields and enums.

Each consumer adds the fields only it reads; an enum value it does not know takes the neutral path (tolerant
reader, docs/design/consumers.md).
"""

from __future__ import annotations

import uuid
from enum import StrEnum

from pin.messaging.tolerant import Rfc3339Time, TolerantModel


class AppointmentCancelReason(StrEnum):
    """Reason of appointment-cancelled as the consumers know it (additive: a newer producer may send others)."""

    DECLINED_BY_AGENT = "DeclinedByAgent"
    CANCELLED_BY_INVESTOR = "CancelledByInvestor"
    CANCELLED_BY_AGENT = "CancelledByAgent"
    EXPIRED = "Expired"


class AppointmentCancelledBy(StrEnum):
    """CancelledBy of appointment-cancelled (additive upstream; recorded, while who is told follows Reason)."""

    INVESTOR = "Investor"
    AGENT = "Agent"
    SYSTEM = "System"


class EventKind(StrEnum):
    """Kind of a meeting (additive upstream: an unknown one is kept raw, and told as «встреча»)."""

    SHOWING = "Showing"
    CONSULTATION = "Consultation"


class AppointmentEvent(TolerantModel):
    """The fields every appointment event carries and every consumer of one reads: who, what kind, when."""

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: str
    start_at: Rfc3339Time
    time_zone: str
