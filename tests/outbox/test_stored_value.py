"""The row's stored value: written once by the writer's one insert (the unit of work's, and the fragment a set-based
statement embeds), sent by the relay as is, and byte for byte what the relay sent when it re-encoded the jsonb
payload; a row without one (written before the column existed) gets the same bytes from the same encoder."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from pin.db import connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.relay import OutboxRelay
from pin.outbox.writer import (
    RELAY_POLICY,
    MessageContext,
    OutboxRow,
    build_rows,
    insert_unnest_params,
    insert_unnest_sql,
    insert_values_params,
    insert_values_sql,
    outbox_insert,
)
from pin.settings import Settings
from tests.outbox.support import TOPIC, ThingHappened, broker_settings
from tests.support.kafka import read_topic

pytestmark = pytest.mark.integration

# keys out of jsonb's order (shorter first, then bytewise), non-ASCII text, escapes, nesting, a float PostgreSQL
# prints as an integer
_PAYLOAD: dict[str, object] = {
    "ThingId": "",
    "Seq": 1,
    "Zoë ✓": 'quote " backslash \\ newline \n ctl \u0001 𝄞',
    "b": [1, -2, 3.5, 1e-07, 1e16, True, None, {"long key": {}, "k": []}],
    "Blob": "",
    "a": {"zz": 1, "y": 2},
}


def _row(key: str) -> OutboxRow:
    context = MessageContext("test-run")
    (row,) = build_rows(
        ThingHappened,
        key,
        {**_PAYLOAD, "ThingId": key},
        occurred_at=datetime.now(UTC),
        context=context,
        policy=RELAY_POLICY,
    )
    return row


def test_the_stored_value_of_every_insert_path_is_what_reaches_the_broker_and_what_the_relay_always_sent(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    single, values_row, kept, dropped, replayed = _row("one"), _row("two"), _row("three"), _row("five"), _row("four")
    with connect(database_url) as conn:
        outbox_insert(conn, [single, replayed])
        conn.execute(insert_values_sql(1), insert_values_params([values_row]))  # type: ignore[arg-type]
        # the fragment of a set-based statement, keeping the rows of the keys it changed
        conn.execute(
            insert_unnest_sql(where="m.message_key = 'three'"),  # type: ignore[arg-type]
            insert_unnest_params([kept, dropped]),
        )
        # a row put back from the dead letters has no stored value: the relay encodes its payload
        conn.execute("UPDATE outbox.message SET value = NULL WHERE message_id = %s", (replayed.message_id,))
        stored = {
            str(row["message_id"]): row
            for row in conn.execute("SELECT message_id, value, payload::text AS payload FROM outbox.message")
        }
        conn.commit()
    relay = new_relay(broker_settings(make_settings, kafka.bootstrap_servers))
    relay.heartbeat()

    cycle = relay.run_once()

    assert (cycle.read, cycle.published) == (4, 4)
    records = {r.headers["message-id"]: r for r in read_topic(kafka.bootstrap_servers, TOPIC, expected=4)}
    assert set(records) == set(stored) == {str(r.message_id) for r in (single, values_row, kept, replayed)}
    for message_id, row in stored.items():
        # what the relay sent before the value was stored: the jsonb column decoded and re-encoded
        reencoded = json.dumps(json.loads(str(row["payload"])), separators=(",", ":"), ensure_ascii=False)
        assert records[message_id].value == reencoded.encode()
        if message_id != str(replayed.message_id):
            assert records[message_id].value == str(row["value"]).encode()
    assert stored[str(replayed.message_id)]["value"] is None
    relay.release_all()
