"""The console's actions over HTTP against a real consumer, broker and PostgreSQL: park a held message, see its
dead letter, a dry run that says what a replay would do (apply, skip as already applied, refuse as stale), the
replay for real applied by the group, discards of both kinds, every action in the audit trail."""

from __future__ import annotations

import json
import uuid

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.store import Origin
from pin.settings import Settings
from tests.console.conftest import TestClient
from tests.consumers.conftest import producer, settings  # noqa: F401 - the fixtures
from tests.consumers.support import (
    Producing,
    cancelled,
    feed_entries,
    held_messages,
    in_inbox,
    rows,
    running,
    wait_for,
)

pytestmark = pytest.mark.integration

TOPIC = topics.APPOINTMENT_CANCELLED


def _counts(html: str) -> tuple[int, int, int]:
    return tuple(int(html.split(f'id="{name}">')[1].split("<", maxsplit=1)[0]) for name in ("apply", "skip", "refuse"))  # type: ignore[return-value]


def test_park_a_held_message_then_dry_run_and_replay_its_dead_letter(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    producer: Producing,  # noqa: F811
    operator: TestClient,
) -> None:
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    key = event["AppointmentId"]
    with pool.connection() as conn:  # its feed entry is refused by the database: the message is held in retry
        conn.execute("CREATE TABLE crm.console_refusal (appointment_id uuid PRIMARY KEY)")
        conn.execute("INSERT INTO crm.console_refusal VALUES (%s)", (key,))
        conn.execute(
            "CREATE FUNCTION crm.console_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF EXISTS (SELECT 1 FROM crm.console_refusal r WHERE r.appointment_id = NEW.appointment_id) THEN"
            " RAISE EXCEPTION 'refused for the test' USING ERRCODE = 'data_exception'; END IF; RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER console_refuse BEFORE INSERT ON crm.lead_feed_entry FOR EACH ROW"
                     " EXECUTE FUNCTION crm.console_refuse()")  # fmt: skip
    with running("crm", settings, pool, backoff_base=0.1, backoff_cap=1.0):
        producer.send(TOPIC, event, partition=0)
        [held] = wait_for(lambda: held_messages(pool, "crm"), what="the message held in retry")
        key_page = operator.get(f"/console/keys/{key}").text
        assert f"consumer group crm holds its message at {TOPIC}[0]@{held['offset']} in retry" in key_page

        refused = operator.post("/console/held/park", data={"group": "crm", "topic": TOPIC, "partition": "0",
                                                            "offset": str(held["offset"]), "reason": " "})  # fmt: skip
        assert refused.status_code == 400  # no reason, nothing done
        where = {"group": "crm", "topic": TOPIC, "partition": "0", "offset": str(held["offset"])}
        parked = operator.post("/console/held/park", data={**where, "reason": "to fix later"})
        assert parked.status_code == 200, parked.text
        [letter] = wait_for(
            lambda: rows(pool, "SELECT * FROM messaging.dead_letter_index WHERE consumer_group = 'crm'"),
            what="the parked message's dead letter",
        )
        assert letter["error_type"] == "ParkedByOperator"
        assert str(letter["message_id"]) == event["MessageId"]

        with pool.connection() as conn:  # the cause fixed
            conn.execute("DELETE FROM crm.console_refusal")
        form = {"kind": "group", "scope": "selected", "id": str(letter["id"]), "reason": "the refusal is fixed"}
        dry = operator.post("/console/dead-letters/act", data={**form, "action": "replay-dry-run"})
        assert dry.status_code == 200, dry.text
        assert _counts(dry.text) == (1, 0, 0)
        assert not feed_entries(pool, key)  # a dry run does nothing
        done = operator.post("/console/dead-letters/act", data={**form, "action": "replay"})
        assert done.status_code == 200, done.text
        wait_for(lambda: feed_entries(pool, key), what="the replayed message applied by the group")
    assert in_inbox(pool, "crm", event["MessageId"])
    [after] = rows(pool, "SELECT resolution, resolved_audit_id FROM messaging.dead_letter_index WHERE id = %s",
                   letter["id"])  # fmt: skip
    assert after["resolution"] == "replayed"
    audit = rows(pool, "SELECT * FROM operations.audit ORDER BY id")
    assert [a["action"] for a in audit] == ["dlq.park", "dlq.replay"]
    assert audit[1]["id"] == after["resolved_audit_id"]
    assert audit[1]["counts"] == {"letters": 1, "apply": 1, "skip": 0, "refuse": 0}
    assert audit[1]["target"] == {"kind": "group", "ids": [letter["id"]]}
    assert audit[1]["reason"] == "the refusal is fixed"
    page = operator.get("/console/audit").text
    assert page.index("dlq.replay") < page.index("dlq.park")  # newest first
    # resolved: hidden by default, no longer an action's target
    assert f"/console/dead-letters/group/{letter['id']}" not in operator.get("/console/dead-letters").text
    again = operator.post("/console/dead-letters/act", data={**form, "action": "replay"})
    assert again.status_code == 400


def test_a_dry_run_tells_skipped_and_refused_letters(pool: ConnectionPool[Conn], operator: TestClient) -> None:
    applied, stale, fresh = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    purchase = uuid.uuid4()
    with pool.connection() as conn:
        conn.execute("INSERT INTO messaging.inbox (consumer_group, message_id, topic, \"partition\", \"offset\")"
                     " VALUES ('catalog', %s, %s, 0, 0)", (applied, topics.PURCHASE_CHANGED))  # fmt: skip
        conn.execute(
            "INSERT INTO catalog.purchase (purchase_id, tenant_id, status, version) VALUES (%s, %s, 'Active', 5)",
            (purchase, uuid.uuid4()),
        )
        for offset, (message_id, version) in enumerate(((applied, 9), (stale, 3), (fresh, 7))):
            value = json.dumps({"MessageId": str(message_id), "PurchaseId": str(purchase), "Version": version})
            origin = Origin("catalog", topics.PURCHASE_CHANGED, 0, offset, 0, "ParkedByOperator", "parked", 4)
            index.write(
                conn, origin, str(purchase).encode(), value.encode(), [("message-id", str(message_id).encode())]
            )
    form = {"kind": "group", "scope": "filter", "f_group": "catalog", "reason": "how many?"}
    dry = operator.post("/console/dead-letters/act", data={**form, "action": "replay-dry-run"})
    assert dry.status_code == 200, dry.text
    assert _counts(dry.text) == (1, 1, 1)


def test_discard_both_kinds_keeps_the_letters_and_records_it(pool: ConnectionPool[Conn], operator: TestClient) -> None:
    with pool.connection() as conn:
        letter_id = index.write(conn, Origin("news", TOPIC, 0, 7, 0, "UnreadableMessageError", "not JSON", 3),
                                b"k", b"not json", [])  # fmt: skip
        conn.execute(
            "INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version,"
            " payload, headers, occurred_at, created_at, attempts, error) VALUES (42, %s, 1, %s, 'key-42', 'X', 1,"
            " '{}', '{}', now(), now(), 5, 'MSG_SIZE_TOO_LARGE')",
            (uuid.uuid4(), TOPIC),
        )
    group = operator.post("/console/dead-letters/act", data={"kind": "group", "scope": "selected", "id": str(letter_id),
                                                             "action": "discard", "reason": "garbage"})  # fmt: skip
    assert group.status_code == 200, group.text
    form = {"kind": "relay", "scope": "selected", "id": "42", "action": "discard", "reason": "obsolete event"}
    relay = operator.post("/console/dead-letters/act", data=form)
    assert relay.status_code == 200, relay.text
    assert rows(pool, "SELECT resolution FROM messaging.dead_letter_index")[0]["resolution"] == "discarded"
    assert not rows(pool, "SELECT 1 FROM outbox.dead_letter")
    assert rows(pool, "SELECT message_key FROM outbox.dead_letter_discarded")[0]["message_key"] == "key-42"
    assert [a["action"] for a in rows(pool, "SELECT action FROM operations.audit ORDER BY id")] == [
        "dlq.discard", "outbox.discard",
    ]  # fmt: skip
    shown = operator.get("/console/dead-letters", params={"resolved": "1"}).text
    assert "discarded" in shown
