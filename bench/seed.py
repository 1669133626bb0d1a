"""Set-based seeding of the benchmarks' data, straight into the contexts' tables (fast: one statement per table).

Ids are derived from a tag and a sequence number (``md5(tag || ':apt:' || n)::uuid``), so that a pgbench script
can compute them too; a reminder id is derived from its appointment's id (``md5('r1' || appointment_id)``), which
is how the pgbench baseline finds the reminders of the appointment its claim returned.

The rows are what the use cases would have written: a Booked slot (version 2), a Pending appointment, its
Scheduled calendar event and two Pending reminders (24 h and 1 h before StartAt); an Active purchase with 1 to 3
targets.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pin.outbox.writer import kafka_value, vpart_of

_SLOTS = """
INSERT INTO calendar.availability_slot
    (id, tenant_id, agent_user_id, kind, start_at, end_at, time_zone, min_lead_time_minutes, auto_confirm,
     status, version, created_at, updated_at)
SELECT md5(%(tag)s || ':slot:' || n)::uuid, md5('tenant:' || (n %% 20))::uuid, md5('agent:' || (n %% 500))::uuid,
       'Showing', %(start)s + (n %% 1440) * interval '1 minute', %(start)s + (n %% 1440) * interval '1 minute'
       + interval '1 hour', 'Europe/Moscow', 60, false, 'Booked', 2, %(created)s, %(created)s
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
"""
_APPOINTMENTS = """
INSERT INTO calendar.appointment
    (id, tenant_id, slot_id, agent_user_id, investor_user_id, kind, start_at, end_at, time_zone, status,
     pending_expires_at, calendar_event_id, version, created_at, updated_at)
SELECT md5(%(tag)s || ':apt:' || n)::uuid, s.tenant_id, s.id, s.agent_user_id, md5('investor:' || (n %% 5000))::uuid,
       s.kind, s.start_at, s.end_at, s.time_zone, 'Pending', %(due)s + (n - %(lo)s::int) * %(step)s,
       md5(%(tag)s || ':event:' || n)::uuid, 1, %(created)s, %(created)s
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
  JOIN calendar.availability_slot AS s ON s.id = md5(%(tag)s || ':slot:' || n)::uuid
"""
_EVENTS = """
INSERT INTO calendar.calendar_event
    (id, tenant_id, owner_user_id, origin, appointment_id, start_at, end_at, time_zone, status, version,
     created_at, updated_at)
SELECT a.calendar_event_id, a.tenant_id, a.agent_user_id, 'Appointment', a.id, a.start_at, a.end_at, a.time_zone,
       'Scheduled', 1, %(created)s, %(created)s
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
  JOIN calendar.appointment AS a ON a.id = md5(%(tag)s || ':apt:' || n)::uuid
"""
_REMINDERS = """
INSERT INTO calendar.event_reminder (id, calendar_event_id, remind_at, status, created_at, updated_at)
SELECT md5(r.prefix || a.id::text)::uuid, a.calendar_event_id, a.start_at - r.before, 'Pending', %(created)s,
       %(created)s
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
  JOIN calendar.appointment AS a ON a.id = md5(%(tag)s || ':apt:' || n)::uuid
 CROSS JOIN (VALUES ('r1', interval '24 hours'), ('r2', interval '1 hour')) AS r (prefix, before)
"""


def appointment_id(tag: str, n: int) -> str:
    """The id the seed gives appointment ``n`` (the same expression as the SQL above)."""
    import hashlib

    return str(uuid.UUID(hashlib.md5(f"{tag}:apt:{n}".encode()).hexdigest()))  # noqa: S324 - ids, not security


def seed_appointments(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    due: datetime,
    step: timedelta = timedelta(microseconds=1),
    tag: str = "a",
    first: int = 1,
    chunk: int = 50_000,
) -> None:
    """``count`` Pending appointments (each with a Booked slot, a Scheduled event, two Pending reminders) whose
    PendingExpiresAt are ``due + (n - first) * step``; committed in chunks (one transaction per chunk)."""
    created = due - timedelta(days=1)
    start = due + timedelta(days=3)
    for lo in range(first, first + count, chunk):
        hi = min(first + count - 1, lo + chunk - 1)
        params = {"tag": tag, "lo": lo, "hi": hi, "due": due + (lo - first) * step, "step": step}
        params |= {"created": created, "start": start}
        with conn.transaction():
            for statement in (_SLOTS, _APPOINTMENTS, _EVENTS, _REMINDERS):
                conn.execute(statement, params)


_PURCHASES = """
INSERT INTO promotion.purchase
    (id, tenant_id, buyer_user_id, package_id, package_code, package_kind, boost_weight, price_amount, currency_id,
     currency_code, currency_symbol, starts_at, ends_at, status, payment_status, version, created_at, updated_at)
SELECT md5(%(tag)s || ':pur:' || n)::uuid, md5('tenant:' || (n %% 20))::uuid, md5('manager:' || (n %% 200))::uuid,
       p.id, p.code, p.kind, p.boost_weight, p.price_amount, p.currency_id, p.currency_code, p.currency_symbol,
       %(due)s - p.duration, %(due)s + (n - %(lo)s::int) * %(step)s, 'Active', 'NotRequired', 1,
       %(due)s - p.duration, %(due)s - p.duration
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
  JOIN promotion.package AS p ON p.code = 'STANDARD-7D'
"""
_TARGETS = """
INSERT INTO promotion.purchase_target (purchase_id, position, target_kind, target_id)
SELECT md5(%(tag)s || ':pur:' || n)::uuid, k, (ARRAY['Project', 'PropertyObject', 'Post'])[1 + (n + k) %% 3],
       md5(%(tag)s || ':target:' || n || ':' || k)::uuid
  FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
 CROSS JOIN generate_series(0, 2) AS k
 WHERE k <= n %% 3
"""


def purchase_id(tag: str, n: int) -> str:
    """The id the seed gives purchase ``n``."""
    import hashlib

    return str(uuid.UUID(hashlib.md5(f"{tag}:pur:{n}".encode()).hexdigest()))  # noqa: S324 - ids, not security


def seed_purchases(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    due: datetime,
    step: timedelta = timedelta(microseconds=1),
    tag: str = "p",
    first: int = 1,
) -> None:
    """``count`` Active purchases (package STANDARD-7D) with 1 to 3 targets, EndsAt = ``due + (n - first) * step``."""
    params = {"tag": tag, "lo": first, "hi": first + count - 1, "due": due, "step": step}
    with conn.transaction():
        conn.execute(_PURCHASES, params)
        conn.execute(_TARGETS, params)


# ------------------------------------------------------------------------------------------- messages


class MessageFactory:
    """Copies of real outbox rows (written by the workers' own code in the capture phase) with fresh ids.

    ``templates`` maps a topic to one outbox row as the relay reads it (topic, key, event_type, payload, headers).
    Each copy gets a new MessageId and a new aggregate id (the key and its payload field), and for purchases new
    TargetIds, so that consumers' effects land on distinct rows as they would in production.
    """

    _KEY_FIELDS = ("AppointmentId", "PurchaseId", "CalendarEventId")

    def __init__(self, templates: Mapping[str, Mapping[str, Any]]) -> None:
        self.templates = {topic: dict(row) for topic, row in templates.items()}

    def make(self, source_topic: str, n: int, *, topic: str | None = None) -> dict[str, Any]:
        """Message ``n`` shaped like the template of ``source_topic`` (sent to ``topic``, default the same)."""
        template = self.templates[source_topic]
        payload = copy.deepcopy(template["payload"])
        key_field = next(f for f in self._KEY_FIELDS if f in payload and str(payload[f]) == template["message_key"])
        key = str(uuid.uuid4())
        payload[key_field] = key
        message_id = str(uuid.uuid4())
        payload["MessageId"] = message_id
        for target in payload.get("Targets", []):
            target["TargetId"] = str(uuid.uuid4())
        del n
        return {
            "message_id": message_id,
            "topic": topic or source_topic,
            "message_key": key,
            "event_type": template["event_type"],
            "contract_version": template["contract_version"],
            "payload": payload,
            "headers": dict(template["headers"]),
        }

    @staticmethod
    def kafka_value(message: Mapping[str, Any]) -> bytes:
        """The value the relay sends (the row's value, as pin.outbox.writer encodes it)."""
        return kafka_value(message["payload"]).encode("utf-8")

    @staticmethod
    def kafka_headers(message: Mapping[str, Any]) -> list[tuple[str, bytes]]:
        """The headers the relay sends: the row's headers plus message-id, contract-version, event-type."""
        headers = {str(k): str(v) for k, v in message["headers"].items()}
        headers |= {
            "message-id": message["message_id"],
            "contract-version": str(message["contract_version"]),
            "event-type": message["event_type"],
        }
        return [(name, value.encode()) for name, value in headers.items()]


def outbox_templates(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """One outbox row per topic, as the producers wrote them."""
    rows = conn.execute(
        """
        SELECT DISTINCT ON (topic) topic, message_key, event_type, contract_version, payload, headers
          FROM outbox.message ORDER BY topic, id
        """
    ).fetchall()
    return {row["topic"]: dict(row) for row in rows}


def copy_outbox(conn: psycopg.Connection[Any], messages: Iterator[Mapping[str, Any]], occurred_at: datetime) -> int:
    """COPY messages into outbox.message (vpart from the key, as the writer computes it); returns the count."""
    count = 0
    columns = (
        "message_id, vpart, topic, message_key, event_type, contract_version, payload, value, headers, occurred_at"
    )
    with conn.cursor() as cur, cur.copy(f"COPY outbox.message ({columns}) FROM STDIN") as copy_:
        for m in messages:
            copy_.write_row(
                (
                    m["message_id"],
                    vpart_of(m["message_key"]),
                    m["topic"],
                    m["message_key"],
                    m["event_type"],
                    m["contract_version"],
                    Jsonb(m["payload"]),
                    kafka_value(m["payload"]),
                    Jsonb(m["headers"]),
                    occurred_at,
                )
            )
            count += 1
    return count
