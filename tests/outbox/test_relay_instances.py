"""Several relay processes at once, kill -9 and handovers: per-key order and nothing lost (SPEC section 5)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from pin.db import connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.writer import OutboxRow, outbox_insert
from pin.settings import Settings
from tests.outbox.support import (
    RELAY_TEST_ENV,
    TOPIC,
    broker_settings,
    duplicates,
    event_row,
    first_seqs_by_key,
    insert_rows,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.kafka import Record, read_topic
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LIVE_OWNERS = "SELECT count(DISTINCT owner) FROM outbox.relay_lease_state WHERE live"
LIVE_LEASES = "SELECT count(*) FROM outbox.relay_lease_state WHERE live"


def _relay_env(kafka: EmbeddedKafka, **extra: str) -> dict[str, str]:
    return {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **RELAY_TEST_ENV, **extra}


def _write_concurrently(database_url: str, keys: list[str], events: int, writers: int) -> list[OutboxRow]:
    """Writers on their own connections bump an aggregate row (locking it) and insert its event, as use cases do."""
    with connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE test_thing (id text PRIMARY KEY, version integer NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO test_thing VALUES (%s, 0)", [(key,) for key in keys])
    written: list[OutboxRow] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with connect(database_url) as conn:
                for _ in range(events // writers):
                    key = rng.choice(keys)
                    record = conn.execute(
                        "UPDATE test_thing SET version = version + 1 WHERE id = %s RETURNING version", [key]
                    ).fetchone()
                    assert record is not None
                    row = event_row(key, int(str(record["version"])))
                    outbox_insert(conn, [row])
                    conn.commit()
                    with lock:
                        written.append(row)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return written


def test_three_relays_keep_per_key_commit_order_while_writers_insert_concurrently(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    relays = [spawn_role("relay", env=_relay_env(kafka, PIN_RELAY_BATCH_SIZE="50")) for _ in range(3)]
    # the vparts are shared: three owners, all 64 leased, a fair share each (ceil(64 / 3) = 22 at most); the
    # newest relay takes its share over a few heartbeats, so the shares are awaited, not sampled once
    shares_sql = "SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM outbox.relay_lease GROUP BY owner) s"

    def shared_fairly() -> bool:
        shares = scalar(database_url, shares_sql)
        return (
            scalar(database_url, LIVE_OWNERS) == 3
            and scalar(database_url, LIVE_LEASES) == 64
            and isinstance(shares, list)
            and len(shares) == 3
            and min(shares) >= 20
        )

    wait_for(
        shared_fairly,
        timeout=60,  # includes the processes' start (seconds on a loaded CI machine)
        what="three relays sharing the vparts fairly",
    )

    keys = [f"thing-{n}" for n in range(60)]
    written = _write_concurrently(database_url, keys, events=1200, writers=6)

    wait_for(lambda: outbox_count(database_url) == 0, timeout=60, what="the outbox drains")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=None, idle=2.0, timeout=60)
    assert {r.headers["message-id"] for r in records} == {str(row.message_id) for row in written}
    expected: dict[str, list[int]] = {}
    for row in written:
        expected.setdefault(row.key, []).append(int(str(row.payload["Seq"])))
    assert first_seqs_by_key(records) == {key: sorted(seqs) for key, seqs in expected.items()}
    for relay in relays:
        assert relay.process.poll() is None, relay.output()
        assert "outbox batch published" in relay.output()  # every instance did part of the work
    print(f"published {len(written)} events, {duplicates(records)} duplicates")


def _kill9_then_drain(
    database_url: str,
    kafka: EmbeddedKafka,
    spawn_role: Callable[..., RoleProcess],
    settings: dict[str, str],
    *,
    after_produce: int,
    what: str,
) -> tuple[list[Record], RoleProcess]:
    """A relay frozen after producing its ``after_produce``-th batch is killed with SIGKILL (its batches in hand
    never deleted), a second relay drains the outbox; the topic's records and the survivor."""
    fault = f"after-produce:{after_produce}"
    victim = spawn_role("relay", env=_relay_env(kafka, **settings, PIN_RELAY_TEST_FAULT=fault))
    wait_for(lambda: "relay test fault: paused" in victim.output(), timeout=60, what=f"the victim {what}")
    victim.kill9()
    assert outbox_count(database_url) > 0  # its batches in hand were never deleted
    survivor = spawn_role("relay", env=_relay_env(kafka, **settings))
    wait_for(lambda: outbox_count(database_url) == 0, timeout=60, what="the survivor drains the outbox")
    return read_topic(kafka.bootstrap_servers, TOPIC, expected=None, idle=2.0, timeout=30), survivor


def test_kill9_in_the_middle_of_a_batch_loses_nothing_and_keeps_order(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    written = insert_rows(database_url, [event_row(f"thing-{n % 25}", n // 25 + 1) for n in range(300)])
    # the victim freezes after handing its second batch to the producer, before the flush and the delete
    records, survivor = _kill9_then_drain(
        database_url, kafka, spawn_role, {"PIN_RELAY_BATCH_SIZE": "50"}, after_produce=2, what="mid-batch"
    )
    assert {r.headers["message-id"] for r in records} == {str(row.message_id) for row in written}
    assert first_seqs_by_key(records) == {f"thing-{k}": list(range(1, 13)) for k in range(25)}
    # only the batches in hand at the crash can be sent twice (at most batches in flight + 1: three by default)
    assert duplicates(records) <= 150, duplicates(records)
    print(f"duplicates after kill -9 mid-batch: {duplicates(records)}")
    assert survivor.process.poll() is None


def test_kill9_with_a_full_pipeline_resends_at_most_the_unsettled_batches(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    # 250 keys of two rows each: the first five batches of 50 hold distinct keys, so nothing is held back and the
    # pipeline fills: four batches in flight, the oldest of them acknowledged, one settling
    written = insert_rows(database_url, [event_row(f"thing-{n % 250}", n // 250 + 1) for n in range(500)])
    in_flight = 4
    settings = {"PIN_RELAY_BATCH_SIZE": "50", "PIN_RELAY_BATCHES_IN_FLIGHT": str(in_flight)}
    records, survivor = _kill9_then_drain(
        database_url, kafka, spawn_role, settings, after_produce=in_flight + 1, what="with a full pipeline"
    )
    assert {r.headers["message-id"] for r in records} == {str(row.message_id) for row in written}
    assert first_seqs_by_key(records) == {f"thing-{k}": [1, 2] for k in range(250)}
    # what a crash can send twice: the unsettled batches, at most batches in flight + 1 (the one settling)
    assert duplicates(records) <= (in_flight + 1) * 50, duplicates(records)
    print(f"duplicates after kill -9 with {in_flight} batches in flight: {duplicates(records)}")
    assert survivor.process.poll() is None


def test_a_crash_between_the_ack_and_the_delete_sends_the_same_message_ids_again(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    written = insert_rows(database_url, [event_row(f"thing-{n % 4}", n // 4 + 1) for n in range(12)])
    victim = spawn_role("relay", env=_relay_env(kafka, PIN_RELAY_TEST_FAULT="after-ack:1"))
    wait_for(lambda: "relay test fault: paused" in victim.output(), timeout=60, what="the victim after the ack")
    # the broker has the whole batch, the outbox still has every row
    assert len(read_topic(kafka.bootstrap_servers, TOPIC, expected=12)) == 12
    assert outbox_count(database_url) == 12
    victim.kill9()

    spawn_role("relay", env=_relay_env(kafka))
    wait_for(lambda: outbox_count(database_url) == 0, timeout=60, what="the second relay publishes again")

    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=24, timeout=30)
    assert len(records) == 24
    ids = [r.headers["message-id"] for r in records]
    assert {message_id: ids.count(message_id) for message_id in ids} == {str(row.message_id): 2 for row in written}
    by_id: dict[str, bytes] = {}
    for record in records:  # the copy is the same message: same value, same key
        assert by_id.setdefault(record.headers["message-id"], record.value) == record.value
    assert first_seqs_by_key(records) == {f"thing-{k}": [1, 2, 3] for k in range(4)}


def test_the_vparts_of_a_dead_instance_are_taken_over_within_seconds(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    first = spawn_role("relay", env=_relay_env(kafka))
    spawn_role("relay", env=_relay_env(kafka))
    wait_for(
        lambda: scalar(database_url, LIVE_OWNERS) == 2 and scalar(database_url, LIVE_LEASES) == 64,
        timeout=60,  # includes the processes' start
        what="two relays sharing the vparts",
    )
    assert (
        scalar(database_url, "SELECT max(n) FROM (SELECT count(*) AS n FROM outbox.relay_lease GROUP BY owner) s") == 32
    )

    first.kill9()
    took = wait_for(
        lambda: scalar(database_url, LIVE_OWNERS) == 1 and scalar(database_url, LIVE_LEASES) == 64,
        timeout=15,
        what="the survivor owns every vpart",
    )

    assert took < 8.0, took  # lease TTL 3 s + heartbeat 0.5 s, with slack
    written = insert_rows(database_url, [event_row(f"thing-{n}", 1) for n in range(64)])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=10, what="every vpart is published again")
    records = read_topic(kafka.bootstrap_servers, TOPIC, expected=64)
    assert {r.headers["message-id"] for r in records} == {str(row.message_id) for row in written}
