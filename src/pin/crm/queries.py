"""Reading the lead feed (the read side of crm)."""

from __future__ import annotations

import uuid
from typing import Any

from pin.db import Conn, load_queries
from pin.messaging.contracts import utc_iso

_QUERIES = load_queries(__package__)
_FEED = _QUERIES["lead_feed_of_investor"]


def lead_feed(conn: Conn, *, tenant_id: uuid.UUID, investor_user_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The newest entries of one lead (an investor) in one tenant, as camelCase JSON objects."""
    rows = conn.execute(_FEED, (tenant_id, investor_user_id, limit)).fetchall()
    return [_entry_json(row) for row in rows]


def _entry_json(row: dict[str, Any]) -> dict[str, Any]:
    def time(name: str) -> str | None:
        value = row[name]
        return utc_iso(value) if value is not None else None

    def ident(name: str) -> str | None:
        value = row[name]
        return str(value) if value is not None else None

    return {
        "id": str(row["id"]),
        "appointmentId": str(row["appointment_id"]),
        "entryKind": row["entry_kind"],
        "reason": row["reason"],
        "cancelledBy": row["cancelled_by"],
        "text": row["text"],
        "appointmentKind": row["appointment_kind"],
        "startAt": time("start_at"),
        "timeZone": row["time_zone"],
        "rescheduledToAppointmentId": ident("rescheduled_to_appointment_id"),
        "rescheduledStartAt": time("rescheduled_start_at"),
        "occurredAt": time("occurred_at"),
        "recordedAt": time("recorded_at"),
    }
