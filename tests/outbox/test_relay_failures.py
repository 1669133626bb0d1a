"""The relay through broker and database failures: rows stay, metrics grow, everything drains after."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox import metrics
from pin.outbox.relay import OutboxRelay
from pin.outbox.relay import metrics as relay_metrics
from pin.settings import Settings
from tests.outbox.support import (
    TOPIC,
    broker_settings,
    drop_producer,
    event_row,
    first_seqs_by_key,
    insert_rows,
    make_relay,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.kafka import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def running_relay(
    pool: ConnectionPool[Conn], kafka: EmbeddedKafka, make_settings: Callable[..., Settings]
) -> Iterator[OutboxRelay]:
    """An in-process relay running its loop in a thread (so the test can read its metrics)."""
    settings = broker_settings(make_settings, kafka.bootstrap_servers)
    relay = make_relay(pool, settings, message_timeout_ms=2000, backoff_max_seconds=1.0, gauge_refresh_seconds=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,), daemon=True)
    thread.start()
    yield relay
    kafka.resume()  # a paused broker must not hold the final flush
    stop.set()
    thread.join(30)
    assert not thread.is_alive()
    drop_producer(relay)


def test_a_paused_broker_keeps_rows_in_the_outbox_and_they_drain_when_it_returns(
    running_relay: OutboxRelay, database_url: str, kafka: EmbeddedKafka
) -> None:
    before = insert_rows(database_url, [event_row(f"thing-{n}", 1) for n in range(10)])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=15, what="published while the broker is up")
    errors_before = relay_metrics.PUBLISH_ERRORS.labels(topic=TOPIC)._value.get()

    kafka.pause()
    during = insert_rows(database_url, [event_row(f"thing-{n % 10}", n // 10 + 2) for n in range(200)])
    failed = "SELECT count(*) FROM outbox.message WHERE attempts > 0"
    wait_for(lambda: scalar(database_url, failed) > 0, timeout=20, what="sends failing and backing off")
    assert outbox_count(database_url) == 200  # nothing is deleted without an ack
    assert relay_metrics.PUBLISH_ERRORS.labels(topic=TOPIC)._value.get() > errors_before
    wait_for(lambda: metrics.BACKLOG.labels(topic=TOPIC)._value.get() == 200, timeout=10, what="backlog gauge")
    wait_for(lambda: metrics.LAG.labels(topic=TOPIC)._value.get() > 0.5, timeout=10, what="the topic's lag grows")
    kafka.resume()

    wait_for(lambda: outbox_count(database_url) == 0, timeout=40, what="the backlog drains after the broker returns")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=None, idle=2.0, timeout=40)
    assert {r.headers["message-id"] for r in records} == {str(r.message_id) for r in before + during}
    assert first_seqs_by_key(records) == {f"thing-{k}": list(range(1, 22)) for k in range(10)}
    wait_for(lambda: metrics.BACKLOG.labels(topic=TOPIC)._value.get() == 0, timeout=10, what="backlog back to 0")


def test_the_relay_reconnects_after_its_database_connections_are_killed(
    running_relay: OutboxRelay, database_url: str, kafka: EmbeddedKafka
) -> None:
    first = insert_rows(database_url, [event_row(f"thing-{n}", 1) for n in range(5)])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=15, what="published before the outage")

    with connect(database_url, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None
    assert int(str(killed["n"])) >= 2  # the pool's and the LISTEN connection at least
    second = insert_rows(database_url, [event_row(f"thing-{n}", 2) for n in range(5)])

    wait_for(lambda: outbox_count(database_url) == 0, timeout=20, what="published after reconnecting")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=10)
    assert {r.headers["message-id"] for r in records} == {str(r.message_id) for r in first + second}
    # the relay still holds its leases (the heartbeat reconnected too)
    wait_for(lambda: len(running_relay.owned_vparts()) == 64, timeout=10, what="leases renewed")
