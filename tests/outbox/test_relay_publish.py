"""The relay against a real PostgreSQL and a real broker: envelope, dead letters, retries, wake-up, --once."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.relay import OutboxRelay, metrics
from pin.settings import Settings
from tests.outbox.support import (
    RELAY_TEST_ENV,
    TOPIC,
    FailOnce,
    broker_settings,
    duplicates,
    event_row,
    first_seqs_by_key,
    insert_rows,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration


def test_publishes_key_value_and_headers_then_deletes_the_row(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    [row] = insert_rows(database_url, [event_row("thing-1", 1)])
    relay = new_relay(settings)
    assert len(relay.heartbeat()) == 64  # alone: every vpart
    published_before = metrics.PUBLISHED.labels(topic=TOPIC)._value.get()
    stored = scalar(database_url, "SELECT payload FROM outbox.message")  # as psycopg decodes the jsonb column

    cycle = relay.run_once()

    assert (cycle.read, cycle.published, cycle.failed) == (1, 1, 0)
    assert outbox_count(database_url) == 0
    assert metrics.PUBLISHED.labels(topic=TOPIC)._value.get() == published_before + 1
    [record] = read_topic(kafka.bootstrap_servers, TOPIC, expected=1)
    assert record.key == "thing-1"
    assert record.json() == json.loads(json.dumps(dict(row.payload)))
    assert record.json()["MessageId"] == str(row.message_id)
    assert b" " not in record.value  # compact JSON
    # byte for byte what the relay sent when it decoded the jsonb column and re-encoded it
    assert record.value == json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()
    assert record.headers["message-id"] == str(row.message_id)
    assert record.headers["contract-version"] == "1"
    assert record.headers["event-type"] == "pin.test.thing-happened"
    assert record.headers["correlation-id"] == "test-run"
    assert record.headers["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    relay.release_all()


def test_a_permanently_failing_row_is_dead_lettered_and_holds_back_its_key_only(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    too_large, held, other = insert_rows(
        database_url,
        [
            event_row("poisoned", 1, blob="x" * 1_200_000),  # above the broker's message.max.bytes
            event_row("poisoned", 2),
            event_row("healthy", 1),
        ],
    )
    relay = new_relay(settings)
    relay.heartbeat()
    dead_before = metrics.DEAD_LETTERED.labels(topic=TOPIC)._value.get()

    first = relay.run_once()

    assert (first.published, first.dead_lettered, first.held_back) == (1, 1, 1)
    dead = scalar(database_url, "SELECT row_to_json(d) FROM outbox.dead_letter d WHERE id IS NOT NULL")
    assert isinstance(dead, dict)
    assert dead["message_id"] == str(too_large.message_id)
    assert dead["permanent"] is True
    assert "MSG_SIZE_TOO_LARGE" in dead["error"]
    assert metrics.DEAD_LETTERED.labels(topic=TOPIC)._value.get() == dead_before + 1
    # the key's later row waits behind its dead letter, while other keys go on flowing
    assert relay.run_once().read == 0
    [late] = insert_rows(database_url, [event_row("healthy", 2)])
    assert relay.run_once().published == 1
    assert scalar(database_url, "SELECT message_id FROM outbox.message") == held.message_id
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=None, idle=1.5)
    assert {r.headers["message-id"] for r in records} == {str(other.message_id), str(late.message_id)}
    relay.release_all()


def test_a_later_row_never_overtakes_an_earlier_one_waiting_for_a_retry(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    first, second, other = insert_rows(
        database_url, [event_row("retried", 1), event_row("retried", 2), event_row("bystander", 1)]
    )
    relay = new_relay(settings, hooks=FailOnce(first.message_id), backoff_base_seconds=0.5)
    relay.heartbeat()

    failed = relay.run_once()

    # in the same batch: the second row of the key is held back, the other key is published
    assert (failed.read, failed.published, failed.failed, failed.held_back) == (3, 1, 1, 1)
    attempts = scalar(database_url, "SELECT attempts FROM outbox.message WHERE message_id = %s", [first.message_id])
    assert attempts == 1
    # in the next batch: the first row is in backoff, so the guard keeps the second one out of the read
    assert relay.run_once().read == 0
    # once the backoff is over, both go out, in order
    wait_for(lambda: relay.run_once().published > 0 and outbox_count(database_url) == 0, timeout=10, what="retry")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=3)
    assert first_seqs_by_key(records) == {"retried": [1, 2], "bystander": [1]}
    assert [r.headers["message-id"] for r in records if r.key == "retried"] == [
        str(first.message_id),
        str(second.message_id),
    ]
    assert other.message_id
    relay.release_all()


def test_a_failure_in_a_pipelined_batch_holds_the_later_rows_of_its_key_and_nothing_is_deleted_before_its_ack(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    # ids in this order; batches of 4: [x1 x2 x3 a1] then [a2 y1 a3]
    rows = insert_rows(
        database_url,
        [
            event_row("x1", 1),
            event_row("x2", 1),
            event_row("x3", 1),
            event_row("a", 1),
            event_row("a", 2),
            event_row("y1", 1),
            event_row("a", 3),
        ],
    )
    a1 = rows[3]
    relay = new_relay(settings, hooks=FailOnce(a1.message_id), batch_size=4, backoff_base_seconds=2.0)
    relay.heartbeat()

    first = relay.pipeline.step()  # batch 1 handed to the producer, not awaited

    assert (first.read, first.published) == (4, 0)
    assert outbox_count(database_url) == 7  # nothing deleted before its ack

    second = (
        relay.pipeline.step()
    )  # reads batch 2 while batch 1 is in flight, then hands batch 1 to the settling thread

    # batch 2 left out batch 1's rows and held back a's later rows (a1 was in flight, it may yet fail)
    assert (second.read, second.held_back) == (3, 2)
    settled = relay.pipeline.settle_all()  # waits for batch 1's settling, then finishes batch 2 (y1)

    # a1 failed (in backoff, its later rows still waiting); x1..x3 and y1 were acknowledged, then deleted
    assert (settled.published + second.published, settled.failed + second.failed) == (4, 1)
    left = scalar(database_url, "SELECT array_agg(message_key ORDER BY id) FROM outbox.message")
    assert left == ["a", "a", "a"]
    assert scalar(database_url, "SELECT attempts FROM outbox.message WHERE message_id = %s", [a1.message_id]) == 1
    relay.heartbeat()  # the leases are fresh: what the read leaves out, the guard leaves out
    assert relay.pipeline.step().read == 0  # a1 in backoff: the guard keeps a2 and a3 out of the read
    early = read_topic(kafka.bootstrap_servers, TOPIC, expected=None, idle=1.0, timeout=10)
    assert sorted(str(r.key) for r in early) == ["x1", "x2", "x3", "y1"]  # nothing of a yet

    def drained() -> bool:
        relay.heartbeat()  # no heartbeat thread here: keep the leases (TTL 3 s) while the backoff runs out
        relay.pipeline.step()
        relay.pipeline.settle_all()
        return outbox_count(database_url) == 0

    wait_for(drained, timeout=15, what="the retry")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=7)
    assert first_seqs_by_key(records)["a"] == [1, 2, 3]
    assert duplicates(records) == 0
    relay.release_all()


def _relay_env(kafka: EmbeddedKafka, **extra: str) -> dict[str, str]:
    return {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **RELAY_TEST_ENV, **extra}


@pytest.mark.parametrize("in_flight", ["2", "4"])
def test_relay_once_publishes_what_is_there_and_exits_0(
    in_flight: str,
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    rows = insert_rows(database_url, [event_row(f"key-{n % 3}", n // 3 + 1) for n in range(30)])

    # three keys, batches of 7: after the first batch every read finds only rows held behind a key in flight,
    # and with room for more batches in flight the relay must still finish one (it used to spin for ever)
    env = _relay_env(kafka, PIN_RELAY_BATCH_SIZE="7", PIN_RELAY_BATCHES_IN_FLIGHT=in_flight)
    role = spawn_role("relay", "--once", env=env)

    assert role.wait(60) == 0, role.output()
    totals = json.loads(next(line for line in role.output().splitlines() if line.startswith('{"cycles"')))
    assert totals["published"] == 30
    assert outbox_count(database_url) == 0
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_lease WHERE owner IS NOT NULL") == 0
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_instance") == 0
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=30)
    assert {r.headers["message-id"] for r in records} == {str(r.message_id) for r in rows}
    assert first_seqs_by_key(records) == {f"key-{k}": list(range(1, 11)) for k in range(3)}


def test_a_committed_row_reaches_the_broker_within_a_fraction_of_a_second(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    # polling every 30 s: only the NOTIFY wake-up can explain a fast delivery
    role = spawn_role("relay", env=_relay_env(kafka, PIN_RELAY_POLL_INTERVAL_SECONDS="30"))
    owned = "SELECT count(*) FROM outbox.relay_lease_state WHERE live"
    wait_for(lambda: scalar(database_url, owned) == 64, timeout=60, what="the relay owns every vpart")
    insert_rows(database_url, [event_row("warm-up", 1)])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=20, what="warm-up published")

    delays = []
    for seq in range(2, 5):
        insert_rows(database_url, [event_row("warm-up", seq)])
        delays.append(
            wait_for(lambda: outbox_count(database_url) == 0, timeout=5, what="row published", interval=0.005)
        )

    print(f"commit -> acknowledged and deleted: {[round(d, 3) for d in delays]} s")
    # a fraction of a second (the bound leaves room for a loaded CI machine; typically ~20 ms)
    assert max(delays) < 1.0, delays
    assert len(read_topic(kafka.bootstrap_servers, TOPIC, expected=4)) == 4
    assert role.terminate() == 0
    # graceful stop: the leases are given back at once, not left to expire
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_lease WHERE owner IS NOT NULL") == 0
    assert "outbox relay stopped" in role.output()


def test_a_relay_not_allowed_to_create_topics_still_publishes_to_existing_ones(
    new_relay: Callable[..., OutboxRelay],
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    [row] = insert_rows(database_url, [event_row("fine", 1)])
    refusals: list[str] = []

    def refuse(topic: str) -> None:
        refusals.append(topic)
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    relay = new_relay(settings, ensure_topic=refuse)
    relay.heartbeat()

    cycle = relay.run_once()

    assert refusals == [TOPIC]
    assert (cycle.published, cycle.dead_lettered) == (1, 0)
    [record] = read_topic(kafka.bootstrap_servers, TOPIC, expected=1)
    assert record.headers["message-id"] == str(row.message_id)
    relay.release_all()
