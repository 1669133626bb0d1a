"""The calendar's outbox payloads built straight from the domain events are the contracts' own, key for key."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin.calendar import domain
from pin.calendar.contracts import payload_of, to_contract
from tests.support.deep import examples

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
def test_the_payload_built_from_an_event_is_the_contracts_to_the_byte(event: domain.DomainEvent) -> None:
    contract = to_contract(event)

    kind, key, payload = payload_of(event)

    assert kind is type(contract)
    assert key == contract.message_key()
    assert list(payload.items()) == list(contract.to_payload().items())  # the same keys, in the same order


def test_a_naive_time_is_refused_as_the_contract_refuses_it() -> None:
    event = domain.AppointmentConfirmed(
        appointment_id=uuid.uuid4(), tenant_id=uuid.uuid4(), agent_user_id=uuid.uuid4(),
        investor_user_id=uuid.uuid4(), kind=domain.Kind.SHOWING, start_at=datetime(2026, 1, 1, 10),
        time_zone="Europe/Moscow", occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip

    with pytest.raises(ValueError, match="timezone"):
        payload_of(event)
