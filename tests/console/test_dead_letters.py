"""The groups' dead letters in the console, made by a real consumer from a real hostile message on a real broker:
indexed as they are written (no page reads a dead-letter topic), listed, filtered, paginated, and shown escaped."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.store import Origin
from pin.settings import Settings
from tests.console.conftest import TestClient
from tests.consumers.conftest import settings  # noqa: F401 - the fixture
from tests.consumers.support import EVENT_TYPES, Producing, cancelled, rows, running, wait_for

pytestmark = pytest.mark.integration

HOSTILE = "<script>document.title='owned'</script>"
HOSTILE_KEY = "<img src=x onerror=alert(1)>"


@pytest.fixture
def console(settings: Settings, pool: ConnectionPool[Conn], token: Any) -> Iterator[TestClient]:  # noqa: F811
    """A client of the API on the consumer's database and broker, logged in as a viewer (a session)."""
    with TestClient(build_app(settings, pool), raise_server_exceptions=False) as client:
        minted = token(uuid.uuid4(), uuid.uuid4(), "viewer")
        assert client.post("/console/login", data={"token": minted}).status_code == 200
        yield client


def test_a_hostile_message_dead_lettered_by_a_real_consumer_is_indexed_listed_and_shown_escaped(
    settings: Settings,  # noqa: F811 - the fixture imported above
    pool: ConnectionPool[Conn],
    console: TestClient,
) -> None:
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    event["StartAt"] = HOSTILE  # the contract refuses it: unreadable, dead-lettered after its attempts
    producing = Producing(settings.kafka.require_bootstrap_servers())
    try:
        producing.send(topics.APPOINTMENT_CANCELLED, event, key=HOSTILE_KEY, headers={"x-note": HOSTILE})
    finally:
        producing.close()
    with running("crm", settings, pool):
        [row] = wait_for(
            lambda: rows(pool, "SELECT * FROM messaging.dead_letter_index WHERE consumer_group = 'crm'"),
            what="the index row of the dead letter",
        )
    assert row["key_text"] == HOSTILE_KEY
    assert str(row["message_id"]) == event["MessageId"]
    assert row["disposition"] == "whole"
    assert json.loads(bytes(row["message_value"]))["StartAt"] == HOSTILE

    listing = console.get("/console/dead-letters", params={"group": "crm"})
    assert listing.status_code == 200
    assert "&lt;img src=x onerror=alert(1)&gt;" in listing.text
    assert HOSTILE_KEY not in listing.text
    page = console.get(f"/console/dead-letters/group/{row['id']}")
    assert page.status_code == 200
    assert "&lt;script&gt;document.title=" in page.text  # the payload and the header, as text
    assert "<script>document" not in page.text
    assert "onerror=alert(1)>" not in page.text
    assert event["MessageId"] in page.text
    assert row["error_type"] in page.text
    key_page = console.get(f"/console/keys/{HOSTILE_KEY}")
    assert key_page.status_code == 200
    assert "dead-lettered its message" in key_page.text
    assert "<img src=x" not in key_page.text


def _letter(group: str, offset: int, *, key: str = "k", error: str = "ValueError") -> Origin:
    return Origin(group, topics.APPOINTMENT_CANCELLED, 0, offset, 0, error, f"{error}: bad", 1)


def test_the_dead_letters_filter_and_paginate_by_keyset(pool: ConnectionPool[Conn], console: TestClient) -> None:
    with pool.connection() as conn:
        for offset in range(120):
            group = "crm" if offset % 2 else "news"
            key = f"key-{offset % 3}".encode()
            index.write(conn, _letter(group, offset, error="KeyError" if offset % 5 == 0 else "ValueError"), key,
                        b"{}", [("event-type", EVENT_TYPES[topics.APPOINTMENT_CANCELLED].encode())])  # fmt: skip
    crm = console.get("/console/dead-letters", params={"group": "crm"}).text
    shown = crm.count('href="/console/dead-letters/group/')
    assert shown == 50  # one page
    assert "Next page" in crm
    ids: list[int] = []
    params: dict[str, str] = {"group": "crm", "key": "key-1", "error": "keyerror"}
    while True:
        page = console.get("/console/dead-letters", params=params).text
        ids += [int(part.split('"')[0]) for part in page.split('href="/console/dead-letters/group/')[1:]]
        if "Next page" not in page:
            break
        params["before"] = str(min(ids))
    # crm: odd offsets; key-1: offset % 3 == 1; KeyError: offset % 5 == 0 -> odd multiples of 5 with % 3 == 1
    expected = [o for o in range(120) if o % 2 and o % 3 == 1 and o % 5 == 0]
    assert len(ids) == len(expected) == len(set(ids))
    assert ids == sorted(ids, reverse=True)  # newest first
    bad = console.get("/console/dead-letters", params={"since": "yesterday"})
    assert bad.status_code == 400
    assert "RFC 3339" in bad.text
    assert "/console/dead-letters/act" not in crm  # a viewer sees no action form


def test_a_letter_the_index_does_not_take_is_held_and_never_in_the_topic_alone(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
) -> None:
    """The index is written before the letter is published: while the database refuses the index row, the message
    is held (nothing in the dead-letter topic), and once it takes it, the letter is in both."""
    from pin.messaging.consumer.dead_letters.command import read_dead_letters

    with pool.connection() as conn:
        conn.execute(
            "CREATE FUNCTION messaging.refuse_index() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " RAISE EXCEPTION 'index refused for the test' USING ERRCODE = 'data_exception'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse_index BEFORE INSERT ON messaging.dead_letter_index FOR EACH ROW"
            " EXECUTE FUNCTION messaging.refuse_index()"
        )
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    event["StartAt"] = "not a time"
    producing = Producing(settings.kafka.require_bootstrap_servers())
    try:
        producing.send(topics.APPOINTMENT_CANCELLED, event)
    finally:
        producing.close()
    with running("crm", settings, pool, backoff_base=0.1, backoff_cap=0.5):
        wait_for(
            lambda: rows(pool, "SELECT 1 FROM messaging.held_message WHERE consumer_group = 'crm'") or None,
            what="the message held while its index row is refused",
        )
        assert read_dead_letters(settings, ["crm"], idle_seconds=1.0) == []  # not in the topic without its row
        with pool.connection() as conn:
            conn.execute("DROP TRIGGER refuse_index ON messaging.dead_letter_index")
        [row] = wait_for(
            lambda: rows(pool, "SELECT message_id FROM messaging.dead_letter_index WHERE consumer_group = 'crm'"),
            what="the letter indexed once the database takes it",
        )
    assert str(row["message_id"]) == event["MessageId"]
    [letter] = read_dead_letters(settings, ["crm"], idle_seconds=1.0)
    assert letter.message_id == event["MessageId"]
