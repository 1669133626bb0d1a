"""A stop reaches a consumer's statement in flight (seed 000, "Cancellation"): a real `pin consume crm` whose
transaction waits in a trigger that sleeps receives SIGTERM; the transaction rolls back whole, what was applied
before it is committed (its offset too), and it exits 0 within 3 s."""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from pin.messaging import topics
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import cancelled, feed_entries, rows, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.deep(only=True)]

TOPIC = topics.APPOINTMENT_CANCELLED


def _committed(bootstrap: str, partition: int) -> int:
    """crm's committed offset of one partition of TOPIC (negative when none), read without joining."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "crm", "enable.auto.commit": False})
    try:
        [tp] = reader.committed([TopicPartition(TOPIC, partition)], timeout=10)
        return int(tp.offset)
    finally:
        reader.close()


def test_sigterm_cancels_the_transaction_in_flight_and_commits_what_was_applied(
    spawn_role, kafka, pool, settings, producer
):
    def event() -> dict[str, object]:
        return cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")

    applied, blocked = event(), event()
    with pool.connection() as conn:  # the second message's feed entry sleeps 20 s in a trigger
        conn.execute(
            "CREATE FUNCTION public.test_slow_entry() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM pg_sleep(20); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER test_slow_entry BEFORE INSERT ON crm.lead_feed_entry FOR EACH ROW"
            f" WHEN (NEW.appointment_id = '{blocked['AppointmentId']}') EXECUTE FUNCTION public.test_slow_entry()"
        )
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_KAFKA_SESSION_TIMEOUT_MS": str(FAST_SESSION_TIMEOUT_MS),
    }
    consumer = spawn_role("consume", "crm", env=env)
    key = "one-partition"  # both on one partition: the second behind the first
    producer.send(TOPIC, applied, key=key)
    wait_for(lambda: feed_entries(pool, applied["AppointmentId"]), timeout=60, what="the first message applied")
    producer.send(TOPIC, blocked, key=key)
    sleeping = (
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"
        " AND state = 'active'"
    )
    wait_for(lambda: rows(pool, sleeping), what="the second message's transaction to sleep in its trigger")

    started = time.monotonic()
    consumer.process.send_signal(signal.SIGTERM)
    code = consumer.wait(15)
    took = time.monotonic() - started

    assert code == 0, consumer.output()
    assert took < 3.0
    lines = [json.loads(line) for line in consumer.output().splitlines() if line.startswith("{")]
    (line,) = [entry for entry in lines if str(entry.get("event", "")).startswith("consumer stopping")]
    assert (line["messages"], line["first_offset"]) == (1, 1)
    failures = ("message failed", "batch failed; handling its messages one by one")
    assert not [entry for entry in lines if entry.get("event") in failures]
    # the first applied and committed; the second rolled back whole (no feed entry, no inbox row) and not committed
    assert len(feed_entries(pool, applied["AppointmentId"])) == 1
    assert feed_entries(pool, blocked["AppointmentId"]) == []
    assert rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", blocked["MessageId"]) == []
    partition = line["partition"]
    assert _committed(kafka.bootstrap_servers, partition) == 1
    assert rows(pool, "SELECT 1 FROM crm.lead_feed_entry FOR UPDATE NOWAIT")  # no lock left behind
