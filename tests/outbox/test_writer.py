"""Every path that writes outbox rows writes the same bytes for the same row (what the relay reads and sends)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

from pin.calendar import repository as calendar_repository
from pin.db import Conn
from pin.outbox.writer import RELAY_POLICY, MessageContext, build_rows, kafka_value, outbox_insert
from pin.promotion import repository as promotion_repository
from pin.unit_of_work import UnitOfWork
from tests.calendar.worker.factory import seed_appointments
from tests.outbox.support import ThingHappened
from tests.promotion.support import db_now, seed_purchases
from tests.support.deep import examples

# What the relay reads of a row (outbox_read_owned) and the columns it does not send but keeps.
_READ_BACK = """
SELECT message_id::text, vpart, topic, message_key, event_type, contract_version, payload::text, headers::text,
       occurred_at
  FROM outbox.message WHERE message_key = %s AND event_type = 'pin.test.thing-happened'
"""
_CONTEXT = MessageContext(
    "run-\u00e9",
    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    extra_headers={"x-extra": 'quote " and \\ slash'},
)
_OCCURRED_AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _event(key: str) -> ThingHappened:
    """An event with what JSON encoders disagree on: non-ASCII, escapes, a line separator, a big number."""
    return ThingHappened(thing_id=key, seq=2**53 + 1, blob="caf\u00e9 \u2028 \u00fc\n\t</script>")


def _stored(conn: Conn, key: str) -> dict[str, Any]:
    """The one row of ``key`` as stored, its MessageId (random per row) masked."""
    (row,) = conn.execute(_READ_BACK, (key,)).fetchall()
    stored = dict(row)
    message_id = stored.pop("message_id")
    stored["payload"] = stored["payload"].replace(message_id, "<MessageId>")
    return stored


def _rolled_back(pool: ConnectionPool[Conn], key: str, write: Callable[[Conn], None]) -> dict[str, Any]:
    """The row of ``key`` as ``write`` stores it, in a transaction that is then rolled back."""
    with pool.connection() as conn:
        write(conn)
        stored = _stored(conn, key)
        conn.rollback()
    return stored


def test_the_unit_of_work_the_calendar_write_and_the_promotion_batch_write_store_the_same_bytes(
    pool: ConnectionPool[Conn],
) -> None:
    (appointment,) = seed_appointments(pool, 1)
    (purchase,) = seed_purchases(pool, ends_at=db_now(pool) - timedelta(minutes=1))
    # keyed by the purchase: the promotion statement inserts the rows of the purchases it changed, by their key
    event = _event(str(purchase.id))
    (row,) = build_rows(*event.recorded(), occurred_at=_OCCURRED_AT, context=_CONTEXT, policy=RELAY_POLICY)
    key = row.key

    def by_calendar_cluster_write(conn: Conn) -> None:
        cluster = calendar_repository.appointment_cluster_lock(conn, appointment.appointment_id)
        assert cluster is not None
        calendar_repository.cluster_save(conn, cluster, [row])  # nothing changed: only the outbox row

    def by_promotion_batch_write(conn: Conn) -> None:
        current = promotion_repository.purchase_get(conn, purchase.id, purchase.tenant_id, lock=True)
        assert current is not None
        expected_version = current.version
        current.expire(db_now(pool))
        changed = promotion_repository.purchase_expire_many(conn, [(current, expected_version)], [row])
        assert changed == {current.id}

    reference = _rolled_back(pool, key, lambda conn: outbox_insert(conn, [row]))
    assert "caf\u00e9" in reference["payload"]
    with UnitOfWork(pool, _CONTEXT, outbox=RELAY_POLICY) as uow:
        uow.record(*event.recorded(), _OCCURRED_AT)
        uow.commit()
    with pool.connection() as conn:
        by_unit_of_work = _stored(conn, key)
        conn.execute("DELETE FROM outbox.message WHERE message_key = %s AND topic = %s", (key, row.topic))
    assert by_unit_of_work == reference
    assert _rolled_back(pool, key, by_calendar_cluster_write) == reference
    assert _rolled_back(pool, key, by_promotion_batch_write) == reference


def _reference_value(payload: object) -> str:
    """The value as it was always encoded: keys in jsonb's order (shorter first, then bytewise), a float with an
    exponent and no fraction as its integer, the standard library's compact UTF-8 JSON of that."""

    def form(value: object) -> object:
        if isinstance(value, dict):
            keys = sorted(value, key=lambda key: (len(key.encode("utf-8")), key.encode("utf-8")))
            return {key: form(value[key]) for key in keys}
        if isinstance(value, list):
            return [form(item) for item in value]
        if isinstance(value, float) and value.is_integer() and "e" in repr(value):
            return int(value)
        return value

    return json.dumps(form(payload), separators=(",", ":"), ensure_ascii=False)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@pytest.mark.deep
@settings(max_examples=examples(500), deadline=None)
@given(st.dictionaries(st.text(max_size=8), _JSON, max_size=6))
def test_the_kafka_value_is_the_standard_library_text_of_the_payload_in_jsonb_order(payload: dict[str, Any]) -> None:
    # orjson writes the usual payload; floats, integers beyond 64 bits and lone surrogates keep the old text
    assert kafka_value(payload) == _reference_value(payload)


class _Colour(StrEnum):
    RED = "red"


def test_a_str_subclass_is_written_as_its_text_and_a_uuid_is_refused_as_before() -> None:
    assert kafka_value({"Colour": _Colour.RED, "Big": 2**70}) == '{"Big":1180591620717411303424,"Colour":"red"}'
    with pytest.raises(TypeError):
        kafka_value({"Id": uuid.uuid4()})
