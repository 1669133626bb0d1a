"""The calendar's one payload builder (``payload_of``) writes what the committed schemas publish and the models read.

Each payload is checked three ways: against its committed JSON Schema (docs/contracts), by the model reading it
back to the same field values as the event's, and by the model writing it again to the same bytes.
"""

from __future__ import annotations

import functools
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin.calendar import domain
from pin.calendar.contracts import payload_of
from pin.messaging.contracts import Contract
from tests.support.deep import examples

DOCS = Path(__file__).resolve().parents[2] / "docs" / "contracts"
# the envelope the outbox writer adds around every payload (the committed schemas require it)
_ENVELOPE = {"MessageId": str(uuid.uuid4()), "ContractVersion": 1, "OccurredAt": "2026-01-01T00:00:00Z"}


@functools.cache
def _validator(kind: type[Contract]) -> jsonschema_rs.Draft202012Validator:
    schema = json.loads((DOCS / f"{kind.EVENT_TYPE}.v1.schema.json").read_text(encoding="utf-8"))
    return jsonschema_rs.Draft202012Validator(schema, validate_formats=True)


_AWARE = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)
_OPTIONAL_ID = st.none() | st.uuids()


def _appointment_fields() -> dict[str, Any]:
    return {
        "appointment_id": st.uuids(),
        "tenant_id": st.uuids(),
        "agent_user_id": st.uuids(),
        "investor_user_id": st.uuids(),
        "kind": st.sampled_from(domain.Kind),
        "start_at": _AWARE,
        "time_zone": st.text(max_size=30),
        "occurred_at": _AWARE,
    }


_EVENTS = st.one_of(
    st.builds(
        domain.AppointmentCreated,
        **_appointment_fields(),
        slot_id=st.uuids(),
        end_at=_AWARE,
        status=st.sampled_from(domain.AppointmentStatus),
        pending_expires_at=st.none() | _AWARE,
        rescheduled_from_appointment_id=_OPTIONAL_ID,
    ),
    st.builds(domain.AppointmentConfirmed, **_appointment_fields()),
    st.builds(
        domain.AppointmentCancelled,
        **_appointment_fields(),
        reason=st.sampled_from(domain.Reason),
        cancelled_by=st.none() | st.sampled_from(domain.CancelledBy),
        rescheduled_to_appointment_id=_OPTIONAL_ID,
    ),
    st.builds(
        domain.CalendarEventStatusChanged,
        calendar_event_id=st.uuids(),
        tenant_id=st.uuids(),
        owner_user_id=st.uuids(),
        origin=st.sampled_from(domain.Origin),
        appointment_id=_OPTIONAL_ID,
        status=st.sampled_from(domain.EventStatus),
        start_at=_AWARE,
        end_at=_AWARE,
        time_zone=st.text(max_size=30),
        version=st.integers(min_value=1, max_value=2**31 - 1),
        occurred_at=_AWARE,
    ),
)


@pytest.mark.deep
@settings(max_examples=examples(400), deadline=None)
@given(_EVENTS)
def test_the_payload_of_an_event_is_its_published_contract(event: domain.DomainEvent) -> None:
    kind, key, payload = payload_of(event)

    assert [e.message for e in _validator(kind).iter_errors({**payload, **_ENVELOPE})] == []
    read = kind.model_validate(payload)
    assert {name: getattr(read, name) for name in kind.model_fields} == {
        name: getattr(event, name) for name in kind.model_fields
    }  # every field of the contract is the event's (a time the same instant)
    assert "OccurredAt" not in payload  # the envelope's, not the contract's
    assert key == str(getattr(event, kind.KEY_FIELD)) == read.message_key()
    assert json.dumps(read.to_payload()) == json.dumps(payload)  # the same keys, in the same order, the same text


def test_a_naive_time_is_refused_as_the_contract_refuses_it() -> None:
    event = domain.AppointmentConfirmed(
        appointment_id=uuid.uuid4(), tenant_id=uuid.uuid4(), agent_user_id=uuid.uuid4(),
        investor_user_id=uuid.uuid4(), kind=domain.Kind.SHOWING, start_at=datetime(2026, 1, 1, 10),
        time_zone="Europe/Moscow", occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip

    with pytest.raises(ValueError, match="timezone"):
        payload_of(event)
