"""The published contract documents (docs/contracts) match the models and what the code really writes.

Regenerate them with ``python -m pin.calendar.contracts docs/contracts``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from psycopg_pool import ConnectionPool

from pin.calendar import contracts, service
from pin.calendar.contracts import AppointmentCancelledEvent
from pin.calendar.domain import Kind
from pin.db import Conn, database_now
from pin.messaging.contract_docs import OPEN_ENUM
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.unit_of_work import UnitOfWork
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
        required = {info.serialization_alias for info in contract.model_fields.values() if info.is_required()}
        assert set(schema["required"]) == required | {"MessageId", "ContractVersion", "OccurredAt"}
        assert schema["additionalProperties"] is True
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
    assert _errors(schema["properties"]["Reason"], 42)
    assert _errors(schema["properties"]["StartAt"], "2026-01-01T10:00:00+03:00")


@pytest.mark.unit
def test_what_seed_003_lets_a_v1_producer_send_validates_against_the_published_schema() -> None:
    """Optional fields absent, a field added later, Reason/CancelledBy/Kind values added later: all valid v1."""
    schema = json.loads((DOCS / "pin.calendar.appointment-cancelled.v1.schema.json").read_text(encoding="utf-8"))
    payload = {
        "AppointmentId": str(uuid.uuid4()),
        "TenantId": str(uuid.uuid4()),
        "AgentUserId": str(uuid.uuid4()),
        "InvestorUserId": str(uuid.uuid4()),
        "Kind": "VideoCall",
        "StartAt": "2026-12-01T10:00:00Z",
        "TimeZone": "Europe/Moscow",
        "Reason": "CancelledByPlatform",
        "MessageId": str(uuid.uuid4()),
        "ContractVersion": 1,
        "OccurredAt": "2026-11-30T10:00:00Z",
    }
    added_later = {**payload, "CancelledBy": "Moderator", "CancelledAt": "2026-11-30T10:00:00Z"}
    asyncapi = json.loads((DOCS / "calendar.asyncapi.json").read_text(encoding="utf-8"))
    message = asyncapi["components"]["messages"][AppointmentCancelledEvent.__name__]["payload"]
    for document in (schema, message):
        validator = jsonschema_rs.Draft202012Validator(document, validate_formats=True)
        for value in (payload, added_later):
            assert [e.message for e in validator.iter_errors(value)] == []
        # what a reader may rely on is still enforced
        assert not validator.is_valid({k: v for k, v in payload.items() if k != "Reason"})
        assert not validator.is_valid({**payload, "Reason": 7})
        assert not validator.is_valid({**payload, "AppointmentId": "not-a-uuid"})


@pytest.mark.unit
def test_every_enum_of_every_contract_is_open_and_lists_its_known_values() -> None:
    """Each enum is ``anyOf: [{enum: known}, {type: string}]`` (with its description): no closed enum anywhere."""

    def walk(node: object) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            yield node
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    total = 0
    for path in sorted(DOCS.glob("*.json")):
        nodes = list(walk(json.loads(path.read_text(encoding="utf-8"))))
        enums = [node for node in nodes if "enum" in node]
        open_enums = [
            option
            for node in nodes
            if "anyOf" in node and {"type": "string"} in node["anyOf"] and node.get("description") == OPEN_ENUM
            for option in node["anyOf"]
            if "enum" in option
        ]
        assert sorted(map(id, enums)) == sorted(map(id, open_enums)), path.name  # the same nodes
        assert all(set(node) == {"enum"} and node["enum"] for node in enums), path.name
        total += len(enums)
    assert total >= 12  # Kind, Reason, CancelledBy, Status, Origin, ... across the documents


def _produce_every_calendar_message(pool: ConnectionPool[Conn]) -> None:
    calendar = service.UseCaseContext(pool, service.CalendarPolicy(), MessageContext("docs-check"), RELAY_POLICY)
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
    with UnitOfWork(pool, MessageContext("run"), outbox=RELAY_POLICY) as uow:
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
