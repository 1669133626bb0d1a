"""`pin outbox dead-letters list|replay|discard`: an operator unblocks a key held behind a dead letter."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pin.db import connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.relay import OutboxRelay
from pin.settings import Settings
from tests.outbox.support import (
    TOPIC,
    broker_settings,
    event_row,
    insert_rows,
    outbox_count,
    scalar,
)
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration


def _cli(spawn_role: Callable[..., RoleProcess], *args: str) -> tuple[int, list[str]]:
    role = spawn_role(*args)
    code = role.wait(60)
    return code, [line for line in role.output().splitlines() if line.startswith("{")]


def test_replaying_a_dead_letter_puts_it_back_at_the_head_of_its_key(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    first, second = insert_rows(database_url, [event_row("blocked", 1), event_row("blocked", 2)])
    with connect(database_url) as conn:  # as the relay does after a rejection whose cause is since fixed
        conn.execute(
            "WITH moved AS (DELETE FROM outbox.message WHERE message_id = %s RETURNING *) "
            "INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, "
            "contract_version, payload, headers, occurred_at, created_at, attempts, error) "
            "SELECT id, message_id, vpart, topic, message_key, event_type, contract_version, payload, headers, "
            "occurred_at, created_at, 10, 'REQUEST_TIMED_OUT: simulated' FROM moved",
            [first.message_id],
        )
        conn.commit()
    relay = new_relay(settings)
    relay.heartbeat()
    assert relay.run_once().read == 0  # the second row waits behind the dead letter

    code, lines = _cli(spawn_role, "outbox", "dead-letters", "list")
    assert code == 0
    [letter] = [json.loads(line) for line in lines]
    assert (letter["message_id"], letter["held_back"], letter["topic"]) == (str(first.message_id), 1, TOPIC)
    assert "payload" not in letter
    code, lines = _cli(spawn_role, "outbox", "dead-letters", "replay", str(first.message_id), "--reason", "fixed")
    assert code == 0, lines
    assert json.loads(lines[-1])["replayed"] == [str(first.message_id)]

    relay.heartbeat()  # the leases (3 s) may have expired while the commands ran: take them again
    assert relay.run_once().published == 2
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=2)
    assert [r.headers["message-id"] for r in records] == [str(first.message_id), str(second.message_id)]
    assert scalar(database_url, "SELECT count(*) FROM outbox.dead_letter") == 0
    code, _ = _cli(spawn_role, "outbox", "dead-letters", "replay", str(first.message_id), "--reason", "again")
    assert code == 1  # no such dead letter any more
    relay.release_all()


def test_discarding_a_dead_letter_lets_its_key_flow_again(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    poison, after = insert_rows(database_url, [event_row("k", 1, blob="x" * 1_200_000), event_row("k", 2)])
    relay = new_relay(settings)
    relay.heartbeat()
    assert relay.run_once().dead_lettered == 1
    assert relay.run_once().read == 0

    code, lines = _cli(spawn_role, "outbox", "dead-letters", "discard", str(poison.message_id), "--reason", "too large")

    assert code == 0, lines
    relay.heartbeat()
    assert relay.run_once().published == 1
    assert outbox_count(database_url) == 0
    [record] = read_topic(kafka.bootstrap_servers, TOPIC, expected=1)
    assert record.headers["message-id"] == str(after.message_id)
    relay.release_all()
