"""Property: whatever the bytes, the envelope decoder returns an envelope or raises the one "unreadable" error.

The same for the groups' tolerant readers behind it: a payload with any field replaced by any JSON value is
parsed or unreadable, nothing else (the consumer runtime dead-letters an unreadable message at once; anything
else would be retried as if the database were at fault, or, before, kill the loop).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pin.consumer_groups import routes_of
from pin.messaging import topics
from pin.messaging.envelope import Envelope, UnreadableMessageError, decode_envelope
from tests.consumers.support import cancelled, confirmed, created, purchase
from tests.support.deep import examples

pytestmark = pytest.mark.unit

BOUND = 1_000_000

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
header_maps = st.dictionaries(
    st.sampled_from(["message-id", "contract-version", "event-type", "correlation-id"]) | st.text(max_size=8),
    st.text(max_size=40) | st.uuids().map(str),
    max_size=4,
)


def _decode(value: bytes | None, headers: dict[str, str]) -> Envelope | None:
    """The envelope, or None when unreadable; any other exception fails the property."""
    try:
        envelope = decode_envelope(value, headers, max_bytes=BOUND)
    except UnreadableMessageError:
        return None
    assert isinstance(envelope.message_id, uuid.UUID)
    assert isinstance(envelope.payload, dict)
    return envelope


@pytest.mark.deep
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.binary(max_size=2_000) | st.none(), headers=header_maps)
def test_arbitrary_bytes_give_an_envelope_or_unreadable(value, headers):
    _decode(value, headers)


@pytest.mark.deep
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=json_values, headers=header_maps, message_id=st.uuids().map(str) | st.text(max_size=40))
def test_arbitrary_json_gives_an_envelope_or_unreadable(payload, headers, message_id):
    if isinstance(payload, dict):
        payload = {**payload, "MessageId": message_id}
    envelope = _decode(json.dumps(payload).encode(), headers)
    if envelope is not None:
        assert not _holds_nul(payload)  # a NUL anywhere (a key or a string, at any depth) is never readable


def _holds_nul(node: Any) -> bool:
    if isinstance(node, str):
        return "\x00" in node
    if isinstance(node, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_holds_nul(item) for item in node)
    return False


@settings(max_examples=50, deadline=None)
@given(depth=st.integers(min_value=1_025, max_value=200_000), opener=st.sampled_from([b"[", b'{"a":']))
def test_nesting_deeper_than_the_bound_is_unreadable_not_a_recursion_error(depth, opener):
    closer = b"]" if opener == b"[" else b"}"
    value = b'{"MessageId": ' + opener * depth + b"1" + closer * depth + b"}"
    with pytest.raises(UnreadableMessageError, match="not JSON"):
        decode_envelope(value, {"message-id": str(uuid.uuid4())}, max_bytes=None)


def test_a_value_over_the_bound_is_unreadable_before_it_is_parsed():
    value = b'{"MessageId": "' + str(uuid.uuid4()).encode() + b'", "Padding": "' + b"x" * BOUND + b'"}'
    with pytest.raises(UnreadableMessageError, match="more than the 1000000"):
        decode_envelope(value, {}, max_bytes=BOUND)


@pytest.mark.parametrize(
    ("occurred_at", "readable"),
    [("2026-12-01T07:00:00Z", True), ("2026-12-01T10:00:00.123+03:00", True), ("yesterday", False),
     ("2026-12-01T07:00:00", False), ("2026-12-01", False), (1764572400, False), ("9999-12-31T23:59:59Z", False)],
)  # fmt: skip
def test_occurred_at_must_be_rfc_3339_with_an_offset(occurred_at, readable):
    value = json.dumps({"MessageId": str(uuid.uuid4()), "OccurredAt": occurred_at}).encode()
    assert (_decode(value, {}) is not None) is readable


@pytest.mark.parametrize(
    ("occurred_at", "readable"),
    [("2026-12-01T07:00:00.123456789Z", True), ("2026-12-01T07:00:00.1234567890Z", False),
     ("\u0662\u0660\u0662\u0666-12-01T07:00:00Z", False)],
)  # fmt: skip
def test_occurred_at_takes_the_api_bodies_rfc_3339_rule_at_most_nanoseconds_and_ascii_digits(occurred_at, readable):
    value = json.dumps({"MessageId": str(uuid.uuid4()), "OccurredAt": occurred_at}).encode()
    assert (_decode(value, {}) is not None) is readable


def _valid_payloads() -> list[tuple[str, str, dict[str, Any]]]:
    people = {"tenant": uuid.uuid4(), "agent": uuid.uuid4(), "investor": uuid.uuid4()}
    events = {
        topics.APPOINTMENT_CANCELLED: cancelled(**people, reason="Expired"),
        topics.APPOINTMENT_CREATED: created(**people),
        topics.APPOINTMENT_CONFIRMED: confirmed(**people, appointment=uuid.uuid4()),
        topics.PURCHASE_CHANGED: purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[]),
    }
    return [
        (group, topic, events[topic])
        for group in topics.CONSUMER_GROUPS
        for topic in routes_of(group)
        if topic in events
    ]


VALID = _valid_payloads()


@pytest.mark.deep
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(VALID), data=st.data(), replacement=json_values)
def test_any_field_replaced_by_any_json_is_parsed_or_unreadable(case, data, replacement):
    group, topic, payload = case
    field = data.draw(st.sampled_from(sorted(payload)))
    value = json.dumps({**payload, field: replacement}).encode()
    envelope = _decode(value, {})
    if envelope is None:
        return
    with contextlib.suppress(UnreadableMessageError):
        routes_of(group)[topic].parse_or_unreadable(envelope.payload)
