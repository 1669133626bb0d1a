"""The calendar's integration-event contracts (SPEC section 6, seed 003) and their published documents.

Each contract lists exactly the fields of its table; the free-text CancelReason is never one of them.
``python -m pin.calendar.contracts [DIR]`` writes the JSON Schema of each message value and an AsyncAPI 3
document of the calendar topics into ``docs/contracts`` (or DIR); a test checks those files against the
models and against what the use cases really write to the outbox.
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from pathlib import Path
from typing import Any, ClassVar

from pin.calendar import domain
from pin.calendar.domain import AppointmentStatus, CancelledBy, EventStatus, Kind, Origin, Reason
from pin.messaging import topics
from pin.messaging.contracts import Contract, UtcDateTime


class AppointmentCancelledEvent(Contract):
    """pin.calendar.appointment-cancelled: the appointment will not take place (seed 003)."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CANCELLED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-cancelled"

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcDateTime
    time_zone: str
    reason: Reason
    cancelled_by: CancelledBy | None
    rescheduled_to_appointment_id: uuid.UUID | None

    def message_key(self) -> str:
        """Key = AppointmentId."""
        return str(self.appointment_id)


class AppointmentCreatedEvent(Contract):
    """pin.calendar.appointment-created: a booking or the second half of a reschedule."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CREATED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-created"

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    slot_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcDateTime
    end_at: UtcDateTime
    time_zone: str
    status: AppointmentStatus
    pending_expires_at: UtcDateTime | None
    rescheduled_from_appointment_id: uuid.UUID | None

    def message_key(self) -> str:
        """Key = AppointmentId."""
        return str(self.appointment_id)


class AppointmentConfirmedEvent(Contract):
    """pin.calendar.appointment-confirmed: the agent confirmed a Pending appointment."""

    TOPIC: ClassVar[str] = topics.APPOINTMENT_CONFIRMED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.appointment-confirmed"

    appointment_id: uuid.UUID
    tenant_id: uuid.UUID
    agent_user_id: uuid.UUID
    investor_user_id: uuid.UUID
    kind: Kind
    start_at: UtcDateTime
    time_zone: str

    def message_key(self) -> str:
        """Key = AppointmentId."""
        return str(self.appointment_id)


class CalendarEventStatusChangedEvent(Contract):
    """pin.calendar.event-status-changed: a calendar event was scheduled or cancelled."""

    TOPIC: ClassVar[str] = topics.EVENT_STATUS_CHANGED
    EVENT_TYPE: ClassVar[str] = "pin.calendar.event-status-changed"

    calendar_event_id: uuid.UUID
    tenant_id: uuid.UUID
    owner_user_id: uuid.UUID
    origin: Origin
    appointment_id: uuid.UUID | None
    status: EventStatus
    start_at: UtcDateTime
    end_at: UtcDateTime
    time_zone: str
    version: int

    def message_key(self) -> str:
        """Key = CalendarEventId."""
        return str(self.calendar_event_id)


CALENDAR_CONTRACTS: tuple[type[Contract], ...] = (
    AppointmentCancelledEvent,
    AppointmentCreatedEvent,
    AppointmentConfirmedEvent,
    CalendarEventStatusChangedEvent,
)

_CONTRACT_OF: dict[type[Any], type[Contract]] = {
    domain.AppointmentCancelled: AppointmentCancelledEvent,
    domain.AppointmentCreated: AppointmentCreatedEvent,
    domain.AppointmentConfirmed: AppointmentConfirmedEvent,
    domain.CalendarEventStatusChanged: CalendarEventStatusChangedEvent,
}


def to_contract(event: domain.DomainEvent) -> Contract:
    """The integration contract of a domain event (every field but OccurredAt, which is the envelope's)."""
    contract_type = _CONTRACT_OF[type(event)]
    fields = {name: value for name, value in vars(event).items() if name != "occurred_at"}
    return contract_type(**fields)


# ------------------------------------------------------------------------------------ published documents

HEADERS = ("message-id", "contract-version", "event-type", "correlation-id", "traceparent")


def message_schema(contract: type[Contract]) -> dict[str, Any]:
    """The JSON Schema of a message value: the contract's fields plus the envelope, nothing else."""
    schema = _inline_refs(contract.model_json_schema(by_alias=True, mode="validation"))
    properties: dict[str, Any] = {name: _tidy(prop) for name, prop in schema["properties"].items()}
    properties["MessageId"] = {"type": "string", "format": "uuid"}
    properties["ContractVersion"] = {"const": contract.CONTRACT_VERSION}
    properties["OccurredAt"] = {"type": "string", "format": "date-time"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:pin:contract:{contract.EVENT_TYPE}:v{contract.CONTRACT_VERSION}",
        "title": contract.__name__,
        "description": (contract.__doc__ or "").strip(),
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        "x-topic": contract.TOPIC,
        "x-event-type": contract.EVENT_TYPE,
        "x-key": _key_field(contract),
    }


def asyncapi_document() -> dict[str, Any]:
    """An AsyncAPI 3.0 document of the calendar topics, the calendar being the producer."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for contract in CALENDAR_CONTRACTS:
        name = contract.__name__
        channel = contract.EVENT_TYPE.rsplit(".", 1)[1]
        messages[name] = {
            "name": name,
            "title": contract.EVENT_TYPE,
            "contentType": "application/json",
            "headers": _headers_schema(contract),
            "payload": {k: v for k, v in message_schema(contract).items() if k not in ("$schema", "$id")},
            "bindings": {"kafka": {"key": {"type": "string", "format": "uuid"}, "bindingVersion": "0.5.0"}},
        }
        channels[channel] = {
            "address": contract.TOPIC,
            "description": f"Key = {_key_field(contract)}; 3 partitions.",
            "messages": {name: {"$ref": f"#/components/messages/{name}"}},
            "bindings": {"kafka": {"topic": contract.TOPIC, "partitions": 3, "bindingVersion": "0.5.0"}},
        }
        operations[f"publish-{channel}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{channel}"},
            "messages": [{"$ref": f"#/channels/{channel}/messages/{name}"}],
        }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "PIN calendar integration events",
            "version": "1.0.0",
            "description": "Published by the calendar context through its transactional outbox (at least once).",
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages},
    }


def documents() -> dict[str, str]:
    """File name -> content of every published document."""
    files = {f"{c.EVENT_TYPE}.v{c.CONTRACT_VERSION}.schema.json": _dump(message_schema(c)) for c in CALENDAR_CONTRACTS}
    files["calendar.asyncapi.json"] = _dump(asyncapi_document())
    return files


def write_documents(directory: Path) -> list[Path]:
    """Write every published document into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in documents().items():
        path = directory / name
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def _key_field(contract: type[Contract]) -> str:
    return "CalendarEventId" if contract is CalendarEventStatusChangedEvent else "AppointmentId"


def _headers_schema(contract: type[Contract]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "message-id": {"type": "string", "format": "uuid"},
        "contract-version": {"type": "string", "const": str(contract.CONTRACT_VERSION)},
        "event-type": {"type": "string", "const": contract.EVENT_TYPE},
        "correlation-id": {"type": "string"},
        "traceparent": {"type": "string", "description": "W3C trace context, when a trace is recording"},
    }
    return {"type": "object", "properties": properties, "required": list(HEADERS[:4])}


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve local ``#/$defs/...`` references, so a schema can be embedded in another document."""
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(copy.deepcopy(defs[ref.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _tidy(prop: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles and enum descriptions; keep type, format and enum."""
    if "anyOf" in prop:
        return {"anyOf": [_tidy(option) for option in prop["anyOf"]]}
    return {k: v for k, v in prop.items() if k in ("type", "format", "enum", "const")}


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write the documents into argv[0] (default docs/contracts)."""
    directory = Path(argv[0]) if argv else Path("docs/contracts")
    for path in write_documents(directory):
        sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
