"""`pin status` against a real database (and a real broker): what an operator sees, and n/a for what is missing."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from psycopg_pool import ConnectionPool
from rich.console import Console

from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import store
from pin.messaging.kafka import ensure_topics
from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob
from pin.settings import Settings
from pin.status import collect_status, render
from tests.promotion.support import db_now, seed_purchases


def _text(report: dict[str, Any]) -> str:
    console = Console(record=True, width=220, color_system=None)
    console.print(render(report))
    return console.export_text()


def _promotion(report: dict[str, Any]) -> dict[str, Any]:
    (worker,) = [w for w in report["workers"] if w["job"] == "expire-promotions"]
    return worker


@pytest.mark.integration
def test_status_shows_a_backlog_draining_cycle_by_cycle(
    pool: ConnectionPool[Conn], make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings()
    now = db_now(pool)
    overdue = seed_purchases(pool, 5, ends_at=now - timedelta(minutes=10))
    seed_purchases(pool, 2, ends_at=now + timedelta(hours=2))  # not due: never counted
    oldest = min(overdue, key=lambda p: (p.ends_at, p.id))

    before = collect_status(settings, kafka=False)
    worker = _promotion(before)
    assert worker["backlog"]["backlog"] == 5
    assert worker["backlog"]["oldestId"] == str(oldest.id)
    assert worker["backlog"]["oldestOverdueSeconds"] >= 600
    assert worker["instances"] == []  # no cycle yet
    outbox = before["outbox"]["backlog"]
    assert {t["topic"]: t["rows"] for t in outbox["topics"]} == {topics.PURCHASE_CHANGED: 7}  # the activations
    assert "no cycle yet" in _text(before)

    job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=2, instance="ops-test-1"))
    backlogs = []
    for _ in range(3):
        job.run_once()
        backlogs.append(_promotion(collect_status(settings, kafka=False))["backlog"]["backlog"])
    assert backlogs == [3, 1, 0]  # the operator watches it drain

    after = collect_status(settings, kafka=False)
    (instance,) = _promotion(after)["instances"]
    assert instance["instance"] == "ops-test-1"
    assert instance["succeeded"] is True
    assert instance["counters"]["ExpiredCount"] == 1  # the last cycle's own counters
    rows = {t["topic"]: t["rows"] for t in after["outbox"]["backlog"]["topics"]}
    assert rows == {topics.PURCHASE_CHANGED: 12}  # 7 activations + 5 expiries wait for the relay
    text = _text(after)
    assert "ops-test-1" in text
    assert "ExpiredCount=1" in text


@pytest.mark.integration
def test_status_shows_poison_items_dead_letters_parked_letters_and_relay_leases(
    pool: ConnectionPool[Conn], make_settings: Callable[..., Settings]
) -> None:
    with pool.connection() as conn:
        poison_ids = [uuid.uuid4() for _ in range(7)]
        for n, item_id in enumerate(poison_ids):  # the first fails longest, with the most attempts
            conn.execute(
                "INSERT INTO jobs.item_failure (job, item_id, attempts, last_error, first_failed_at)"
                " VALUES ('appointment-timeout', %s, %s, 'SlotNotBookedError: ...', now() - make_interval(mins => %s))",
                (item_id, 10 - n, 60 - n),
            )
        conn.execute(
            """
            INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version,
                                            payload, headers, occurred_at, created_at, attempts, error)
            VALUES (42, %s, 7, %s, 'k-1', 'pin.calendar.appointment-cancelled', 1, '{}', '{}', now(), now(), 10,
                    'MSG_SIZE_TOO_LARGE')
            """,
            (uuid.uuid4(), topics.APPOINTMENT_CANCELLED),
        )
        conn.execute(
            "INSERT INTO outbox.relay_instance (instance_id, expires_at)"
            " VALUES ('relay-a', now() + interval '1 minute'), ('relay-b', now() - interval '1 second')"
        )
        conn.execute("UPDATE outbox.relay_lease SET owner = 'relay-a' WHERE vpart < 40")
        for offset in (5, 6):  # two letters of notifications the dead-letter topic never took
            origin = store.Origin("notifications", topics.APPOINTMENT_CANCELLED, 0, offset, 0,
                                              "UnreadableMessageError", "invalid payload", 1)  # fmt: skip
            store.store(conn, origin, b"k", b"{}", [], disposition=store.PARKED)
        for i in range(12):  # twelve restarts: twelve host:pid instances, the oldest long gone
            conn.execute(
                "INSERT INTO jobs.cycle (job, instance, run_id, as_of, finished_at, duration_ms, counters, succeeded)"
                " VALUES ('expire-promotions', %s, %s, now(), now() - make_interval(mins => %s), 5, '{}', true)",
                (f"host:{1000 + i}", uuid.uuid4(), i),
            )
        conn.execute("UPDATE outbox.relay_lease SET owner = 'relay-b' WHERE vpart >= 40")

    report = collect_status(make_settings(), kafka=False)
    (timeout_worker,) = [w for w in report["workers"] if w["job"] == "appointment-timeout"]
    assert timeout_worker["poison"]["items"] == 7
    assert timeout_worker["poison"]["maxAttempts"] == 10
    listed = timeout_worker["poison"]["oldest"]
    assert [(p["id"], p["attempts"]) for p in listed] == [(str(i), 10 - n) for n, i in enumerate(poison_ids[:5])]
    assert listed[0]["lastError"] == "SlotNotBookedError: ..."
    assert report["outbox"]["deadLetters"]["total"] == 1
    leases = report["outbox"]["leases"]
    assert leases["relays"][0]["owner"] == "relay-a"
    assert leases["relays"][0]["vparts"] == 40
    assert leases["unownedVparts"] == 24  # relay-b's leases expired: those vparts have no publisher
    instances = _promotion(report)["instances"]
    assert [i["instance"] for i in instances] == [f"host:{1000 + i}" for i in range(10)]  # newest first
    assert _promotion(report)["olderInstances"] == 2
    parked = {c["group"]: c["inbox"]["parkedLetters"] for c in report["consumers"]}
    assert parked == {group: 2 if group == "notifications" else 0 for group in topics.CONSUMER_GROUPS}
    text = _text(report)
    assert "2 older instances" in text
    assert "24 of 64 vparts unowned" in text
    assert "7 (up to 10 attempts)" in text
    assert str(poison_ids[0]) in text  # the poison items themselves, the longest failing first
    assert str(poison_ids[5]) not in text
    assert "2 more poison items not shown" in text


@pytest.mark.integration
def test_missing_tables_show_na_and_the_rest_still_reports(database_url: str, settings_env: dict[str, str]) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA calendar CASCADE")  # a context that is not deployed yet
        conn.execute("DROP TABLE jobs.cycle")
    env = {**os.environ, **settings_env}
    env.pop("PIN_KAFKA_BOOTSTRAP_SERVERS", None)
    runs = {
        form: subprocess.run(
            [sys.executable, "-m", "pin", "status", *form],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        for form in ((), ("--json",))
    }
    for result in runs.values():
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stdout + result.stderr
    assert "n/a: not deployed yet" in runs[()].stdout
    assert "expire-promotions" in runs[()].stdout  # the rest still reads
    report = json.loads(runs[("--json",)].stdout)
    (timeout_worker,) = [w for w in report["workers"] if w["job"] == "appointment-timeout"]
    assert timeout_worker["backlog"]["na"] == 'not deployed yet (relation "calendar.appointment" does not exist)'
    assert timeout_worker["instances"]["na"] == 'not deployed yet (relation "jobs.cycle" does not exist)'
    assert _promotion(report)["backlog"]["backlog"] == 0
    assert report["consumers"][0]["broker"]["na"] == "PIN_KAFKA_BOOTSTRAP_SERVERS is not set"


@pytest.mark.integration
def test_an_unreachable_database_is_na_not_a_stack_trace() -> None:
    settings = Settings(database_url="postgresql://nobody@127.0.0.1:1/none", kafka_bootstrap_servers=None)
    report = collect_status(settings)
    assert report["database"]["na"].startswith("database unreachable")
    assert all(w["backlog"]["na"].startswith("database unreachable") for w in report["workers"])
    assert "n/a: database unreachable" in _text(report)


@pytest.mark.integration
def test_consumer_groups_committed_offsets_and_missing_topics(
    kafka: EmbeddedKafka, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    before = collect_status(settings)
    crm = next(c for c in before["consumers"] if c["group"] == "crm")["broker"]
    assert topics.APPOINTMENT_CANCELLED in crm["missingTopics"]
    assert crm["partitions"] == []

    ensure_topics(settings)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(4):
        producer.produce(topics.APPOINTMENT_CANCELLED, key=f"k{i}".encode(), value=b"{}", partition=1)
    producer.produce(topics.dead_letter_topic("crm"), key=b"k", value=b"{}")
    assert producer.flush(15) == 0
    committer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "crm", "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topics.APPOINTMENT_CANCELLED, 1, 3)], asynchronous=False)
    committer.close()

    report = collect_status(settings)
    by_group = {c["group"]: c["broker"] for c in report["consumers"]}
    crm_partitions = {(p["topic"], p["partition"]): p for p in by_group["crm"]["partitions"]}
    assert crm_partitions[(topics.APPOINTMENT_CANCELLED, 1)]["committed"] == 3
    assert crm_partitions[(topics.APPOINTMENT_CANCELLED, 0)]["committed"] is None
    assert by_group["crm"]["missingTopics"] == []
    assert isinstance(by_group["crm"]["deadLettered"], int)  # a count from watermarks: informational on Tansu
    notifications = {(p["topic"], p["partition"]) for p in by_group["notifications"]["partitions"]}
    assert (topics.PURCHASE_CHANGED, 2) in notifications  # every topic the group reads, every partition
    assert "informational" in _text(report)


@contextlib.contextmanager
def _sigint_as_at_a_terminal() -> Iterator[None]:
    """Children started inside get SIGINT delivered and not ignored, as from a shell, whatever the runner's state.

    An ignored or blocked signal survives exec: seen in the full suite, where the child of this test inherited a
    SIGINT that never arrived (faulthandler showed it still sleeping in its refresh loop 15 s after the Ctrl-C).
    """
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)


def _read_available(fd: int) -> bytes:
    """What the terminal has for us within 0.2 s (nothing once the other side is closed)."""
    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the process exited and closed its side
        return b""


@pytest.mark.integration
def test_watch_refreshes_in_place_and_stops_cleanly_on_ctrl_c(settings_env: dict[str, str], tmp_path: Path) -> None:
    primary, replica = pty.openpty()
    env = {**os.environ, **settings_env, "COLUMNS": "160", "LINES": "60", "TERM": "xterm-256color"}
    env.pop("PIN_KAFKA_BOOTSTRAP_SERVERS", None)
    with _sigint_as_at_a_terminal():
        process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "pin", "status", "--watch", "--interval", "0.5"],
            env=env,
            stdin=replica,
            stdout=replica,
            stderr=replica,
            close_fds=True,
        )
    os.close(replica)
    output = b""
    deadline = time.monotonic() + 30
    try:
        # wait for at least three frames (one header per frame)
        while output.count(b"pin status") < 3 and time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    output += os.read(primary, 65536)
                except OSError:
                    break
        assert output.count(b"pin status") >= 3, output[-2000:]
        process.send_signal(signal.SIGINT)
        # keep reading while it stops: a terminal nobody reads fills up and blocks the process's last writes
        stop_deadline = time.monotonic() + 15
        while process.poll() is None and time.monotonic() < stop_deadline:
            output += _read_available(primary)
        if process.poll() is None:  # hung: faulthandler prints every thread's stack on SIGABRT, for the report
            process.send_signal(signal.SIGABRT)
            for _ in range(10):
                output += _read_available(primary)
        assert process.wait(5) == 0, output[-6000:].decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
        os.close(primary)
    assert b"Traceback" not in output
    assert b"\x1b[2K" in output or b"\x1b[1A" in output  # rich's Live moves the cursor up and redraws in place


@pytest.mark.integration
def test_status_names_what_holds_the_xmin_horizon(database_url: str, make_settings: Callable[..., Settings]) -> None:
    """The holder by pid, application and age: what the runbook's "The xmin horizon" starts from."""
    with psycopg.connect(database_url, application_name="forgotten-psql") as holder:
        holder.execute("SELECT txid_current()")
        row = holder.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        time.sleep(1.1)
        report = collect_status(make_settings(), kafka=False)
        holder.rollback()
    (named,) = [h for h in report["xminHorizon"]["holders"] if h["pid"] == row[0]]
    assert named["holder"] == "transaction"
    assert named["application"] == "forgotten-psql"
    assert named["ageSeconds"] >= 1
    assert named["ageTransactions"] >= 0
    text = _text(report)
    assert f"transaction pid {row[0]} (forgotten-psql)" in text
