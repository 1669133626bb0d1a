"""The consumer runtime under failure, against a real broker and PostgreSQL (SPEC section 7).

- a consumer killed (kill -9) after its effect committed and before its offset commit: redelivered, no
  second effect, and a graceful stop (SIGTERM) of the next one;
- the database unreachable for a while: retried, then applied exactly once, nothing dead-lettered;
- a deadlock on the same message six times in a row: retried with back-off, never dead-lettered, then applied
  once (seed 003: a transient failure is retried; pin.faults);
- a valid message failing for any other reason (a revoked grant, a dropped table, a CHECK a deploy added, a bug in
  the handler): retried without limit, recorded as held, never dead-lettered, the committed offset at it; applied
  once after the fix;
- an incompatible payload: dead-lettered after PIN_CONSUMER_UNREADABLE_ATTEMPTS attempts, not on its first;
- `pin dlq park`: an operator moves a held message to the dead letters, on the record; the running consumer holding
  it notices and its partition goes on; `pin dlq list` and `pin dlq replay` after the fix (every command run in
  process through the CLI runner).
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from structlog.testing import capture_logs
from typer.testing import CliRunner

from pin.cli import app
from pin.consumer_groups import build_runtime, routes_of
from pin.db import Conn, create_pool
from pin.messaging import topics
from pin.messaging.consumer.dead_letters.command import read_dead_letters, replay
from pin.operations import audit
from pin.operations.audit import default_actor
from tests.consumers.conftest import FAST_SESSION_TIMEOUT_MS
from tests.consumers.support import (
    cancelled,
    committed_offset,
    feed_entries,
    held_messages,
    in_inbox,
    metric,
    refuse_feed_entries,
    rows,
    running,
    running_runtimes,
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
        with running("crm", settings, consumer_pool, db_timeout=0.5):
            warmup = _event()
            producer.send(topics.APPOINTMENT_CANCELLED, warmup)
            wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")

            # the outage: no new connections, and every open one cut
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            events = [_event() for _ in range(3)]
            for event in events:
                producer.send(topics.APPOINTMENT_CANCELLED, event)
            # many failed attempts: an outage never sends anything to the DLQ
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
    a row that session holds: a real deadlock, of which the consumer is the victim, six times in a row."""
    name = database_url.split("?", 1)[0].rsplit("/", 1)[1]
    install_blocker(database_url, table="crm.lead_feed_entry")  # the effect's INSERT waits for the blocker row
    with psycopg.connect(test_databases.server_url, autocommit=True) as admin:  # quicker deadlock detection
        admin.execute(f"ALTER DATABASE \"{name}\" SET deadlock_timeout = '500ms'")
    consumer_pool = create_pool(database_url, min_size=1, max_size=2, name="deadlocked")
    topic = topics.APPOINTMENT_CANCELLED
    retries_before = metric("pin_consumer_retries_total", group="crm", topic=topic)
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topic)
    try:
        with running("crm", settings, consumer_pool):
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


# -- a message that passed its contract is never dead-lettered by itself (pin.faults.TREATMENTS) --------------------

# More attempts than any limit the runtime ever had (5) or has for an unreadable message (PIN_CONSUMER_UNREADABLE_...).
MANY_ATTEMPTS = 8


class _ConsumerRole:
    """A login role of the test's database with what a consumer needs on crm and messaging, whose grant on the lead
    feed a test revokes (a non-superuser: a superuser is never refused)."""

    def __init__(self, database_url: str, test_databases: TestDatabases) -> None:
        self.name = f"pin_consumer_{uuid.uuid4().hex[:10]}"
        password = uuid.uuid4().hex
        self._admin = psycopg.connect(test_databases.server_url, autocommit=True)
        self._admin.execute(f"CREATE ROLE {self.name} LOGIN PASSWORD '{password}'")  # type: ignore[arg-type]
        self._database_url = database_url
        with psycopg.connect(database_url, autocommit=True) as conn:
            for schema in ("crm", "messaging"):
                conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {self.name}")  # type: ignore[arg-type]
                conn.execute(
                    f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {self.name}"  # type: ignore[arg-type]
                )
                conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {self.name}")  # type: ignore[arg-type]
        parts = urlsplit(database_url)
        netloc = f"{self.name}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self.url = urlunsplit(parts._replace(netloc=netloc))

    def execute(self, sql: str) -> None:
        with psycopg.connect(self._database_url, autocommit=True) as conn:
            conn.execute(sql.format(role=self.name))  # type: ignore[arg-type]

    def drop(self) -> None:
        self.execute("DROP OWNED BY {role}")
        self._admin.execute(f"DROP ROLE {self.name}")  # type: ignore[arg-type]
        self._admin.close()


@pytest.mark.parametrize(
    "case",
    [
        # class 42: a grant revoked by a deploy (42501), a table dropped or renamed (42P01)
        ("revoked-grant", "InsufficientPrivilege"),
        ("dropped-table", "UndefinedTable"),
        # class 23 on a valid message: a CHECK a deploy added (NOT VALID: only new rows are checked)
        ("check-added", "CheckViolation"),
        # a handler's own exception (a bug in its code)
        ("handler-bug", "RuntimeError"),
    ],
    ids=lambda case: case[0],
)
def test_a_valid_message_that_fails_is_retried_without_limit_never_dead_lettered_then_applied_once_after_the_fix(
    case, settings, pool, test_databases: TestDatabases, producer
):
    """Seed 003: a consumer failure of a message that satisfies its contract is retried with back-off, and the
    partition does not move past the stuck offset; once the cause is fixed it applies by itself, once. (The DLQ
    is only for what cannot be read: pin.faults.TREATMENTS.)"""
    breakage, error_type = case
    only_its_key = breakage in {"check-added", "handler-bug"}  # the others fail every message of the table
    database_url, bootstrap = settings.require_database_url(), settings.kafka_bootstrap_servers
    topic = topics.APPOINTMENT_CANCELLED
    warmup, failing, behind = _event(), _event(), _event()
    role = _ConsumerRole(database_url, test_databases) if breakage == "revoked-grant" else None
    consumer_pool = create_pool(role.url if role else database_url, min_size=1, max_size=3, name="breakage")
    bug = threading.Event()
    routes = routes_of("crm")
    crm_route = routes[topic]

    def apply_many(conn: Conn, items: Any) -> None:
        if bug.is_set() and any(str(context.message_id) == failing["MessageId"] for _, context in items):
            raise RuntimeError("a bug in the handler")
        crm_route.apply_many(conn, items)

    routes[topic] = replace(crm_route, apply_many=apply_many)
    breaks, fixes = {
        "revoked-grant": (
            "REVOKE INSERT ON crm.lead_feed_entry FROM {role}",
            "GRANT INSERT ON crm.lead_feed_entry TO {role}",
        ),
        "dropped-table": (
            "ALTER TABLE crm.lead_feed_entry RENAME TO lead_feed_entry_moved",
            "ALTER TABLE crm.lead_feed_entry_moved RENAME TO lead_feed_entry",
        ),
        "check-added": (
            "ALTER TABLE crm.lead_feed_entry ADD CONSTRAINT deployed_check"
            f" CHECK (appointment_id <> '{failing['AppointmentId']}') NOT VALID",
            "ALTER TABLE crm.lead_feed_entry DROP CONSTRAINT deployed_check",
        ),
        "handler-bug": ("", ""),
    }[breakage]
    retries_before = metric("pin_consumer_retries_total", group="crm", topic=topic)
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topic)
    # a failure of one message's data: with 2 lanes only its key waits; a broken table: the default (one lane)
    lanes = {"lanes": 2} if only_its_key else {}
    runtime = build_runtime(
        "crm", settings, consumer_pool, routes=routes, backoff_base=0.05, backoff_cap=0.3, statistics_interval_ms=500,
        **lanes,
    )  # fmt: skip
    try:
        with running_runtimes([runtime]):
            producer.send(topic, warmup, partition=0)  # offset 0
            wait_for(lambda: committed_offset(bootstrap, "crm", topic, 0) == 1, what="the warmup")

            if role is not None:
                role.execute(breaks)
            elif breaks:
                _execute(pool, breaks)
            else:
                bug.set()
            producer.send(topic, failing, partition=0)  # offset 1
            producer.send(topic, behind, partition=0)  # offset 2: another key, behind it on its partition
            # retried far past any attempt limit, never dead-lettered
            retried = retries_before + MANY_ATTEMPTS
            wait_for(
                lambda: metric("pin_consumer_retries_total", group="crm", topic=topic) >= retried,
                what=f"{MANY_ATTEMPTS} retries",
            )
            assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before
            [held] = wait_for(
                lambda: [h for h in held_messages(pool, "crm") if h["offset"] == 1 and h["attempts"] >= MANY_ATTEMPTS],
                what=f"the held message recorded, {MANY_ATTEMPTS} attempts",
            )
            assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before
            if only_its_key:  # lanes: another key behind it goes on, the committed offset stays at it
                wait_for(lambda: in_inbox(pool, "crm", behind["MessageId"]), what="the other key applied")
            else:  # one lane: its partition waits behind it
                assert not in_inbox(pool, "crm", behind["MessageId"])
            assert committed_offset(bootstrap, "crm", topic, 0) == 1  # the offset stays at it
            assert (held["topic"], held["partition"], held["offset"]) == (topic, 0, 1)
            assert (str(held["message_id"]), bytes(held["message_key"])) == (
                failing["MessageId"],
                failing["AppointmentId"].encode(),
            )
            assert held["error_type"] == error_type
            assert held["fault"] == "poison"
            assert held["park_audit_id"] is None
            assert "\n" not in held["error"]
            assert failing["TenantId"] not in held["error"]
            assert held["since"] <= held["last_attempt_at"] < held["next_attempt_at"]

            if role is not None:  # the fix: it applies by itself
                role.execute(fixes)
            elif fixes:
                _execute(pool, fixes)
            bug.clear()
            wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the partition to go on after the fix")
            wait_for(lambda: committed_offset(bootstrap, "crm", topic, 0) == 3, what="the offset")
    finally:
        consumer_pool.close()
        if role is not None:
            role.drop()

    assert len(feed_entries(pool, failing["AppointmentId"])) == 1
    assert len(rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", failing["MessageId"])) == 1
    assert len(feed_entries(pool, behind["AppointmentId"])) == 1
    assert held_messages(pool, "crm") == []  # its record went with its effect
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before
    assert read_dead_letters(settings, ["crm"], idle_seconds=0.3) == []


def test_an_incompatible_payload_is_dead_lettered_only_after_the_configured_attempts(kafka, settings, pool, producer):
    """A message its route's contract refuses is held and tried again (a short back-off), then dead-lettered with
    its alert's counter once PIN_CONSUMER_UNREADABLE_ATTEMPTS attempts found it unreadable; its partition goes on."""
    topic = topics.APPOINTMENT_CANCELLED
    configured = settings.model_copy(update={"consumer_unreadable_attempts": 4})
    bad, behind = _event(), _event()
    del bad["InvestorUserId"]  # required by the contract
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topic)
    with capture_logs() as logs, running("crm", configured, pool, backoff_base=0.2, backoff_cap=0.4):
        producer.send(topic, bad, partition=0)
        producer.send(topic, behind, partition=0)
        [held] = wait_for(lambda: held_messages(pool, "crm"), what="the incompatible message held, not dead-lettered")
        assert (held["fault"], held["error_type"], held["message_id"]) == ("unreadable", "UnreadableMessageError", None)
        assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before
        wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the partition to go on")
        wait_for(
            lambda: metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before + 1,
            what="the dead letter",
        )
    [letter] = [x for x in read_dead_letters(settings, ["crm"], idle_seconds=0.3) if x.message_id == bad["MessageId"]]
    assert (letter.provenance["dlt-attempts"], letter.provenance["dlt-exception-type"]) == (
        "4",
        "UnreadableMessageError",
    )
    attempts = [e["attempts"] for e in logs if e["event"] == "unreadable message"]
    assert attempts == [1, 2, 3, 4], attempts
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topic) == dead_before + 1
    assert held_messages(pool, "crm") == []
    assert rows(pool, "SELECT 1 FROM messaging.inbox WHERE message_id = %s", bad["MessageId"]) == []


def test_pin_dlq_park_moves_a_held_message_to_the_dead_letters_on_the_record_and_its_partition_goes_on(
    kafka, settings, database_url, pool, producer
):
    """A message held in retry by a running consumer; the operator parks it (by offset, then the next by key): the
    consumer notices at its next attempt, dead-letters it (ParkedByOperator, naming the audit record), its partition
    goes on; the audit trail says who, when, why and what. After the fix nothing brings it back by itself."""
    topic = topics.APPOINTMENT_CANCELLED
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "PIN_DATABASE_URL": database_url}
    first, second, behind = _event(), _event(), _event()
    refuse_feed_entries(pool, first["AppointmentId"], second["AppointmentId"])
    cli = CliRunner()
    with running("crm", settings, pool, lanes=1, backoff_base=0.1, backoff_cap=1.0):  # one lane: the partition waits
        for event in (first, second, behind):
            producer.send(topic, event, partition=0)  # offsets 0, 1, 2
        wait_for(lambda: [h for h in held_messages(pool, "crm") if h["attempts"] >= 3], what="the first held")

        refused = cli.invoke(app, ["dlq", "park", "--group", "crm", "--topic", topic, "--partition", "0",
                                   "--offset", "0"], env=env)  # fmt: skip
        assert refused.exit_code == 2, refused.output  # no --reason: refused, nothing done
        parked = cli.invoke(
            app,
            ["dlq", "park", "--group", "crm", "--topic", topic, "--partition", "0", "--offset", "0",
             "--reason", "its appointment was purged", "--actor", "oncall-7", "--wait-seconds", "20"],
            env=env,
        )  # fmt: skip
        assert parked.exit_code == 0, parked.output
        result = json.loads(parked.stdout.splitlines()[-1])
        assert (result["parked"], result["deadLettered"], result["stillHeld"]) == (1, 1, 0)
        assert result["messages"][0]["messageId"] == first["MessageId"]

        # the next message of the partition is now the held one; parked by its key
        wait_for(lambda: [h for h in held_messages(pool, "crm") if h["offset"] == 1], what="the second held")
        by_key = cli.invoke(
            app,
            ["dlq", "park", "--group", "crm", "--topic", topic, "--key", second["AppointmentId"],
             "--reason", "a duplicate of a purged one", "--wait-seconds", "20"],
            env=env,
        )  # fmt: skip
        assert by_key.exit_code == 0, by_key.output
        wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the partition to go on")
        nothing = cli.invoke(
            app, ["dlq", "park", "--group", "crm", "--topic", topic, "--partition", "0", "--offset", "0",
                  "--reason", "again"], env=env,
        )  # fmt: skip
        assert nothing.exit_code == 1  # no longer held: nothing to park
        with pool.connection() as conn:
            conn.execute("DROP TRIGGER refuse_for_test ON crm.lead_feed_entry")  # the fix: parked stays parked
        wait_for(lambda: committed_offset(kafka.bootstrap_servers, "crm", topic, 0) == 3, what="the offset")

    assert feed_entries(pool, first["AppointmentId"]) == []
    assert feed_entries(pool, second["AppointmentId"]) == []
    assert held_messages(pool, "crm") == []
    letters = {x.message_id: x for x in read_dead_letters(settings, ["crm"], idle_seconds=0.3)}
    with pool.connection() as conn:
        trail = audit.recent(conn, action=audit.DLQ_PARK)
    assert [r.reason for r in trail] == ["a duplicate of a purged one", "its appointment was purged"]
    newest, oldest = trail
    assert (oldest.actor, oldest.counts) == ("oncall-7", {"held": 1})
    assert oldest.target == {"group": "crm", "topic": topic, "partition": 0, "offset": 0}
    assert newest.actor == default_actor()
    assert newest.target["key"] == second["AppointmentId"]
    for event, record in ((first, oldest), (second, newest)):
        origin = letters[event["MessageId"]].provenance
        assert origin["dlt-exception-type"] == "ParkedByOperator"
        assert f"audit {record.id}" in origin["dlt-exception-message"]
        assert "DataException" in origin["dlt-exception-message"]  # the failure it was held with

    # `pin dlq list` shows them; `pin dlq replay` sends one back, and it applies once (twice is harmless)
    listing = cli.invoke(app, ["dlq", "list", "--group", "crm", "--idle-seconds", "0.5"], env=env)
    assert listing.exit_code == 0, listing.output
    listed = [json.loads(line) for line in listing.stdout.splitlines() if line.startswith('{"')]
    [summary] = [item for item in listed if item.get("messageId") == first["MessageId"]]
    assert (summary["originTopic"], summary["originOffset"], summary["errorType"]) == (topic, "0", "ParkedByOperator")
    duplicates_before = metric("pin_consumer_duplicates_total", group="crm", topic=topic)
    with running("crm", settings, pool):
        replayed = cli.invoke(
            app, ["dlq", "replay", "--group", "crm", "--message-id", first["MessageId"], "--idle-seconds", "0.5"],
            env=env,
        )  # fmt: skip
        assert replayed.exit_code == 0, replayed.output
        assert '"replayed": 1' in replayed.stdout
        wait_for(lambda: in_inbox(pool, "crm", first["MessageId"]), what="the replayed message handled")
        assert len(replay(settings, "crm", message_id=first["MessageId"], idle_seconds=0.5)) == 1
        wait_for(
            lambda: metric("pin_consumer_duplicates_total", group="crm", topic=topic) == duplicates_before + 1,
            what="the second replay skipped as a duplicate",
        )
    assert len(feed_entries(pool, first["AppointmentId"])) == 1


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


def test_a_park_recorded_while_no_instance_holds_the_message_is_honoured_by_the_next_one(
    kafka, settings, database_url, pool, producer
):
    """The instance holding a message was killed (its row stays); the operator parks it then (nobody dead-letters it
    yet: stillHeld); the next instance fails on the message once, finds the mark and dead-letters it."""
    topic = topics.APPOINTMENT_CANCELLED
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "PIN_DATABASE_URL": database_url}
    stuck, behind = _event(), _event()
    refuse_feed_entries(pool, stuck["AppointmentId"])
    producer.send(topic, stuck, partition=0)  # offset 0
    producer.send(topic, behind, partition=0)
    with pool.connection() as conn:  # the row a killed holder left behind
        conn.execute(
            'INSERT INTO messaging.held_message (consumer_group, topic, "partition", "offset", message_key,'
            " message_id, member, fault, error_type, error, attempts, next_attempt_at)"
            " VALUES ('crm', %s, 0, 0, %s, %s, 'gone:1', 'poison', 'DataException', 'refused', 12, now())",
            (topic, stuck["AppointmentId"].encode(), stuck["MessageId"]),
        )
    parked = CliRunner().invoke(
        app, ["dlq", "park", "--group", "crm", "--topic", topic, "--key", stuck["AppointmentId"],
              "--reason", "its holder died", "--wait-seconds", "0"], env=env,
    )  # fmt: skip
    assert parked.exit_code == 0, parked.output
    assert json.loads(parked.stdout.splitlines()[-1])["stillHeld"] == 1
    with running("crm", settings, pool, lanes=1):
        wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the partition to go on")
    [letter] = [x for x in read_dead_letters(settings, ["crm"], idle_seconds=0.3) if x.message_id == stuck["MessageId"]]
    assert (letter.provenance["dlt-exception-type"], letter.provenance["dlt-attempts"]) == ("ParkedByOperator", "1")
    assert held_messages(pool, "crm") == []
    assert feed_entries(pool, stuck["AppointmentId"]) == []


def test_a_failing_message_holds_its_partition_only(settings, pool, producer):
    """Retry without moving past the offset, with one lane: the message behind the failing one waits for it; a
    message on another partition goes on meanwhile; after the fix the failing one applies, then the one behind it."""
    bad = _event()
    refuse_feed_entries(pool, bad["AppointmentId"])  # readable, but its effect fails until the fix
    behind, elsewhere = _event(), _event()
    with running("crm", settings, pool, lanes=1, backoff_base=0.2, backoff_cap=1.0):
        warmup = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, warmup, partition=1)
        wait_for(lambda: feed_entries(pool, warmup["AppointmentId"]), what="the consumer to be up")
        producer.send(topics.APPOINTMENT_CANCELLED, bad, partition=0)
        producer.send(topics.APPOINTMENT_CANCELLED, behind, partition=0)
        producer.send(topics.APPOINTMENT_CANCELLED, elsewhere, partition=1)

        wait_for(lambda: feed_entries(pool, elsewhere["AppointmentId"]), what="the other partition")
        wait_for(lambda: [h for h in held_messages(pool, "crm") if h["attempts"] >= 3], what="three attempts")
        assert feed_entries(pool, behind["AppointmentId"]) == []  # partition 0 waits behind the failing offset
        with pool.connection() as conn:
            conn.execute("DROP TRIGGER refuse_for_test ON crm.lead_feed_entry")  # the fix
        [entry] = wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="partition 0 to go on")
    [fixed] = feed_entries(pool, bad["AppointmentId"])
    assert entry["recorded_at"] >= fixed["recorded_at"]
    assert read_dead_letters(settings, ["crm"], idle_seconds=0.5) == []


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
