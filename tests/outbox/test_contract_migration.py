"""The breaking-change procedure end to end, with the tests' own contract pair (tests/outbox/migration_contracts.py):
both rows of each event from the one row builder in one transaction, both topics carry it through the real relay
and broker, a consumer group moved from v1 to v2 in the middle of a stream applies every event exactly once, and
the sunset is refused while a group still reads v1. docs/runbooks/contract-migration.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog
from psycopg_pool import ConnectionPool
from pydantic import ValidationError
from rich.console import Console
from structlog.testing import capture_logs

from pin import consumer_groups
from pin.contract_check import uncommitted_successors
from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime, Items, Route
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.reporting import warn_if_unknown_contract
from pin.messaging.contract_compat import compare
from pin.messaging.envelope import Decoded, decode_envelope
from pin.messaging.groups import select_routes
from pin.messaging.kafka import consumer_config, ensure_topics, producer_config
from pin.messaging.migrations import DEADLINE, V1_GROUPS, check_migrations, publishing, start_migrations
from pin.outbox.dead_letters import AmbiguousMessageIdError, dead_letter_discard, dead_letter_replay
from pin.outbox.relay import OutboxRelay
from pin.outbox.writer import MOVED_COLUMNS_SQL, RELAY_POLICY, MessageContext, OutboxMode, OutboxPolicy, build_rows
from pin.settings import ConfigurationError, Settings
from pin.status import render
from pin.status.collect import collect_status
from pin.unit_of_work import UnitOfWork
from tests.consumers.support import metric, running_runtimes
from tests.outbox.migration_contracts import (
    SAMPLE_DOCUMENTS,
    SAMPLE_EVENT_TYPE,
    SAMPLE_V1_TOPIC,
    SAMPLE_V2_TOPIC,
    SampleChanged,
    SampleChangedV2,
)
from tests.outbox.support import wait_for
from tests.support.kafka import read_topic

GROUP = "crm"  # a real group name (the setting knows only those) running the tests' own routes
SINCE = datetime(2026, 12, 1, tzinfo=UTC)


def _migration(**overrides: Any) -> dict[str, Any]:
    return {"since": SINCE.isoformat(), "deadline": (SINCE + timedelta(days=7)).isoformat(), **overrides}


def _settings(**migration: Any) -> Settings:
    """Settings with the sample event type in migration (``migration``: its fields)."""
    return Settings.model_validate({"contract_migrations": {SAMPLE_EVENT_TYPE: _migration(**migration)}})


# the outbox policies of a process with the sample event type dual-published, and after its sunset
DUAL = OutboxPolicy.of("relay", {SAMPLE_EVENT_TYPE: "dual"})
SUNSET = OutboxPolicy.of("relay", {SAMPLE_EVENT_TYPE: "v2"})


def _record(
    pool: ConnectionPool[Conn], sample_id: str, seq: int, colour: str = "red", *, outbox: OutboxPolicy = DUAL
) -> None:
    with UnitOfWork(pool, MessageContext("migration-test"), outbox=outbox) as uow:
        uow.record(*SampleChanged(sample_id=sample_id, seq=seq, colour=colour).recorded(), datetime.now(UTC))
        uow.commit()


def _outbox(pool: ConnectionPool[Conn]) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return list(
            conn.execute(
                "SELECT message_id, topic, contract_version, payload, xmin::text AS xid FROM outbox.message ORDER BY id"
            ).fetchall()
        )


# --- the contract version a route reads ---------------------------------------------------------------------


@pytest.mark.unit
def test_a_message_is_checked_against_its_routes_contract_version() -> None:
    """A v2 message on the successor's route is known; a v3 on it, or a v2 on the v1 route, is an unknown version;
    a route whose version is not its topic's is refused when the runtime is built."""
    payload = SampleChangedV2(sample_id="s", seq=1, color="red").model_dump(by_alias=True, mode="json")
    for version, route, warned in ((2, _ROUTES[SAMPLE_V2_TOPIC], False), (3, _ROUTES[SAMPLE_V2_TOPIC], True),
                                   (2, _ROUTES[SAMPLE_V1_TOPIC], True)):  # fmt: skip
        value = json.dumps({**payload, "MessageId": str(uuid.uuid4()), "ContractVersion": version}).encode()
        envelope = decode_envelope(value, {}, max_bytes=None)
        with capture_logs() as logs:
            item = Decoded(Received(SAMPLE_V2_TOPIC, 0, 0, None, value, [], 0), {}, envelope, route, None)
            warn_if_unknown_contract(structlog.get_logger("test"), item)
        assert [(e["contract_version"], e["expected"]) for e in logs] == (
            [(version, route.contract_version)] if warned else []
        )
    wrong = Route(SampleChangedV2.model_validate, _apply)  # the default: version 1
    with pytest.raises(ValueError, match="contract version 1"):
        ConsumerRuntime(group=GROUP, routes={SAMPLE_V2_TOPIC: wrong}, pool=None, consumer_config={},
                        producer_config={})  # type: ignore[arg-type]  # fmt: skip


# --- the rows ------------------------------------------------------------------------------------------------


@pytest.mark.unit
def test_outside_a_migration_an_event_is_one_row_of_its_contract() -> None:
    rows = build_rows(*SampleChanged(sample_id="s", seq=1, colour="red").recorded(), **_at(RELAY_POLICY))
    assert [(r.topic, r.contract_version) for r in rows] == [(SAMPLE_V1_TOPIC, 1)]


@pytest.mark.unit
def test_dual_publish_builds_both_rows_with_the_same_message_id_and_the_sunset_only_the_v2() -> None:
    v1, v2 = build_rows(*SampleChanged(sample_id="s", seq=3, colour="red").recorded(), **_at(DUAL))
    assert (v1.topic, v1.contract_version, v2.topic, v2.contract_version) == (SAMPLE_V1_TOPIC, 1, SAMPLE_V2_TOPIC, 2)
    assert v1.message_id == v2.message_id
    assert v1.key == v2.key == "s"
    assert v1.payload["Colour"] == v2.payload["Color"] == "red"
    assert "Colour" not in v2.payload
    assert (v1.payload["ContractVersion"], v2.payload["ContractVersion"]) == (1, 2)
    assert v1.payload["MessageId"] == v2.payload["MessageId"] == str(v1.message_id)
    SampleChangedV2.model_validate(v2.payload)  # the v2 row is a valid v2 message

    (only,) = build_rows(*SampleChanged(sample_id="s", seq=4, colour="blue").recorded(), **_at(SUNSET))
    assert (only.topic, only.payload["Color"]) == (SAMPLE_V2_TOPIC, "blue")


def _at(policy: OutboxPolicy) -> dict[str, Any]:
    return {"occurred_at": datetime.now(UTC), "context": MessageContext("unit"), "policy": policy}


@pytest.mark.integration
def test_both_rows_are_written_by_one_transaction_or_neither(pool: ConnectionPool[Conn]) -> None:
    with UnitOfWork(pool, MessageContext("rolled-back"), outbox=DUAL) as uow:
        uow.record(*SampleChanged(sample_id="a", seq=1, colour="red").recorded(), datetime.now(UTC))
        uow.rollback()
    assert _outbox(pool) == []  # recorded and rolled back: neither row

    _record(pool, "a", 2)

    v1, v2 = _outbox(pool)
    assert (v1["topic"], v2["topic"]) == (SAMPLE_V1_TOPIC, SAMPLE_V2_TOPIC)
    assert v1["message_id"] == v2["message_id"]
    # one transaction wrote both (the same xmin), with one statement: no commit point lies between them
    assert v1["xid"] == v2["xid"]
    assert (v1["payload"]["Colour"], v2["payload"]["Color"]) == ("red", "red")


# --- through the relay, the broker and a consumer group moved mid-stream ----------------------------------------


def _create_table(pool: ConnectionPool[Conn]) -> None:
    with pool.connection() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS public.sample_applied"
            " (message_id uuid NOT NULL, sample_id text NOT NULL, seq int NOT NULL, topic text NOT NULL, colour text)"
        )


def _apply(conn: Conn, items: Items[SampleChanged | SampleChangedV2]) -> None:
    for event, context in items:
        colour = event.colour if isinstance(event, SampleChanged) else event.color
        conn.execute(
            "INSERT INTO public.sample_applied VALUES (%s, %s, %s, %s, %s)",
            (context.message_id, event.sample_id, event.seq, context.topic, colour),
        )


# the group's code handles both versions; which one it reads is the setting (groups.select_routes)
_ROUTES: Mapping[str, Route[Any]] = {
    SAMPLE_V1_TOPIC: Route(SampleChanged.model_validate, _apply),
    SAMPLE_V2_TOPIC: Route(SampleChangedV2.model_validate, _apply, SampleChangedV2.CONTRACT_VERSION),
}


def _runtime(settings: Settings, pool: ConnectionPool[Conn]) -> ConsumerRuntime:
    routes = select_routes(GROUP, _ROUTES, settings.outbox.contract_migrations)
    return ConsumerRuntime(
        group=GROUP,
        routes=routes,
        pool=pool,
        consumer_config=consumer_config(settings, GROUP, **{"client.id": "migration-test"}),
        producer_config=producer_config(settings, **{"linger.ms": 0}),
        config=ConsumerConfig(
            backoff_base=0.05,
            backoff_cap=0.5,
            statistics_interval_ms=500,
            inbox_retention_seconds=settings.consumers.inbox_retention_seconds,
        ),
    )


def _publish_all(relay: OutboxRelay, pool: ConnectionPool[Conn]) -> None:
    def drained() -> bool:
        relay.heartbeat()  # keeps its leases (a 3 s lifetime in the tests)
        relay.run_once()
        return not _outbox(pool)

    wait_for(drained, timeout=60, what="the relay to publish every row")


def _counter(name: str) -> float:
    """The group's pin_consumer_<name>_total on the v2 topic (this process's: the runtimes run in it)."""
    return metric(f"pin_consumer_{name}_total", group=GROUP, topic=SAMPLE_V2_TOPIC)


def _applied(pool: ConnectionPool[Conn]) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return list(conn.execute("SELECT message_id, sample_id, seq, topic FROM public.sample_applied").fetchall())


@pytest.mark.integration
def test_a_group_moved_from_v1_to_v2_mid_stream_applies_every_event_exactly_once(
    pool: ConnectionPool[Conn],
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    new_relay: Callable[..., OutboxRelay],
) -> None:
    on_v1 = make_settings(
        kafka_bootstrap_servers=kafka.bootstrap_servers,
        kafka_session_timeout_ms=3000,
        contract_migrations={SAMPLE_EVENT_TYPE: _migration()},
    )
    on_v2 = on_v1.with_values(
        contract_migrations={SAMPLE_EVENT_TYPE: on_v1.outbox.contract_migrations[SAMPLE_EVENT_TYPE].model_copy(
            update={"v2_groups": (GROUP,)}
        )}
    )  # fmt: skip
    ensure_topics(on_v1, [SAMPLE_V1_TOPIC, SAMPLE_V2_TOPIC])
    # what every role does at start (pin.roles.start_role): dual-publish on
    outbox = OutboxPolicy.of("relay", publishing(start_migrations(on_v1, {SAMPLE_EVENT_TYPE: (GROUP,)})))
    assert outbox == DUAL
    _create_table(pool)
    relay = new_relay(on_v1)
    relay.heartbeat()
    keys = [f"sample-{k}" for k in range(5)]

    for seq in range(1, 7):  # 30 events, dual-published
        for key in keys:
            _record(pool, key, seq, outbox=outbox)
    _publish_all(relay, pool)
    # both topics carry every event, with the same MessageId and their own ContractVersion
    v1_records = read_topic(kafka.bootstrap_servers, SAMPLE_V1_TOPIC, expected=30)
    v2_records = read_topic(kafka.bootstrap_servers, SAMPLE_V2_TOPIC, expected=30)
    assert {r.headers["message-id"] for r in v1_records} == {r.headers["message-id"] for r in v2_records}
    assert {r.headers["contract-version"] for r in v1_records} == {"1"}
    assert {r.headers["contract-version"] for r in v2_records} == {"2"}
    assert all("Color" in r.json() and "Colour" not in r.json() for r in v2_records)

    with running_runtimes([_runtime(on_v1, pool)]):  # the group reads v1 ...
        wait_for(lambda: len(_applied(pool)) >= 12, timeout=60, what="the group to apply some v1 events")
        for seq in range(7, 10):  # ... while the stream goes on ...
            for key in keys:
                _record(pool, key, seq, outbox=outbox)
        _publish_all(relay, pool)
    via_v1 = len(_applied(pool))  # ... and is moved in the middle of it: what it has not applied yet, v2 brings
    for seq in range(10, 13):  # and the stream goes on while it moves
        for key in keys:
            _record(pool, key, seq, outbox=outbox)
    _publish_all(relay, pool)
    processed, duplicates = (_counter(name) for name in ("processed", "duplicates"))

    with capture_logs() as logs, running_runtimes([_runtime(on_v2, pool)]):  # now it reads v2, from its start
        wait_for(
            lambda: _counter("processed") - processed + _counter("duplicates") - duplicates >= 60,
            timeout=90,
            what="the group to read all 60 v2 messages",
        )  # fmt: skip
    # its route reads contract version 2: a v2 message is no "unknown contract version" (it was, on every one)
    assert [e for e in logs if e["event"] == "unknown contract version"] == []

    applied = _applied(pool)
    assert len(applied) == 60
    assert len({row["message_id"] for row in applied}) == 60  # every event exactly once
    by_topic = {topic: sum(1 for row in applied if row["topic"] == topic) for topic in _ROUTES}
    assert by_topic == {SAMPLE_V1_TOPIC: via_v1, SAMPLE_V2_TOPIC: 60 - via_v1}
    # the inbox absorbed the overlap: each event the group applied from v1 came again on v2 and was skipped
    skipped = _counter("duplicates") - duplicates
    assert skipped >= via_v1
    for key in keys:  # per key, in order
        seqs = sorted(row["seq"] for row in applied if row["sample_id"] == key)
        assert seqs == list(range(1, 13))


# --- the settings: window, routing, sunset, status, gauges -----------------------------------------------------


@pytest.mark.unit
def test_the_window_may_not_exceed_the_inbox_dedup_window() -> None:
    with pytest.raises(ValidationError, match="exceeds the inbox dedup window"):
        _settings(deadline=(SINCE + timedelta(days=15)).isoformat())
    with pytest.raises(ValidationError, match="exceeds the inbox dedup window"):
        Settings.model_validate(
            {"consumer_inbox_retention_seconds": 3 * 86_400, "contract_migrations": {SAMPLE_EVENT_TYPE: _migration()}}
        )
    with pytest.raises(ValidationError, match="deadline must be after since"):
        _settings(deadline=SINCE.isoformat())
    with pytest.raises(ValidationError, match="unknown consumer group"):
        _settings(v2_groups=["billing"])


@pytest.mark.unit
def test_a_group_reads_the_version_the_setting_gives_it() -> None:
    assert set(select_routes(GROUP, _ROUTES, {})) == {SAMPLE_V1_TOPIC}
    assert set(select_routes(GROUP, _ROUTES, _settings().outbox.contract_migrations)) == {SAMPLE_V1_TOPIC}
    moved = _settings(v2_groups=[GROUP]).outbox.contract_migrations
    assert set(select_routes(GROUP, _ROUTES, moved)) == {SAMPLE_V2_TOPIC}
    with pytest.raises(ConfigurationError, match="handles no such topic"):
        select_routes(GROUP, {SAMPLE_V1_TOPIC: _ROUTES[SAMPLE_V1_TOPIC]}, moved)


@pytest.mark.unit
def test_the_sunset_is_refused_while_a_group_still_reads_v1_unless_forced() -> None:
    readers = {SAMPLE_EVENT_TYPE: ("crm", "news")}
    with pytest.raises(ConfigurationError, match=r"sunset of pin.test.sample-changed refused: news still read"):
        check_migrations(_settings(publish="v2", v2_groups=["crm"]), readers)
    (forced,) = check_migrations(_settings(publish="v2", v2_groups=["crm"], force_sunset=True), readers)
    assert forced.v1_groups == ("news",)
    (done,) = check_migrations(_settings(publish="v2", v2_groups=["crm", "news"]), readers)
    assert (done.v1_groups, done.v2_groups) == ((), ("crm", "news"))


@pytest.mark.unit
def test_a_migration_of_an_event_type_without_a_successor_is_refused() -> None:
    settings = Settings.model_validate({"contract_migrations": {"pin.calendar.appointment-cancelled": _migration()}})
    with pytest.raises(ConfigurationError, match="has no successor contract"):
        check_migrations(settings, {})


@pytest.mark.unit
def test_start_exports_the_deadline_while_dual_publishing_and_warns_once_overdue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readers = {SAMPLE_EVENT_TYPE: ("crm", "news")}
    deadline = SINCE + timedelta(days=7)
    (state,) = start_migrations(_settings(v2_groups=["crm"]), readers, now=deadline - timedelta(hours=1))
    assert not state.overdue(deadline - timedelta(hours=1))
    exported = metric("pin_contract_migration_deadline_timestamp_seconds", event_type=SAMPLE_EVENT_TYPE)
    assert exported == deadline.timestamp()
    assert metric("pin_contract_migration_v1_groups", event_type=SAMPLE_EVENT_TYPE) == 1
    assert "contract migration overdue" not in capsys.readouterr().out

    start_migrations(_settings(v2_groups=["crm"]), readers, now=deadline + timedelta(minutes=1))
    assert "contract migration overdue" in capsys.readouterr().out

    start_migrations(_settings(publish="v2", v2_groups=["crm", "news"]), readers, now=deadline)
    assert (SAMPLE_EVENT_TYPE,) not in DEADLINE._metrics
    assert V1_GROUPS.labels(SAMPLE_EVENT_TYPE)._value.get() == 0


# --- the gate and the commands keyed by MessageId ----------------------------------------------------------------


@pytest.mark.unit
def test_the_gate_keeps_v1_frozen_and_checks_v2_against_its_own_committed_schema() -> None:
    committed = SAMPLE_DOCUMENTS.message_schemas()
    assert set(committed) == {f"{SAMPLE_EVENT_TYPE}.v1.schema.json", f"{SAMPLE_EVENT_TYPE}.v2.schema.json"}
    assert compare(committed, committed) == []
    # renaming v1's field is breaking (that is why v2 exists); v2 is held to its own committed schema from then on
    v1_renamed = dict(committed)
    v1_renamed[f"{SAMPLE_EVENT_TYPE}.v1.schema.json"] = committed[f"{SAMPLE_EVENT_TYPE}.v2.schema.json"]
    assert any(line.startswith(f"{SAMPLE_EVENT_TYPE}.v1:") for line in compare(committed, v1_renamed))
    v2_without_color = {name: dict(schema) for name, schema in committed.items()}
    v2 = v2_without_color[f"{SAMPLE_EVENT_TYPE}.v2.schema.json"]
    v2["properties"] = {k: v for k, v in v2["properties"].items() if k != "Color"}
    v2["required"] = [name for name in v2["required"] if name != "Color"]
    breaks = compare(committed, v2_without_color)
    assert breaks
    assert all(line.startswith(f"{SAMPLE_EVENT_TYPE}.v2:") for line in breaks)
    # a v2 whose schema was never committed is refused by the gate
    v1_only = {f"{SAMPLE_EVENT_TYPE}.v1.schema.json": committed[f"{SAMPLE_EVENT_TYPE}.v1.schema.json"]}
    (missing,) = uncommitted_successors(v1_only, (SAMPLE_DOCUMENTS,))
    assert missing.startswith(f"{SAMPLE_EVENT_TYPE}.v2: (contract): a successor of SampleChanged")
    assert uncommitted_successors(committed, (SAMPLE_DOCUMENTS,)) == []


@pytest.mark.integration
def test_the_dead_letter_commands_name_a_letter_by_message_id_and_topic(pool: ConnectionPool[Conn]) -> None:
    _record(pool, "dead", 1)
    (message_id,) = {row["message_id"] for row in _outbox(pool)}
    with pool.connection() as conn:  # the relay moved both rows aside (as it does: outbox_dead_letter)
        conn.execute(
            f"WITH moved AS (DELETE FROM outbox.message RETURNING *)"  # type: ignore[arg-type]
            f" INSERT INTO outbox.dead_letter ({MOVED_COLUMNS_SQL}, attempts, error, permanent)"
            f" SELECT {MOVED_COLUMNS_SQL}, attempts, 'TEST', true FROM moved"
        )
        conn.commit()
        with pytest.raises(AmbiguousMessageIdError, match="give --topic"):
            dead_letter_replay(conn, message_id, mode=OutboxMode.RELAY)
        conn.rollback()
        assert dead_letter_replay(conn, message_id, SAMPLE_V2_TOPIC, mode=OutboxMode.RELAY) == [message_id]
        assert dead_letter_discard(conn, uuid.uuid4()) is False
        assert dead_letter_discard(conn, message_id) is True  # the one left (v1): no topic needed
    assert [row["topic"] for row in _outbox(pool)] == [SAMPLE_V2_TOPIC]


# --- pin status ---------------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_pin_status_lists_the_groups_still_on_v1_and_the_deadline(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the routing table of the real groups does not read the tests' pair: say who reads it, as a route table would
    real = consumer_groups.topics_of
    monkeypatch.setattr(
        consumer_groups, "topics_of", lambda g: (*real(g), SAMPLE_V1_TOPIC) if g in {"crm", "news"} else real(g)
    )
    deadline = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)  # passed an hour ago
    window = {"since": (deadline - timedelta(days=7)).isoformat(), "deadline": deadline.isoformat()}
    settings = make_settings(contract_migrations={SAMPLE_EVENT_TYPE: _migration(v2_groups=["crm"], **window)})

    snapshot = collect_status(settings, kafka=False)

    (shown,) = json.loads(json.dumps(snapshot.document(), default=str))["contractMigrations"]
    assert shown == {
        "eventType": SAMPLE_EVENT_TYPE,
        "v1Topic": SAMPLE_V1_TOPIC,
        "v2Topic": SAMPLE_V2_TOPIC,
        "publish": "dual",
        "deadline": str(deadline),
        "overdue": True,
        "v1Groups": ["news"],
        "v2Groups": ["crm"],
    }
    console = Console(record=True, width=220, color_system=None)
    console.print(render(snapshot))
    text = console.export_text()
    assert "Contract migrations" in text
    row = next(line for line in text.splitlines() if SAMPLE_EVENT_TYPE in line)
    assert f"{SAMPLE_V1_TOPIC} + {SAMPLE_V2_TOPIC}" in row
    assert f"{deadline:%Y-%m-%d %H:%M:%S}Z overdue" in row
    assert "news" in row


@pytest.mark.integration
def test_pin_status_without_a_migration_shows_none(make_settings: Callable[..., Settings]) -> None:
    snapshot = collect_status(make_settings(), kafka=False)
    assert "contractMigrations" not in snapshot.document()


@pytest.mark.integration
def test_a_role_refuses_to_start_on_a_migration_it_cannot_carry_out(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "PIN_HOME": str(tmp_path),  # no `pin up` state to borrow from
        "PIN_CONTRACT_MIGRATIONS": json.dumps({"pin.calendar.appointment-cancelled": _migration()}),
    }
    command = [sys.executable, "-m", "pin", "relay", "--once"]
    started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert started.returncode == 2
    assert started.stderr.strip().splitlines() == [
        "pin: configuration error: PIN_CONTRACT_MIGRATIONS: 'pin.calendar.appointment-cancelled' has no successor"
        " contract (a v2 naming its PREDECESSOR)"
    ]
