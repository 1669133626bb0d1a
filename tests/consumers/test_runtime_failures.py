"""The consumer runtime under failure, against a real broker and PostgreSQL (SPEC section 7).

- a consumer killed (kill -9) after its effect committed and before its offset commit: redelivered, no
  second effect, and a graceful stop (SIGTERM) of the next one;
- the database unreachable for a while: retried, then applied exactly once, nothing dead-lettered;
- a deadlock on the same message six times in a row (more than the attempt limit): retried with back-off, never
  dead-lettered, then applied once (seed 003: a transient failure is retried; pin.faults);
- a handler failing on every attempt: N attempts, then the dead-letter topic with its provenance, the
  partition goes on; after the fix, `pin dlq replay` sends it back and it is applied once; `pin dlq list`
  (both commands run in process through the CLI runner).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from pin.cli import app
from pin.db import Conn, create_pool
from pin.messaging import topics
from pin.messaging.consumer.dead_letters.command import read_dead_letters, replay
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import (
    cancelled,
    feed_entries,
    in_inbox,
    metric,
    refuse_feed_entries,
    rows,
    running,
    wait_for,
)
from tests.support.contention import Background, arm_deadlocks, install_blocker, provoke_deadlocks
from tests.support.infra import TestDatabases

pytestmark = pytest.mark.integration


def _event(appointment: uuid.UUID | None = None) -> dict[str, object]:
    return cancelled(
        tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired", appointment=appointment
    )


@pytest.mark.slow
def test_kill_9_after_the_effect_before_the_offset_commit_redelivers_without_a_second_effect(
    spawn_role, kafka, pool, settings, producer
):
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_KAFKA_SESSION_TIMEOUT_MS": str(FAST_SESSION_TIMEOUT_MS),
    }
    doomed = spawn_role("consume", "crm", env={**env, "PIN_CONSUMER_TEST_FAULT": "hang-after-effect"})
    first = _event()
    producer.send(topics.APPOINTMENT_CANCELLED, first)
    wait_for(lambda: "hanging before offset commit" in doomed.output(), what="the effect to commit")
    assert len(feed_entries(pool, first["AppointmentId"])) == 1
    doomed.kill9()  # the offset of `first` was never committed

    successor = spawn_role("consume", "crm", env=env)
    # a second message on the same key, so on the same partition, behind the redelivered one
    second = _event()
    producer.send(topics.APPOINTMENT_CANCELLED, second, key=str(first["AppointmentId"]))
    wait_for(lambda: feed_entries(pool, second["AppointmentId"]), timeout=45, what="the successor to catch up")

    assert len(feed_entries(pool, first["AppointmentId"])) == 1
    assert len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", first["MessageId"])) == 1
    log = [json.loads(line) for line in successor.output().splitlines() if line.startswith("{")]
    assert any(r.get("event") == "duplicate message skipped" and r.get("message_id") == first["MessageId"] for r in log)

    assert successor.terminate() == 0  # graceful stop: finishes the message in hand, leaves the group
    assert "consumer stopped" in successor.output()


def test_database_unreachable_for_a_while_retries_then_applies_once(
    settings, database_url, pool, test_databases: TestDatabases, producer
):
    name = database_url.split("?", 1)[0].rsplit("/", 1)[1]
    consumer_pool = create_pool(database_url, min_size=1, max_size=2, name="outage")
    admin = psycopg.connect(test_databases.server_url, autocommit=True)
    retries_before = metric("pin_consumer_retries_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    try:
        with running("crm", settings, consumer_pool, db_timeout=0.5, max_attempts=2):
            warmup = _event()
            producer.send(topics.APPOINTMENT_CANCELLED, warmup)
            wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")

            # the outage: no new connections, and every open one cut
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            events = [_event() for _ in range(3)]
            for event in events:
                producer.send(topics.APPOINTMENT_CANCELLED, event)
            # more failed attempts than max_attempts: an outage never sends anything to the DLQ
            wait_for(
                lambda: (
                    metric("pin_consumer_retries_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
                    >= retries_before + 6
                ),
                what="retries during the outage",
            )
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')

            for event in events:
                wait_for(lambda e=event: feed_entries(pool, e["AppointmentId"]), what="the backlog after the outage")
    finally:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        admin.close()
        consumer_pool.close()

    for event in events:
        assert len(feed_entries(pool, event["AppointmentId"])) == 1
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED) == dead_before
    assert read_dead_letters(settings, ["crm"], idle_seconds=0.5) == []


def test_a_deadlock_six_times_in_a_row_is_retried_without_limit_never_dead_lettered_then_applied_once(
    settings, database_url, pool, test_databases: TestDatabases, producer
):
    """Each attempt at the message waits for the test's session to block on the message's inbox row, then asks for
    a row that session holds: a real deadlock, of which the consumer is the victim, six times (the limit is five)."""
    name = database_url.split("?", 1)[0].rsplit("/", 1)[1]
    install_blocker(database_url, table="crm.lead_feed_entry")  # the effect's INSERT waits for the blocker row
    with psycopg.connect(test_databases.server_url, autocommit=True) as admin:  # quicker deadlock detection
        admin.execute(f"ALTER DATABASE \"{name}\" SET deadlock_timeout = '500ms'")
    consumer_pool = create_pool(database_url, min_size=1, max_size=2, name="deadlocked")
    topic = topics.APPOINTMENT_CANCELLED
    retries_before = metric("pin_consumer_retries_total", group="crm", topic=topic)
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topic)
    try:
        with running("crm", settings, consumer_pool, max_attempts=5):
            warmup = _event()
            producer.send(topic, warmup)
            wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")

            event = _event()
            # the same key as the consumer's own inbox row: waits for the consumer's transaction
            close_cycle = (
                'INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset")'
                " VALUES ('crm', %s, 'test', 0, 0)"
            )
            arm_deadlocks(database_url)  # before the message is sent
            rounds = Background(lambda: provoke_deadlocks(database_url, close_cycle, [event["MessageId"]], times=6))
            producer.send(topic, event)
            victims = rounds.result(timeout=90)  # then the blocker is free: the next attempt goes through
            wait_for(lambda: feed_entries(pool, event["AppointmentId"]), what="the message applied after the deadlocks")
    finally:
        consumer_pool.close()

    assert len(victims) == 6
    assert len(feed_entries(pool, event["AppointmentId"])) == 1
    assert len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", event["MessageId"])) == 1
    # retried with back-off (each retry counted: ConsumerRetrying's series), never dead-lettered
    assert metric("pin_consumer_retries_total", group="crm", topic=topic) >= retries_before + 6
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before
    assert read_dead_letters(settings, ["crm"], idle_seconds=0.5) == []


def test_failing_handler_is_dead_lettered_after_n_attempts_then_replayed_after_the_fix(
    kafka, settings, database_url, pool, producer
):
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_KAFKA_SESSION_TIMEOUT_MS": str(FAST_SESSION_TIMEOUT_MS),
        "PIN_DATABASE_URL": database_url,
    }
    retries_before = metric("pin_consumer_retries_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    duplicates_before = metric("pin_consumer_duplicates_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    with running("crm", settings, pool, max_attempts=3):
        warmup = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, warmup)
        wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")

        _execute(pool, "ALTER TABLE crm.lead_feed_entry RENAME TO lead_feed_entry_moved")  # a broken deploy
        failing = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, failing)
        [letter] = wait_for(
            lambda: [
                x for x in read_dead_letters(settings, ["crm"], idle_seconds=0.3)
                if x.message_id == failing["MessageId"]
            ],
            what="the dead letter",
        )  # fmt: skip
        _execute(pool, "ALTER TABLE crm.lead_feed_entry_moved RENAME TO lead_feed_entry")  # the fix

        origin = letter.provenance
        assert origin["dlt-attempts"] == "3"
        assert origin["dlt-exception-type"] == "UndefinedTable"
        assert origin["dlt-consumer-group"] == "crm"
        assert origin["dlt-original-topic"] == topics.APPOINTMENT_CANCELLED
        assert metric("pin_consumer_retries_total", group="crm", topic=topics.APPOINTMENT_CANCELLED) == (
            retries_before + 2
        )
        # the partition went on: a later message on the same key is handled
        behind = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, behind, key=str(failing["AppointmentId"]))
        wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the message behind the dead letter")
        assert feed_entries(pool, failing["AppointmentId"]) == []

        cli = CliRunner()
        listing = cli.invoke(app, ["dlq", "list", "--group", "crm", "--idle-seconds", "1"], env=env)
        assert listing.exit_code == 0, listing.output
        listed = [json.loads(line) for line in listing.stdout.splitlines() if line.startswith('{"')]
        [summary] = [item for item in listed if item.get("messageId") == failing["MessageId"]]
        assert summary["originTopic"] == topics.APPOINTMENT_CANCELLED
        assert (summary["attempts"], summary["errorType"]) == ("3", "UndefinedTable")

        replay_cli = cli.invoke(
            app,
            ["dlq", "replay", "--group", "crm", "--message-id", failing["MessageId"], "--idle-seconds", "1"],
            env=env,
        )
        assert replay_cli.exit_code == 0, replay_cli.output
        assert '"replayed": 1' in replay_cli.stdout
        wait_for(lambda: in_inbox(pool, "crm", failing["MessageId"]), what="the replayed message handled")
        # replaying it again is harmless: the same MessageId, so the inbox skips it
        assert len(replay(settings, "crm", message_id=failing["MessageId"], idle_seconds=0.5)) == 1
        wait_for(
            lambda: (
                metric("pin_consumer_duplicates_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
                == duplicates_before + 1
            ),
            what="the second replay skipped as a duplicate",
        )

    assert len(feed_entries(pool, failing["AppointmentId"])) == 1


def _execute(pool: ConnectionPool[Conn], sql: str) -> None:
    with pool.connection() as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def test_a_second_instance_joining_mid_stream_loses_and_duplicates_nothing(settings, pool, producer):
    """A rebalance in the middle of the stream: the first instance finishes its message in hand and gives
    partitions up; every message is handled once, whichever instance handles it."""
    events = [_event() for _ in range(30)]
    ids = [event["MessageId"] for event in events]
    with running("crm", settings, pool) as first:
        for event in events[:15]:
            producer.send(topics.APPOINTMENT_CANCELLED, event)
        wait_for(lambda: in_inbox(pool, "crm", ids[0]), what="the first instance to be handling")
        with running("crm", settings, pool) as second:  # joins the group while the first is busy
            # cooperative-sticky may move whole topics (the first keeps one, the second takes the other)
            everything = len(first.topics) * topics.PARTITIONS
            wait_for(
                lambda: first.assigned_partitions and second.assigned_partitions
                and len(first.assigned_partitions | second.assigned_partitions) == everything,
                what="the partitions split between the two instances",
            )  # fmt: skip
            assert not first.assigned_partitions & second.assigned_partitions
            for event in events[15:]:
                producer.send(topics.APPOINTMENT_CANCELLED, event)
            wait_for(
                lambda: len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id::text = ANY(%s)", ids)) == 30,
                what="every message handled",
            )
    for event in events:
        assert len(feed_entries(pool, event["AppointmentId"])) == 1


def test_inbox_rows_older_than_the_dedup_window_are_pruned(settings, pool):
    old, fresh = uuid.uuid4(), uuid.uuid4()
    with pool.connection() as conn:
        for message_id, age_days in ((old, 30), (fresh, 1)):
            conn.execute(
                'INSERT INTO messaging.inbox (consumer_group, message_id, topic, partition, "offset", processed_at)'
                " VALUES ('news', %s, 't', 0, 0, now() - make_interval(days => %s))",
                (message_id, age_days),
            )
    with running("news", settings, pool, inbox_retention_seconds=7 * 86_400):
        wait_for(lambda: not in_inbox(pool, "news", old), what="the old inbox row pruned")
    assert in_inbox(pool, "news", fresh)


def test_a_failing_message_holds_its_partition_only(settings, pool, producer):
    """Retry without moving past the offset: the message behind the failing one waits for it (then the DLQ);
    a message on another partition goes on meanwhile."""
    bad = _event()
    refuse_feed_entries(pool, bad["AppointmentId"])  # readable, but its effect fails on every attempt
    behind, elsewhere = _event(), _event()
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    with running("crm", settings, pool, max_attempts=3, backoff_base=3.0, backoff_cap=10.0):
        warmup = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, warmup, partition=1)
        wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")
        producer.send(topics.APPOINTMENT_CANCELLED, bad, partition=0)
        producer.send(topics.APPOINTMENT_CANCELLED, behind, partition=0)
        producer.send(topics.APPOINTMENT_CANCELLED, elsewhere, partition=1)

        # the failing message is retried for at least 1.5 + 3 s; partition 1 does not wait for it
        wait_for(lambda: feed_entries(pool, elsewhere["AppointmentId"]), what="the other partition")
        assert (
            metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED) == dead_before
        )
        assert feed_entries(pool, behind["AppointmentId"]) == []  # partition 0 waits behind the failing offset

        [entry] = wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="partition 0 to go on")
    [letter] = [x for x in read_dead_letters(settings, ["crm"], idle_seconds=0.5) if x.message_id == bad["MessageId"]]
    assert (letter.provenance["dlt-attempts"], letter.provenance["dlt-exception-type"]) == ("3", "DataException")
    # the message behind was handled only after the failing one had been dead-lettered
    failed_at = datetime.fromisoformat(letter.provenance["dlt-failed-at"].replace("Z", "+00:00"))
    assert entry["recorded_at"] >= failed_at


def test_dlq_commands_without_a_broker_fail_with_one_line_and_no_stack_trace(database_url):
    """`pin dlq list|replay` against a broker that does not answer: exit 1, one line naming the topic."""
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "PIN_DATABASE_URL": database_url}  # nothing listens on 1
    cli = CliRunner()
    for command in (["dlq", "list", "--group", "crm"], ["dlq", "replay", "--group", "crm"]):
        result = cli.invoke(app, command, env=env)
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert f"pin {' '.join(command[:2])}: reading {topics.dead_letter_topic('crm')}:" in result.stderr
        assert "Traceback" not in result.output


def test_librdkafka_lines_are_json_log_lines_of_their_own_logger(spawn_role):
    """A consumer whose broker does not answer: librdkafka's complaints come out as our JSON lines, not raw."""
    role = spawn_role("consume", "crm", env={"PIN_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"})  # nothing listens on 1
    wait_for(lambda: '"logger": "pin.kafka.client"' in role.output(), what="a librdkafka line")
    assert role.terminate() == 0, role.output()
    lines = [line for line in role.output().splitlines() if line.strip()]
    raw = [line for line in lines if not line.startswith("{")]
    assert raw == [], raw[:3]
    client = [json.loads(line) for line in lines if '"logger": "pin.kafka.client"' in line]
    assert all(item["level"] in {"warning", "error", "critical"} for item in client), client[:3]
    assert any("Connection refused" in item["event"] for item in client), client[:3]


def test_a_short_idle_window_still_reads_every_dead_letter(kafka, settings, producer):
    """The reader's idle window starts when every partition has answered, not at assign: with 0.3 s of idle the
    old reader came back empty in 13 of 15 reads of one letter on an idle machine (its first fetch, with two empty
    partitions in it, took longer than that on the embedded broker)."""
    letters = [str(uuid.uuid4()) for _ in range(2)]
    for message_id in letters:  # one partition holds both, the other two are empty
        producer.send(
            topics.dead_letter_topic("crm"), b"{}", key=message_id, headers={"message-id": message_id}, partition=1
        )
    for _ in range(5):
        read = read_dead_letters(settings, ["crm"], idle_seconds=0.1)
        assert sorted(letter.message_id for letter in read) == sorted(letters)
