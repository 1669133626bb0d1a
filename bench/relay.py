"""The outbox relay: drain throughput of 100,000 rows and commit -> ack latency at a steady 500 events/s, each
against a bare confluent-kafka producer (configured as the relay's) sending the same messages to the same broker.

Throughput: the rows are copies of real outbox rows (the workers' own payloads, fresh ids), COPYed in one
transaction; ``pin relay`` starts blocked behind a bench lock on outbox.message, released at T0; the drain ends
when the table is empty (polled every 0.1 s).

Latency: ``pin relay`` runs idle; the bench inserts one outbox row per transaction at a steady rate through
:func:`pin.outbox.writer.outbox_insert` (the writer every use case uses) from four threads. A bench-only trigger
(AFTER DELETE, in the bench database only) records when the relay deleted each row, which it does right after
the broker acknowledged it; latency = that time minus the row's ``created_at`` (set at insert, just before the
commit), both on the database clock. This is the definition of ``pin_outbox_publish_latency_seconds``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg

from bench import kafka as bare
from bench.env import BenchEnv
from bench.results import median, percentile
from bench.seed import MessageFactory, copy_outbox
from bench.timeout import _wait_blocked
from pin.db import connect
from pin.messaging import topics
from pin.outbox.floors import PLAN_BY_INDEX
from pin.outbox.gauges import OUTBOX_BACKLOG_BY_TOPIC
from pin.outbox.relay.kept_floors import KeptFloors
from pin.outbox.writer import OutboxRow, outbox_insert

# The mix the calendar produces: every ending writes appointment-cancelled and event-status-changed.
SOURCES = (topics.APPOINTMENT_CANCELLED, topics.EVENT_STATUS_CHANGED, topics.PURCHASE_CHANGED)

_ACK_LOG = """
CREATE TABLE public.bench_ack (
    message_id uuid, topic text, message_key text, created_at timestamptz, deleted_at timestamptz
);
CREATE FUNCTION public.bench_ack_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.bench_ack VALUES (OLD.message_id, OLD.topic, OLD.message_key, OLD.created_at, clock_timestamp());
    RETURN NULL;
END $$;
CREATE TRIGGER bench_ack AFTER DELETE ON outbox.message FOR EACH ROW EXECUTE FUNCTION public.bench_ack_log();
"""


def _messages(factory: MessageFactory, count: int, topic_of: dict[str, str]) -> list[dict[str, Any]]:
    sources = [s for s in SOURCES if s in factory.templates]
    return [factory.make(sources[n % len(sources)], n, topic=topic_of[sources[n % len(sources)]]) for n in range(count)]


def _as_kafka(messages: Sequence[dict[str, Any]], topic_of: dict[str, str] | None = None) -> list[bare.Message]:
    out: list[bare.Message] = []
    for m in messages:
        topic = topic_of[m["topic"]] if topic_of else m["topic"]
        out.append((topic, m["message_key"].encode(), MessageFactory.kafka_value(m), MessageFactory.kafka_headers(m)))
    return out


def throughput(env: BenchEnv, factory: MessageFactory, count: int) -> dict[str, Any]:
    """Relay drain of ``count`` rows vs the bare producer on the same messages."""
    env.restart_broker()
    relay_topics = {s: env.topic(f"relay-{s.split('.')[2]}") for s in SOURCES}
    bare_topics = {s: env.topic(f"bare-{s.split('.')[2]}") for s in SOURCES}
    bare.create_topics(env.kafka_bootstrap, [*relay_topics.values(), *bare_topics.values()])
    messages = _messages(factory, count, relay_topics)
    by_relay = {v: k for k, v in relay_topics.items()}
    baseline = bare.produce_all(
        env.kafka_bootstrap, _as_kafka(messages, {t: bare_topics[by_relay[t]] for t in by_relay})
    )
    url = env.fresh_database("relay")
    with connect(url) as conn:
        copy_outbox(conn, iter(messages), datetime.now(UTC))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE outbox.message")
    del messages
    holder = psycopg.connect(url)
    holder.execute("LOCK TABLE outbox.message IN ACCESS EXCLUSIVE MODE")
    role = env.spawn_pin("relay", ["relay"], env.role_env(url))
    try:
        _wait_blocked(env, url, 1)
        holder.commit()
        holder.close()
        started = time.perf_counter()
        samples: list[tuple[float, int]] = []
        with connect(url, autocommit=True) as conn:
            while True:
                row = conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone()
                assert row is not None
                samples.append((time.perf_counter() - started, int(row["n"])))
                if row["n"] == 0:
                    break
                if role.process.poll() is not None:
                    raise RuntimeError(f"bench: the relay exited; see {role.log_path}")
                if samples[-1][0] > 1200:
                    raise RuntimeError("bench: the relay did not drain in 20 minutes")
                time.sleep(0.1)
            dead = conn.execute("SELECT count(*) AS n FROM outbox.dead_letter").fetchone()
    finally:
        env.stop_roles([role])
    seconds = samples[-1][0]
    env.drop_database(url)
    return {
        "count": count,
        "seconds": seconds,
        "messages_per_second": count / seconds,
        "baseline_messages_per_second": baseline["messages_per_second"],
        "baseline_seconds": baseline["seconds"],
        "dead_lettered": dead["n"] if dead else None,
        "samples": samples,
    }


def _generate(url: str, rows: Sequence[OutboxRow], rate: float, threads: int) -> dict[str, Any]:
    """Insert ``rows`` one per transaction at ``rate`` rows/s in total, from ``threads`` connections."""
    started = time.perf_counter() + 0.2
    late: list[float] = []

    def work(offset: int) -> None:
        with psycopg.connect(url) as conn:
            for i in range(offset, len(rows), threads):
                wait = started + i / rate - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                else:
                    late.append(-wait)
                outbox_insert(conn, [rows[i]])
                conn.commit()

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - started
    return {"rows": len(rows), "rate": len(rows) / seconds, "late_p99_ms": percentile([x * 1000 for x in late], 99)}


def latency(env: BenchEnv, factory: MessageFactory, rate: float, seconds: float) -> dict[str, Any]:
    """Commit -> ack latency through the relay at a steady ``rate``, and the bare producer's produce -> ack."""
    env.restart_broker()
    count = int(rate * seconds)
    relay_topics = {s: env.topic(f"lat-{s.split('.')[2]}") for s in SOURCES}
    bare_topics = {s: env.topic(f"latbare-{s.split('.')[2]}") for s in SOURCES}
    bare.create_topics(env.kafka_bootstrap, [*relay_topics.values(), *bare_topics.values()])
    messages = _messages(factory, count, relay_topics)
    by_relay = {v: k for k, v in relay_topics.items()}
    baseline = bare.produce_paced(
        env.kafka_bootstrap, _as_kafka(messages, {t: bare_topics[by_relay[t]] for t in by_relay}), rate
    )
    url = env.fresh_database("relay_latency")
    with connect(url, autocommit=True) as conn:
        conn.execute(_ACK_LOG)
    role = env.spawn_pin("relay-latency", ["relay"], env.role_env(url))
    try:
        if not role.wait_for_log("outbox relay started", 60):
            raise RuntimeError(f"bench: the relay did not start; see {role.log_path}")
        time.sleep(1.0)  # its LISTEN connection is up
        now = datetime.now(UTC)
        rows = [
            OutboxRow(
                message_id=uuid.UUID(m["message_id"]),
                topic=m["topic"],
                key=m["message_key"],
                event_type=m["event_type"],
                contract_version=m["contract_version"],
                payload=m["payload"],
                headers=m["headers"],
                occurred_at=now,
            )
            for m in messages
        ]
        generated = _generate(url, rows, rate, threads=4)
        deadline = time.monotonic() + 60
        with connect(url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                left = conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone()
                if left is not None and left["n"] == 0:
                    break
                time.sleep(0.2)
            acks = conn.execute(
                "SELECT EXTRACT(EPOCH FROM deleted_at - created_at)::float8 * 1000 AS ms, created_at "
                "FROM public.bench_ack ORDER BY created_at"
            ).fetchall()
    finally:
        env.stop_roles([role])
    env.drop_database(url)
    first = acks[0]["created_at"] if acks else None
    # the first second is the relay's warm-up (its first statements get prepared); not steady state
    ms = [r["ms"] for r in acks if first is not None and (r["created_at"] - first).total_seconds() >= 1.0]
    return {
        "target_rate": rate,
        "achieved_rate": generated["rate"],
        "generator_late_p99_ms": generated["late_p99_ms"],
        "acked": len(acks),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
        "latencies_ms": ms,
        "baseline": baseline,
    }


def profile(env: BenchEnv, factory: MessageFactory, count: int) -> dict[str, Any]:
    """cProfile of the relay's publishing path (`pin relay --once`) over ``count`` rows."""
    import json
    import sys

    relay_topics = {s: env.topic(f"prof-{s.split('.')[2]}") for s in SOURCES}
    bare.create_topics(env.kafka_bootstrap, list(relay_topics.values()))
    url = env.fresh_database("profile_relay")
    with connect(url) as conn:
        copy_outbox(conn, iter(_messages(factory, count, relay_topics)), datetime.now(UTC))
        conn.commit()
    out = env.work_dir / "relay-profile.json"
    role = env.spawn(
        "profile-relay", [sys.executable, "-m", "bench.profile_worker", "relay", str(out)], env.role_env(url)
    )
    code = role.process.wait(timeout=1800)
    env.roles.remove(role)
    env.drop_database(url)
    if code != 0:
        raise RuntimeError(f"bench: the profiled relay failed; see {role.log_path}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# The gauges' baselines: the cheapest exact count (one scan of the table), and the capped read they replaced (the
# oldest 100,000 rows by id, which read 0 for a topic behind that many rows of others).
_EXACT_SCAN = "SELECT topic, count(*), min(created_at) FROM outbox.message GROUP BY topic"
_CAPPED = (
    "SELECT topic, count(*), min(created_at) FROM (SELECT topic, created_at FROM outbox.message ORDER BY id"
    " LIMIT 100000) s GROUP BY topic"
)


def gauges(env: BenchEnv, rows: int, repeats: int = 3) -> dict[str, Any]:
    """The outbox gauges' exact read (pin/outbox/gauges.sql) at ``rows`` waiting rows on 7 topics, the floors
    advanced and stored as a relay's heartbeat leaves them, vs one plain scan counting the same (the median of
    ``repeats``)."""
    url = env.fresh_database("gauges")
    with connect(url, autocommit=True) as conn:
        for start in range(0, rows, 100_000):
            conn.execute(
                "INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version,"
                " payload, value, occurred_at)"
                " SELECT gen_random_uuid(), g %% 64, 'pin.bench.gauges-' || g %% 7 || '.v1', 'k-' || g, 'e', 1,"
                " '{\"AppointmentId\": \"0b1c5ad4-54c2-4a38-9d2b-2b8d0c1e7a11\"}', '{}', now()"
                " FROM generate_series(%s, %s) AS g",
                (start + 1, min(rows, start + 100_000)),
            )
        conn.execute("VACUUM ANALYZE outbox.message")
        conn.execute("INSERT INTO outbox.relay_instance (instance_id, expires_at) VALUES ('bench', 'infinity')")
        conn.execute("UPDATE outbox.relay_lease SET owner = 'bench'")
        floors = KeptFloors()
        with conn.transaction():  # the floors where a relay's heartbeat puts them, stored
            floors.load(conn, range(64))
            conn.execute(PLAN_BY_INDEX)
            floors.advance(conn)
            floors.write(conn, "bench", now=True)

        def timed(statement: str, plan: bool) -> float:
            seconds = []
            for _ in range(repeats):
                with conn.transaction():
                    if plan:
                        conn.execute(PLAN_BY_INDEX)
                    started = time.perf_counter()
                    counted = conn.execute(statement).fetchall()
                    seconds.append(time.perf_counter() - started)
                assert counted
            return median(seconds) * 1000

        exact, scan, capped = timed(OUTBOX_BACKLOG_BY_TOPIC, True), timed(_EXACT_SCAN, False), timed(_CAPPED, False)
    env.drop_database(url)
    return {"rows": rows, "exact_ms": exact, "scan_ms": scan, "capped_ms": capped}
