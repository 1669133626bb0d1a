"""cdc mode at the WAL level: what Debezium's outbox router would read, read here with PostgreSQL's own pgoutput.

No Kafka Connect runs here. An embedded PostgreSQL with ``wal_level=logical`` gets the publication of
deploy/debezium/publication.sql and the connector's logical slot; every producer path runs in cdc mode (each HTTP
operation that emits, both workers on both of their write paths, a dead letter's replay); then the slot's changes
are decoded (tests/support/pgoutput.py) and the connector's field mapping (deploy/debezium/pin-outbox-connector.json)
is applied to each captured row. Each record must equal what the relay's own encoding makes of the same row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from psycopg_pool import ConnectionPool

from pin.bootstrap import build_app
from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob
from pin.db import Conn
from pin.local.embedded.postgres import EmbeddedPostgres
from pin.outbox.dead_letters import dead_letter_replay
from pin.outbox.relay.batch import PendingRow
from pin.outbox.relay.producing import _produce_row
from pin.outbox.writer import HEADER_COLUMNS, OutboxMode, OutboxPolicy
from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob
from pin.settings import Settings
from pin.status import collect_status
from tests.calendar.conftest import CalendarApi
from tests.calendar.worker.factory import seed_appointments
from tests.promotion.support import STANDARD_7D, db_now, fail_updates_of, seed_purchases
from tests.support.infra import TestDatabases
from tests.support.pgoutput import PgOutputDecoder, Transaction

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("cdc-wal")]

DEBEZIUM = Path(__file__).resolve().parents[2] / "deploy" / "debezium"
CONNECTOR: dict[str, str] = json.loads((DEBEZIUM / "pin-outbox-connector.json").read_text())["config"]
SLOT = CONNECTOR["slot.name"]
PUBLICATION = CONNECTOR["publication.name"]
HEARTBEAT_PREFIX = "pin-outbox-heartbeat"
# the headers a consumer reads (SPEC section 6): the envelope and the trace
CONSUMER_HEADERS = {"message-id", "event-type", "contract-version", "correlation-id", "traceparent"}


@pytest.fixture(scope="module")
def logical_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDatabases]:
    """A PostgreSQL of this module's own with wal_level=logical (the session's server keeps its settings)."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg-logical") / "postgres", logical_replication=True)
    server.start()
    databases = TestDatabases(server.url)
    try:
        yield databases
    finally:
        databases.close()
        server.destroy()


@pytest.fixture
def database_url(logical_databases: TestDatabases) -> Iterator[str]:
    """A fresh migrated database on the logical server, with the publication and the connector's slot."""
    url = logical_databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((DEBEZIUM / "publication.sql").read_text())  # type: ignore[arg-type]
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOT,))
        # what every producer path inserted, in id order, beside the stream (not in the publication)
        conn.execute("CREATE TABLE public.written (id bigint, message_id uuid, message_key text)")
        conn.execute(
            "CREATE FUNCTION public.log_written() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO public.written VALUES (NEW.id, NEW.message_id, NEW.message_key); RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER log_written AFTER INSERT ON outbox.message"
            " FOR EACH ROW EXECUTE FUNCTION public.log_written()"
        )
    yield url
    with psycopg.connect(url, autocommit=True) as conn:  # a database with a slot cannot be dropped
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s", (SLOT,)
        )
    logical_databases.drop(url)


@pytest.fixture
def api(client: Any, pool: ConnectionPool[Conn], token: Callable[..., str]) -> CalendarApi:
    """The calendar API helper (tests/calendar/conftest.py) on this module's database."""
    return CalendarApi(client, pool, token)


# What `pin <role>` with PIN_OUTBOX_MODE=cdc hands every unit of work (pin.roles.start_role)
CDC = OutboxPolicy(OutboxMode.CDC)


@pytest.fixture
def app(make_settings: Callable[..., Settings], pool: ConnectionPool[Conn]) -> FastAPI:
    """The real API writing in cdc mode, as `pin api` with PIN_OUTBOX_MODE=cdc does."""
    return build_app(make_settings(outbox_mode="cdc"), pool, CDC)


def _calendar_operations(api: CalendarApi) -> None:
    """Every calendar operation that emits: book, confirm, decline, agent cancel, investor cancel, reschedule."""
    agent = api.person("agent")
    investor = api.person("investor", tenant_id=agent.tenant_id)

    def ok(response: Any) -> dict[str, Any]:
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    confirmed = api.booked(agent, investor)
    ok(api.post(f"/calendar/appointments/{confirmed['id']}/confirm", agent))
    declined = api.booked(agent, investor)
    ok(api.post(f"/calendar/appointments/{declined['id']}/decline", agent, json={"reason": "busy"}))
    ok(api.post(f"/calendar/appointments/{confirmed['id']}/cancel", agent, json={"reason": "ill"}))
    mine = api.booked(agent, investor)
    ok(api.post(f"/calendar/my/appointments/{mine['id']}/cancel", investor))
    moved = api.booked(agent, investor)
    other = api.create_slot(agent, starts_in=timedelta(days=4))
    ok(api.post(f"/calendar/my/appointments/{moved['id']}/reschedule", investor, json={"newSlotId": other["id"]}))


def _promotion_operations(api: CalendarApi) -> None:
    """Activate a purchase and cancel it (the promotion HTTP API)."""
    manager = api.person("manager")
    body = {"packageId": str(STANDARD_7D), "targets": [{"targetKind": "Project", "targetId": str(uuid.uuid4())}]}
    response = api.client.post("/promotions", json=body, headers=manager.headers)
    assert response.status_code == 201, response.text
    cancelled = api.client.post(f"/promotions/{response.json()['id']}/cancel", headers=manager.headers)
    assert cancelled.status_code == 200, cancelled.text


def _workers(pool: ConnectionPool[Conn]) -> None:
    """Both workers: appointment-timeout (one statement per item), expire-promotions (the set-based batch, then
    item by item after the batch write fails on a poison purchase)."""
    seed_appointments(pool, 3)
    assert (
        AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(batch_size=10), outbox=CDC).run_once().expired_count == 3
    )
    now = db_now(pool)
    seed_purchases(pool, 3, ends_at=now - timedelta(minutes=1), outbox=CDC)
    assert ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=10), outbox=CDC).run_once().expired_count == 3
    poison, healthy = seed_purchases(pool, 2, ends_at=now - timedelta(minutes=1), outbox=CDC)
    fail_updates_of(pool, poison.id)
    assert ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=10), outbox=CDC).run_once().expired_count == 1
    del healthy


def _replay_a_dead_letter(pool: ConnectionPool[Conn]) -> uuid.UUID:
    """A dead letter written by the relay before the value column existed (no value, no header columns), replayed."""
    message_id = uuid.uuid4()
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version,"
            " payload, headers, occurred_at, created_at, attempts, error) VALUES (1, %s, 3, 'pin.test.thing.v1',"
            " 'thing-1', 'pin.test.thing', 2, %s, %s, now(), now(), 10, 'MSG_SIZE_TOO_LARGE')",
            (
                message_id,
                json.dumps({"ThingId": "thing-1", "Note": "caf\u00e9 \u2028", "N": 1.5, "MessageId": str(message_id)}),
                json.dumps(
                    {
                        "correlation-id": "run-7",
                        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    }
                ),
            ),
        )
        conn.commit()
        assert dead_letter_replay(conn, message_id, mode=CDC.mode) == [message_id]
    return message_id


def _slot_changes(url: str, *, messages: bool = False) -> PgOutputDecoder:
    """The slot's changes since the last read, decoded (consumed, as the connector confirms them)."""
    options = ["proto_version", "1", "publication_names", PUBLICATION, "messages", "true" if messages else "false"]
    decoder = PgOutputDecoder()
    with psycopg.connect(url, autocommit=True) as conn:
        for (data,) in conn.execute(
            "SELECT data FROM pg_logical_slot_get_binary_changes(%s, NULL, NULL, VARIADIC %s::text[])", (SLOT, options)
        ):
            decoder.feed(bytes(data))
    return decoder


def _router_record(row: dict[str, str | None]) -> tuple[str, bytes, bytes, dict[str, str]]:
    """The record Debezium's outbox router makes of a captured row, by the connector configuration's mapping:
    topic, key and value (StringConverter: the column's text as UTF-8), and headers (its own ``id``, then each
    additional placement as a header), less those the DropHeaders transform drops."""
    topic = CONNECTOR["transforms.outbox.route.topic.replacement"].replace(
        "${routedByValue}", str(row[CONNECTOR["transforms.outbox.route.by.field"]])
    )
    key = str(row[CONNECTOR["transforms.outbox.table.field.event.key"]]).encode()
    value = str(row[CONNECTOR["transforms.outbox.table.field.event.payload"]]).encode()
    headers = {"id": str(row[CONNECTOR["transforms.outbox.table.field.event.id"]])}
    for placement in CONNECTOR["transforms.outbox.table.fields.additional.placement"].split(","):
        column, where, alias = placement.split(":")
        assert where == "header"
        if row[column] is not None:  # a NULL column (no trace): no header, as the relay sends none
            headers[alias] = str(row[column])
    for dropped in CONNECTOR["transforms.dropRouterId.headers"].split(","):
        headers.pop(dropped)
    return topic, key, value, headers


class _Recorder:
    """Records what the relay's producing code hands to librdkafka (which sends str as UTF-8)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes, list[tuple[str, str]]]] = []

    def produce(self, topic: str, value: str | bytes, key: str, **kwargs: Any) -> None:
        raw = value.encode() if isinstance(value, str) else value
        self.records.append((topic, key.encode(), raw, [(n, str(v)) for n, v in kwargs["headers"]]))


def _relay_record(row: dict[str, str | None]) -> tuple[str, bytes, bytes, dict[str, str]]:
    """What `pin relay` sends for the same row: its read's columns through its own producing code."""
    pending = PendingRow(
        id=int(str(row["id"])),
        message_id=str(row["message_id"]),
        vpart=int(str(row["vpart"])),
        epoch=1,
        topic=str(row["topic"]),
        key=str(row["message_key"]),
        event_type=str(row["event_type"]),
        contract_version=int(str(row["contract_version"])),
        value=row["value"],
        payload=row["payload"] if row["value"] is None else None,
        headers=str(row["headers"]),
        attempts=0,
    )
    recorder = _Recorder()
    _produce_row(recorder, pending, {})  # type: ignore[arg-type]
    [(topic, key, value, headers)] = recorder.records
    assert len({name for name, _ in headers}) == len(headers), headers
    return topic, key, value, dict(headers)


def _captured(transactions: list[Transaction]) -> list[dict[str, str | None]]:
    """Every captured outbox row, in stream order; the stream holds inserts of outbox.message only."""
    rows = []
    for transaction in transactions:
        for change in transaction.changes:
            assert (change.relation, change.op) == ("outbox.message", "I"), (change.relation, change.op)
            rows.append(change.row)
    return rows


def test_every_producer_path_in_cdc_mode_reaches_the_wal_as_the_routers_records_equal_to_the_relays(
    api: CalendarApi,
    pool: ConnectionPool[Conn],
    database_url: str,
    make_settings: Callable[..., Settings],
) -> None:
    _calendar_operations(api)
    _promotion_operations(api)
    _workers(pool)
    replayed = _replay_a_dead_letter(pool)

    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone() == {"n": 0}  # the table is empty
        written = conn.execute("SELECT id, message_id::text, message_key FROM public.written ORDER BY id").fetchall()
    status = collect_status(make_settings(outbox_mode="cdc"), kafka=False)["outbox"]["cdc"]
    assert (status["slot"], status["exists"], status["active"]) == (SLOT, True, False)
    assert status["retainedWalBytes"] > 0  # the slot keeps the WAL nobody read yet

    stream = _slot_changes(database_url)
    captured = _captured(stream.transactions)

    # every event exactly once
    assert sorted(str(r["message_id"]) for r in captured) == sorted(str(w["message_id"]) for w in written)
    assert len(written) >= 30
    # per key, in commit order: the stream's order of a key's rows is their id order (the writer's guarantee)
    by_key: dict[str, list[int]] = {}
    for row in captured:
        by_key.setdefault(str(row["message_key"]), []).append(int(str(row["id"])))
    assert all(ids == sorted(ids) for ids in by_key.values()), by_key
    assert any(len(ids) > 1 for ids in by_key.values())
    topics = {str(r["topic"]) for r in captured}
    assert len(topics) == 6  # the five integration topics and the replayed letter's
    for row in captured:
        # every field the router's configuration names is there
        for column in (*HEADER_COLUMNS.values(), "message_key", "value", "topic"):
            assert column in row
        assert row["value"] is not None, row
        assert row["correlation_id"] is not None, row
        router, relay = _router_record(row), _relay_record(row)
        assert router == relay, (router, relay)
        assert set(router[3]) >= CONSUMER_HEADERS - {"traceparent"}
    letter = next(r for r in captured if r["message_id"] == str(replayed))
    assert (letter["id"], letter["correlation_id"]) == ("1", "run-7")
    assert _router_record(letter)[3]["traceparent"].startswith("00-0af76519")


def test_the_heartbeat_query_reaches_the_slot_while_the_outbox_is_quiet(database_url: str) -> None:
    """Debezium confirms an LSN only for what it receives: the connector's heartbeat query emits a logical message
    through the same slot, so a quiet outbox does not pin the WAL."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(CONNECTOR["heartbeat.action.query"])  # type: ignore[arg-type]
    stream = _slot_changes(database_url, messages=True)
    [heartbeat] = stream.transactions  # transactional: flushed at its commit, so the reader gets it at once
    assert (heartbeat.changes, [prefix for prefix, _ in heartbeat.messages]) == ([], [HEARTBEAT_PREFIX])
    assert HEARTBEAT_PREFIX in CONNECTOR["message.prefix.exclude.list"]  # not sent on as a record
