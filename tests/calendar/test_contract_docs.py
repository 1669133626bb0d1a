"""The published contract documents (docs/contracts) match the models and what the code really writes.

Regenerate them with ``python -m pin.calendar.contracts docs/contracts``.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from pin.calendar import contracts, service
from pin.calendar.domain import Kind
from pin.db import database_now
from pin.outbox.writer import MessageContext
from pin.unit_of_work import Conn, UnitOfWork
from tests.calendar.conftest import outbox
from tests.support.json_schema import errors as _errors
from tests.support.json_schema import kafka_headers

DOCS = Path(__file__).resolve().parents[2] / "docs" / "contracts"


@pytest.mark.unit
def test_committed_documents_are_generated_from_the_models() -> None:
    expected = contracts.DOCUMENTS.documents()
    committed = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*calendar*.json")}
    assert committed == expected, "run: python -m pin.calendar.contracts docs/contracts"


@pytest.mark.unit
def test_schemas_list_exactly_the_contract_fields_and_the_envelope() -> None:
    for contract in contracts.CALENDAR_CONTRACTS:
        schema = json.loads((DOCS / f"{contract.EVENT_TYPE}.v1.schema.json").read_text(encoding="utf-8"))
        fields = {info.serialization_alias for info in contract.model_fields.values()}
        assert set(schema["properties"]) == fields | {"MessageId", "ContractVersion", "OccurredAt"}
        assert set(schema["required"]) == set(schema["properties"])
        assert "CancelReason" not in schema["properties"]
        assert schema["x-topic"] == contract.TOPIC
    asyncapi = json.loads((DOCS / "calendar.asyncapi.json").read_text(encoding="utf-8"))
    assert asyncapi["asyncapi"] == "3.0.0"
    addresses = {channel["address"] for channel in asyncapi["channels"].values()}
    assert addresses == {c.TOPIC for c in contracts.CALENDAR_CONTRACTS}
    for operation in asyncapi["operations"].values():
        assert operation["action"] == "send"
        channel = operation["channel"]["$ref"].removeprefix("#/channels/")
        assert channel in asyncapi["channels"]


@pytest.mark.unit
def test_the_validator_of_this_module_can_fail() -> None:
    schema = json.loads((DOCS / "pin.calendar.appointment-cancelled.v1.schema.json").read_text(encoding="utf-8"))
    assert _errors(schema, {"AppointmentId": "x"})
    assert _errors(schema["properties"]["Reason"], "Rescheduled")
    assert _errors(schema["properties"]["StartAt"], "2026-01-01T10:00:00+03:00")


def _produce_every_calendar_message(pool: ConnectionPool[Conn]) -> None:
    calendar = service.Calendar(pool, service.CalendarPolicy(), MessageContext("docs-check"))
    tenant = uuid.uuid4()
    agent, investor = service.Actor(uuid.uuid4(), tenant), service.Actor(uuid.uuid4(), tenant)
    with pool.connection() as conn:
        now = database_now(conn)

    def slot(days: int, *, auto: bool = False) -> uuid.UUID:
        start = now + timedelta(days=days)
        created = service.create_slot(
            calendar, agent, kind=Kind.CONSULTATION, start_at=start, end_at=start + timedelta(hours=1),
            time_zone="Asia/Yekaterinburg", min_lead_time_minutes=15, auto_confirm=auto,
        )  # fmt: skip
        return created.id

    confirmed = service.book_slot(calendar, investor, slot(2)).appointment.id
    service.confirm_appointment(calendar, agent, confirmed)
    service.cancel_appointment_by_agent(calendar, agent, confirmed, "ill")
    declined = service.book_slot(calendar, investor, slot(3)).appointment.id
    service.decline_appointment(calendar, agent, declined, "busy")
    moved = service.book_slot(calendar, investor, slot(4, auto=True)).appointment.id
    service.reschedule_my_appointment(calendar, investor, moved, slot(5))
    cancelled = service.book_slot(calendar, investor, slot(6)).appointment.id
    service.cancel_my_appointment(calendar, investor, cancelled, None)
    expired = service.book_slot(calendar, investor, slot(7)).appointment
    assert expired.pending_expires_at is not None
    with UnitOfWork(pool, MessageContext("run")) as uow:
        service.expire_appointment(uow, expired.id, expired.pending_expires_at + timedelta(seconds=1))
        uow.commit()


@pytest.mark.integration
def test_every_outbox_row_matches_its_published_schema(pool: ConnectionPool[Conn]) -> None:
    _produce_every_calendar_message(pool)
    schemas = {
        c.EVENT_TYPE: json.loads((DOCS / f"{c.EVENT_TYPE}.v1.schema.json").read_text(encoding="utf-8"))
        for c in contracts.CALENDAR_CONTRACTS
    }
    asyncapi = json.loads((DOCS / "calendar.asyncapi.json").read_text(encoding="utf-8"))
    messages = {m["title"]: m for m in asyncapi["components"]["messages"].values()}
    rows = outbox(pool)
    assert {row["event_type"] for row in rows} == set(schemas)  # every contract really written
    reasons = {row["payload"].get("Reason") for row in rows} - {None}
    assert reasons == {"DeclinedByAgent", "CancelledByInvestor", "CancelledByAgent", "Expired"}
    for row in rows:
        schema = schemas[row["event_type"]]
        assert row["topic"] == schema["x-topic"]
        assert row["message_key"] == row["payload"][schema["x-key"]]
        assert _errors(schema, row["payload"]) == [], row["payload"]
        message = messages[row["event_type"]]
        assert _errors(message["payload"], row["payload"]) == []
        assert _errors(message["headers"], kafka_headers(row)) == [], kafka_headers(row)
