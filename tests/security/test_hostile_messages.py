"""Hostile messages against both appointment-cancelled consumers, on a real broker and PostgreSQL.

Each case is produced in one flush with valid messages around it on one partition, before the consumers start,
so that their first poll returns them together (the batch path, where a poison message used to be fatal):

- a message nested 100,000 deep: used to raise RecursionError in the batch path and kill both consumers on
  every restart; now unreadable, dead-lettered at once, the messages around it applied; `pin dlq list` lists it
  and the letters after it;
- a message of 1.2 MB (the broker takes it; the dead-letter producer may send at most 1 MB): used to be retried
  for ever with "dead-letter publish failed: MSG_SIZE_TOO_LARGE", its partition blocked; now dead-lettered cut,
  with its size, digest and the database row holding its full bytes; replay sends the full bytes;
- messages that one group refused and the other handled (OccurredAt "yesterday", a NUL in TimeZone, a Unix
  number for StartAt): refused at once by both, by the one shared validation;
- a dead letter the topic does not take: parked in the database after a bounded number of publishes, the
  partition goes on; replayed from the database after the fix.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import Producer
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from pin.cli import app
from pin.consumer_groups import routes_of
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime
from pin.messaging.consumer.dead_letters.command import DeadLetter, read_dead_letters
from pin.messaging.consumer.dead_letters.store import PREVIEW_BYTES
from pin.messaging.envelope import UnreadableMessageError
from pin.messaging.kafka import consumer_config, producer_config
from pin.settings import Settings
from tests.consumers.conftest import settings  # noqa: F401 - the fixture
from tests.consumers.support import (
    EVENT_TYPES,
    cancelled,
    feed_entries,
    in_inbox,
    metric,
    notifications_about,
    rows,
    running_groups,
    running_runtimes,
    wait_for,
)

pytestmark = pytest.mark.integration

# the attempts at an unreadable message before its dead letter, as its provenance header says
DEFAULT_UNREADABLE_ATTEMPTS = ConsumerConfig().unreadable_attempts
UNREADABLE = str(DEFAULT_UNREADABLE_ATTEMPTS)
TOPIC = topics.APPOINTMENT_CANCELLED
GROUPS = ("crm", "notifications")


def _event(**extra: Any) -> dict[str, Any]:
    return cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired", **extra)


def _value(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


def _burst(bootstrap: str, values: list[tuple[bytes, str]]) -> None:
    """(value, MessageId) pairs to partition 0 of TOPIC in one flush, by a producer that may send 3 MB."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "message.max.bytes": 3_000_000})
    errors: list[object] = []
    for value, message_id in values:
        headers = [("message-id", message_id), ("contract-version", "1"), ("event-type", EVENT_TYPES[TOPIC])]
        producer.produce(TOPIC, value=value, key=message_id, partition=0, headers=headers,
                         on_delivery=lambda err, _msg: errors.append(err))  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == [None] * len(values), errors


def _handled_by_both(pool: ConnectionPool[Conn], event: dict[str, Any]) -> bool:
    return all(in_inbox(pool, group, event["MessageId"]) for group in GROUPS)


def _letter(config: Settings, group: str, message_id: str) -> DeadLetter:
    def probe() -> list[DeadLetter]:
        return [x for x in read_dead_letters(config, [group], idle_seconds=0.3) if x.message_id == message_id]

    [letter] = wait_for(probe, what=f"the dead letter in {group}'s DLQ")
    return letter


def _cli(config: Settings, *args: str) -> Any:
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": config.kafka.require_bootstrap_servers(),
        "PIN_DATABASE_URL": config.database.require_url(),
    }
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result


def _listed(config: Settings, group: str) -> list[dict[str, Any]]:
    listing = _cli(config, "dlq", "list", "--group", group, "--idle-seconds", "0.5")
    return [json.loads(line) for line in listing.stdout.splitlines() if line.startswith("{")]


def test_a_deeply_nested_message_in_a_burst_is_dead_lettered_and_the_messages_around_it_applied(
    settings,  # noqa: F811 - the fixture imported above
    kafka,
    pool,
):
    before, after = _event(), _event()
    nested_id = str(uuid.uuid4())
    nested = b'{"MessageId": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _burst(kafka.bootstrap_servers, [(_value(before), before["MessageId"]), (nested, nested_id),
                                     (_value(after), after["MessageId"])])  # fmt: skip

    with running_groups(list(GROUPS), settings, pool):
        for event in (before, after):
            wait_for(lambda e=event: _handled_by_both(pool, e), what="the valid messages around the nested one")
        for group in GROUPS:
            origin = _letter(settings, group, nested_id).provenance
            assert (origin["dlt-exception-type"], origin["dlt-attempts"]) == ("UnreadableMessageError", UNREADABLE)
            assert "not JSON" in origin["dlt-exception-message"]
            assert origin["dlt-original-offset"] == "1"
    for event in (before, after):
        assert len(feed_entries(pool, event["AppointmentId"])) == 1
        assert len(notifications_about(pool, event["AppointmentId"])) == 2


def test_pin_dlq_list_reads_a_nested_letter_and_every_letter_after_it(
    settings,  # noqa: F811 - the fixture imported above
    kafka,
):
    """`pin dlq list` crashed (RecursionError reading the MessageId) at a nested letter, the rest unprinted."""
    nested = b'{"MessageId": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    later = str(uuid.uuid4())
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    dlq = topics.dead_letter_topic("crm")
    producer.produce(dlq, value=nested, headers=[("dlt-original-topic", TOPIC)], partition=0)
    producer.produce(dlq, value=json.dumps({"MessageId": later}).encode(), partition=0)
    assert producer.flush(10) == 0
    listed = _listed(settings, "crm")
    assert [item["messageId"] for item in listed] == [None, later]
    assert listed[0]["originTopic"] == TOPIC


def test_an_oversized_message_in_a_burst_is_dead_lettered_cut_with_its_full_bytes_in_the_database(
    settings,  # noqa: F811 - the fixture imported above
    kafka,
    pool,
):
    before, after = _event(), _event()
    huge = _event(Padding="x" * 1_200_000)
    del huge["InvestorUserId"]  # unreadable whatever its size (as the message of the report was)
    huge_value = _value(huge)
    assert len(huge_value) > settings.kafka.max_message_bytes
    _burst(kafka.bootstrap_servers, [(_value(before), before["MessageId"]), (huge_value, huge["MessageId"]),
                                     (_value(after), after["MessageId"])])  # fmt: skip
    truncated_before = metric("pin_consumer_dead_letters_truncated_total", group="crm", topic=TOPIC)

    stored: dict[str, str] = {}
    with running_groups(list(GROUPS), settings, pool):
        for event in (before, after):
            wait_for(lambda e=event: _handled_by_both(pool, e), what="the valid messages around the oversized one")
        for group in GROUPS:
            letter = _letter(settings, group, huge["MessageId"])
            origin = letter.provenance
            assert (origin["dlt-exception-type"], origin["dlt-attempts"]) == ("UnreadableMessageError", UNREADABLE)
            assert origin["dlt-original-size"] == str(len(huge_value))
            assert origin["dlt-original-sha256"] == hashlib.sha256(huge_value).hexdigest()
            assert letter.record is not None
            assert letter.record.value == huge_value[:PREVIEW_BYTES]
            [row] = rows(pool, "SELECT * FROM messaging.dead_letter WHERE id = %s", origin["dlt-stored-id"])
            assert (row["consumer_group"], row["disposition"], row["offset"]) == (group, "truncated", 1)
            assert bytes(row["message_value"]) == huge_value
            assert bytes(row["message_key"]) == huge["MessageId"].encode()
            stored[group] = origin["dlt-stored-id"]
        assert metric("pin_consumer_dead_letters_truncated_total", group="crm", topic=TOPIC) == truncated_before + 1

        [summary] = [item for item in _listed(settings, "crm") if item["messageId"] == huge["MessageId"]]
        assert (summary["truncated"], summary["parked"], summary["originalSize"]) == (True, False, len(huge_value))
        assert summary["fullBytesAt"] == f"messaging.dead_letter id={stored['crm']}"

        # replay sends the database's full bytes: crm reads all 1.2 MB again (not the cut copy) and cuts it again
        replayed = _cli(settings, "dlq", "replay", "--group", "crm", "--message-id", huge["MessageId"],
                        "--idle-seconds", "0.5")  # fmt: skip
        assert '"replayed": 1' in replayed.stdout

        def letters_of_huge() -> list[DeadLetter] | None:
            letters = read_dead_letters(settings, ["crm"], idle_seconds=0.3)
            mine = [x for x in letters if x.message_id == huge["MessageId"]]
            return mine if len(mine) == 2 else None

        again = [x for x in wait_for(letters_of_huge, what="the replayed copy dead-lettered") if x.record]
        assert {x.provenance["dlt-original-size"] for x in again} == {str(len(huge_value))}
        assert {x.provenance["dlt-original-topic"] for x in again} == {TOPIC}


@pytest.mark.parametrize("group", GROUPS)
def test_the_one_shared_validation_refuses_the_same_messages_in_every_group(
    settings,  # noqa: F811 - the fixture imported above
    kafka,
    pool,
    group,
):
    """crm dead-lettered OccurredAt "yesterday" and notifications handled it; a NUL in TimeZone failed crm five
    times (DataError) and notifications handled it. Now each group refuses each the same way: unreadable, tried
    PIN_CONSUMER_UNREADABLE_ATTEMPTS times (never its database), then dead-lettered."""
    yesterday = {**_event(), "OccurredAt": "yesterday"}
    nul = _event()
    nul["TimeZone"] = "Europe/Moscow\u0000"
    unix = {**_event(), "StartAt": 1_764_572_400}
    good = _event()
    bad = (yesterday, nul, unix)
    retries_before = metric("pin_consumer_retries_total", group=group, topic=TOPIC)
    _burst(kafka.bootstrap_servers, [(_value(e), e["MessageId"]) for e in (*bad, good)])

    with running_groups([group], settings, pool):
        wait_for(lambda: in_inbox(pool, group, good["MessageId"]), what="the valid message behind the bad ones")
        for event, field in zip(bad, ("OccurredAt", "$.TimeZone", "StartAt"), strict=True):
            origin = _letter(settings, group, event["MessageId"]).provenance
            assert (origin["dlt-exception-type"], origin["dlt-attempts"]) == ("UnreadableMessageError", UNREADABLE)
            assert field in origin["dlt-exception-message"]
            assert not in_inbox(pool, group, event["MessageId"])
    retried = len(bad) * (DEFAULT_UNREADABLE_ATTEMPTS - 1)  # each read again, never more
    assert metric("pin_consumer_retries_total", group=group, topic=TOPIC) == retries_before + retried


def test_a_dead_letter_the_topic_never_takes_is_parked_in_the_database_and_the_partition_goes_on(
    settings,  # noqa: F811 - the fixture imported above
    kafka,
    pool,
):
    """The dead-letter producer reaches no broker: three publishes, then the letter is parked in the database (it
    used to be retried for ever, its partition blocked); after the fix (a consumer whose reader refused it is
    fixed), replay sends it from the database."""
    failing, behind = _event(), _event()
    routes = routes_of("crm")
    tolerant = routes[TOPIC]

    def strict(payload: Any) -> Any:  # a reader that refuses this valid message: unreadable, to be dead-lettered
        if payload.get("MessageId") == failing["MessageId"]:
            raise UnreadableMessageError("refused by this reader")
        return tolerant.parse(payload)

    routes[TOPIC] = replace(tolerant, parse=strict)
    _burst(kafka.bootstrap_servers, [(_value(failing), failing["MessageId"]), (_value(behind), behind["MessageId"])])
    parked_before = metric("pin_consumer_dead_letters_parked_total", group="crm", topic=TOPIC)
    failures_before = metric("pin_consumer_dead_letter_failures_total", group="crm", topic=TOPIC)
    nowhere = settings.with_values(kafka_bootstrap_servers="127.0.0.1:1")  # nothing listens on 1
    runtime = ConsumerRuntime(
        group="crm",
        routes=routes,
        pool=pool,
        consumer_config=consumer_config(settings, "crm"),
        producer_config=producer_config(nowhere, **{"linger.ms": 0}),
        config=ConsumerConfig(
            unreadable_attempts=2, backoff_base=0.05, backoff_cap=0.2, dlq_timeout=0.5, dead_letter_attempts=3
        ),
    )
    with running_runtimes([runtime]):
        wait_for(lambda: feed_entries(pool, behind["AppointmentId"]), what="the message behind the parked one")
    [row] = rows(pool, "SELECT * FROM messaging.dead_letter WHERE consumer_group = 'crm'")
    assert (row["disposition"], row["offset"], row["error_type"]) == ("parked", 0, "UnreadableMessageError")
    assert bytes(row["message_value"]) == _value(failing)
    assert metric("pin_consumer_dead_letters_parked_total", group="crm", topic=TOPIC) == parked_before + 1
    assert metric("pin_consumer_dead_letter_failures_total", group="crm", topic=TOPIC) == failures_before + 3

    [summary] = [item for item in _listed(settings, "crm") if item["messageId"] == failing["MessageId"]]
    assert (summary["parked"], summary["dlqOffset"], summary["errorType"]) == (True, None, "UnreadableMessageError")
    assert summary["fullBytesAt"] == f"messaging.dead_letter id={row['id']}"

    # the fix: the group's reader (running_groups below) takes it
    replayed = _cli(settings, "dlq", "replay", "--group", "crm", "--message-id", failing["MessageId"],
                    "--idle-seconds", "0.5")  # fmt: skip
    assert '"replayed": 1' in replayed.stdout
    with running_groups(["crm"], settings, pool):
        wait_for(lambda: feed_entries(pool, failing["AppointmentId"]), what="the replayed message applied")
