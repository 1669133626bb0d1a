"""Reading a user's notifications."""

from __future__ import annotations

import uuid
from typing import Any

from pin.db import Conn, load_queries
from pin.messaging.contracts import utc_iso

_QUERIES = load_queries(__package__)
_MINE = _QUERIES["notifications_of_user"]


def notifications_of(conn: Conn, *, tenant_id: uuid.UUID, user_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The newest notifications of one user in one tenant, as camelCase JSON objects."""
    return [_json(row) for row in conn.execute(_MINE, (tenant_id, user_id, limit)).fetchall()]


def _json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "kind": row["kind"],
        "templateKey": row["template_key"],
        "text": row["text"],
        "subjectId": str(row["subject_id"]),
        "createdAt": utc_iso(row["created_at"]),
    }
