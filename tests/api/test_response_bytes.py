"""Every route's success response, byte for byte, for one fixed scenario (status, ETag, Location, body).

Server-made ids become <id-N> in order of first appearance and server-made times keep their shape only, so the
comparison holds the field names, their order and how every time is written.
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn
from pin.settings import Settings
from tests.promotion.support import STANDARD_7D

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration

EXPECTED = Path(__file__).with_name("response_bytes.txt")

TENANT = uuid.UUID("00000000-0000-4000-8000-0000000000a1")
AGENT = uuid.UUID("00000000-0000-4000-8000-0000000000a2")
INVESTOR = uuid.UUID("00000000-0000-4000-8000-0000000000a3")
MANAGER = uuid.UUID("00000000-0000-4000-8000-0000000000a4")
ADMIN = uuid.UUID("00000000-0000-4000-8000-0000000000a5")
CARD = uuid.UUID("00000000-0000-4000-8000-0000000000c1")
POST = uuid.UUID("00000000-0000-4000-8000-0000000000c2")
FIXED_IDS = {TENANT, AGENT, INVESTOR, MANAGER, ADMIN, CARD, POST, STANDARD_7D}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# a time the server read from its clock has microseconds; the scenario's own times have none
_CLOCK_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?=Z|[+-]\d{2}:\d{2})")


class Transcript:
    """The scenario's requests and their answers, as text."""

    def __init__(self, client: TestClient, token: Callable[..., str]) -> None:
        self.client = client
        self.token = token
        self.lines: list[str] = []

    def call(self, method: str, path: str, who: uuid.UUID, role: str, json: Any = None) -> Any:
        """Send one request as ``who`` and record the answer (asserting a 2xx)."""
        headers = {"Authorization": f"Bearer {self.token(who, TENANT, role)}"}
        response = self.client.request(method, path, json=json, headers=headers)
        assert 200 <= response.status_code < 300, response.text
        self.lines.append(f"{method} {path} -> {response.status_code} {response.headers['content-type']}")
        for name in ("ETag", "Location"):
            if name in response.headers:
                self.lines.append(f"{name}: {response.headers[name]}")
        self.lines.append(response.content.decode())
        return response.json()

    def normalised(self) -> str:
        """The transcript with server-made ids numbered and server-made times reduced to their shape."""
        numbers: dict[str, str] = {str(fixed): str(fixed) for fixed in FIXED_IDS}

        def number(match: re.Match[str]) -> str:
            return numbers.setdefault(match.group(0), f"<id-{len(numbers) - len(FIXED_IDS) + 1}>")

        text = _UUID.sub(number, "\n".join(self.lines) + "\n")
        return _CLOCK_TIME.sub("YYYY-MM-DDTHH:MM:SS.ffffff", text)


@pytest.fixture
def transcript(
    pool: ConnectionPool[Conn], make_settings: Callable[..., Settings], token: Callable[..., str]
) -> Iterator[Transcript]:
    with TestClient(build_app(make_settings(), pool), raise_server_exceptions=False) as client:
        yield Transcript(client, token)


def _slot(t: Transcript, hour: int) -> str:
    body = {
        "startAt": f"2031-01-01T{hour:02d}:00:00+03:00",
        "endAt": f"2031-01-01T{hour:02d}:30:00+03:00",
        "timeZone": "Europe/Moscow",
        "kind": "Showing",
        "minLeadTimeMinutes": 30,
    }
    return str(t.call("POST", "/calendar/slots", AGENT, "agent", body)["id"])


def _booked(t: Transcript, hour: int) -> str:
    return str(t.call("POST", f"/calendar/slots/{_slot(t, hour)}/book", INVESTOR, "investor")["id"])


def _calendar(t: Transcript) -> None:
    slot = _slot(t, 10)
    t.call("GET", f"/calendar/slots/{slot}", AGENT, "agent")
    appointment = t.call("POST", f"/calendar/slots/{slot}/book", INVESTOR, "investor")
    t.call("GET", f"/calendar/appointments/{appointment['id']}", AGENT, "agent")
    t.call("POST", f"/calendar/appointments/{appointment['id']}/confirm", AGENT, "agent")
    t.call("GET", f"/calendar/events/{appointment['calendarEventId']}", AGENT, "agent")
    t.call("POST", f"/calendar/appointments/{_booked(t, 11)}/decline", AGENT, "agent", {"reason": "busy"})
    t.call("POST", f"/calendar/appointments/{_booked(t, 12)}/cancel", AGENT, "agent", {"reason": "ill"})
    t.call("POST", f"/calendar/my/appointments/{_booked(t, 13)}/cancel", INVESTOR, "investor")
    moved, target = _booked(t, 14), _slot(t, 15)
    t.call("POST", f"/calendar/my/appointments/{moved}/reschedule", INVESTOR, "investor", {"newSlotId": target})


def _promotion(t: Transcript) -> None:
    t.call("GET", "/promotions/packages", MANAGER, "manager")
    body = {"packageId": str(STANDARD_7D), "targets": [{"targetKind": "Project", "targetId": str(CARD)}]}
    purchase = t.call("POST", "/promotions", MANAGER, "manager", body)
    t.call("GET", f"/promotions/{purchase['id']}", MANAGER, "manager")
    t.call("POST", f"/promotions/{purchase['id']}/cancel", MANAGER, "manager")


_LEAD_ENTRIES = """
INSERT INTO crm.lead_feed_entry (tenant_id, investor_user_id, agent_user_id, appointment_id, entry_kind, reason,
    text, appointment_kind, start_at, time_zone, rescheduled_to_appointment_id, rescheduled_start_at, message_id,
    occurred_at, recorded_at)
VALUES (%(tenant)s, %(investor)s, %(agent)s, gen_random_uuid(), 'Rescheduled', 'Rescheduled', 'moved',
        'Showing', '2031-01-01 10:00+03', 'Europe/Moscow', gen_random_uuid(), '2031-01-02 10:00:00.5+03',
        gen_random_uuid(), '2030-12-01 09:00Z', '2030-12-01 09:00:01.25Z'),
       (%(tenant)s, %(investor)s, %(agent)s, gen_random_uuid(), 'Expired', NULL, 'expired', NULL, NULL, NULL,
        NULL, NULL, gen_random_uuid(), '2030-11-01 09:00Z', '2030-11-01 09:00Z')
"""
_NOTIFICATION = """
INSERT INTO notifications.notification (tenant_id, recipient_user_id, kind, template_key, text, subject_id,
    message_id, created_at)
VALUES (%(tenant)s, %(investor)s, 'AppointmentCancelled', 'appointment-cancelled', 'cancelled', gen_random_uuid(),
        gen_random_uuid(), '2030-12-01 09:00:00.000001Z')
"""


def _read_models(pool: ConnectionPool[Conn]) -> None:
    """Rows the consumers would have written: the feeds' bodies are then not empty."""
    with pool.connection() as conn:
        for statement in (_LEAD_ENTRIES, _NOTIFICATION):
            conn.execute(statement, {"tenant": TENANT, "investor": INVESTOR, "agent": AGENT})


def _consumers(t: Transcript) -> None:
    t.call("PUT", f"/catalog/cards/Project/{CARD}", ADMIN, "admin", {"published": True})
    t.call("PUT", f"/catalog/cards/Project/{CARD}", ADMIN, "admin", {"published": False})
    t.call("GET", f"/catalog/cards/Project/{CARD}", ADMIN, "admin")
    t.call("PUT", f"/news/posts/{POST}", ADMIN, "admin", {"published": True})
    t.call("GET", f"/news/posts/{POST}", ADMIN, "admin")
    t.call("GET", f"/crm/leads/{INVESTOR}/feed", AGENT, "agent")
    t.call("GET", "/notifications", INVESTOR, "investor")


def test_every_route_answers_the_recorded_bytes(transcript: Transcript, pool: ConnectionPool[Conn]) -> None:
    """A change of a field's name, order, format or presence in any success body fails here."""
    _read_models(pool)
    _calendar(transcript)
    _promotion(transcript)
    _consumers(transcript)

    assert transcript.normalised() == EXPECTED.read_text(encoding="utf-8")
