"""No PII, no free-text reason and no token reaches a log line (SPEC section 6), end to end.

Real requests through the API (create, book, decline and cancel with distinctive reason texts, a bad request
that carries one), then the real appointment-timeout cycle; every log line of all of it is captured as JSON and
scanned, and so are the outbox rows the operations wrote.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn, database_now
from pin.settings import Settings

# Starlette 1.x warns at import when its test client runs on httpx rather than httpx2 (not a dependency here).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

# Distinctive free texts (a name and a phone inside): none of their words may reach a log line.
DECLINE_REASON = "Иван Петров +7 916 555-01-23 не сможет: quokka-decline"
CANCEL_REASON = "Позвоните жене по номеру 8-800-555-35-35 axolotl-cancel"
BAD_REQUEST_REASON = "email ivan.petrov@example.org narwhal-invalid"
MARKERS = ("quokka-decline", "axolotl-cancel", "narwhal-invalid", "555-01-23", "555-35-35", "ivan.petrov@example.org")


@pytest.mark.integration
def test_reasons_tokens_and_contacts_never_reach_a_log_line(
    json_log: Callable[[], list[dict[str, Any]]],
    pool: ConnectionPool[Conn],
    make_settings: Callable[..., Settings],
    token: Callable[..., str],
) -> None:
    from pin.calendar.expiry import AppointmentTimeoutJob

    settings = make_settings()
    client = TestClient(build_app(settings, pool), raise_server_exceptions=False)
    tenant, agent, investor = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    agent_token, investor_token = token(agent, tenant, "agent"), token(investor, tenant, "investor")
    as_agent = {"Authorization": f"Bearer {agent_token}"}
    as_investor = {"Authorization": f"Bearer {investor_token}"}

    with pool.connection() as conn:
        now = database_now(conn)
    appointments = []
    for day in (3, 4, 5):
        start = now + timedelta(days=day)
        slot = client.post(
            "/calendar/slots",
            headers=as_agent,
            json={
                "startAt": start.isoformat(),
                "endAt": (start + timedelta(hours=1)).isoformat(),
                "timeZone": "Europe/Moscow",
                "kind": "Showing",
                "minLeadTimeMinutes": 60,
                "autoConfirm": False,
            },
        )
        assert slot.status_code == 201, slot.text
        booked = client.post(f"/calendar/slots/{slot.json()['id']}/book", headers=as_investor)
        assert booked.status_code == 201, booked.text
        assert booked.json()["status"] == "Pending"
        appointments.append(booked.json()["id"])
    declined, cancelled, left_pending = appointments

    response = client.post(
        f"/calendar/appointments/{declined}/decline", headers=as_agent, json={"reason": DECLINE_REASON}
    )
    assert response.status_code == 200, response.text
    response = client.post(
        f"/calendar/appointments/{cancelled}/cancel", headers=as_agent, json={"reason": CANCEL_REASON}
    )
    assert response.status_code == 200, response.text
    response = client.post(
        f"/calendar/appointments/{left_pending}/decline",
        headers=as_agent,
        json={"reason": BAD_REQUEST_REASON, "comment": BAD_REQUEST_REASON},  # an unknown field: 4xx
    )
    assert 400 <= response.status_code < 500

    # the worker expires the last one (its clock two days ahead: the appointment is past PendingExpiresAt)
    job = AppointmentTimeoutJob(pool, clock=lambda conn: database_now(conn) + timedelta(days=2))
    result = job.run_once()
    assert result.expired_count == 1

    lines = json_log()
    raw = json_log.raw.getvalue()  # type: ignore[attr-defined]
    assert len(lines) >= 5, "the flow logged nothing: this test would prove nothing"
    logged_ids = {line.get(key) for line in lines for key in ("appointment_id", "AppointmentId")}
    assert {declined, cancelled, left_pending} <= logged_ids  # ids are logged, which is what operators need
    for marker in (*MARKERS, agent_token, investor_token):
        assert marker not in raw, f"{marker!r} reached a log line"

    with pool.connection() as conn:
        rows = conn.execute("SELECT payload, headers FROM outbox.message").fetchall()
    outbox_text = json.dumps([[row["payload"], row["headers"]] for row in rows], ensure_ascii=False)
    assert len(rows) >= 6
    for marker in MARKERS:
        assert marker not in outbox_text, f"{marker!r} reached an integration event"
