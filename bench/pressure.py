"""Pressure: the deadlines and the relay at a steady offered load while vacuum is blocked, readers hold snapshots,
backends are killed, the connections run out and PostgreSQL restarts.

The phase types are those of the public job-queue harness (hardbyte/postgresql-job-queue-benchmarking, its
docs/method.md): ``clean``, ``idle-in-tx`` (one ``BEGIN; SELECT txid_current();`` held for the whole phase),
``active-readers`` (4 REPEATABLE READ connections scanning the hot tables, their snapshots overlapping),
``high-load`` (the offered load times 1.5), ``backend-kill`` (``pg_terminate_backend`` of one of the roles'
connections about once a second), ``pool-exhaustion`` (as many idle connections as the server still accepts, held),
``postgres-restart`` (a fast shutdown for half the phase, then started again) and ``recovery``.

What runs: two ``pin worker appointment-timeout``, ``pin relay``, ``pin consume crm`` and ``pin consume
notifications`` on a durable PostgreSQL (see :class:`DurableServer`) and the bench's broker. A producer seeds
``rate`` appointments due per second (each with its slot, event and two reminders), each second's batch seeded
``Timeline.lead`` ahead of its deadlines, so that the deadlines of a restart's outage exist before it. The phases
follow each other on one timeline; a deadline belongs to the phase its time falls in.

Measured per phase, on the database clock: offered (deadlines in the phase) and completed (expiries committed in
the phase) per second; the expiry lag (a bench trigger's ``clock_timestamp()`` when the appointment became Expired,
minus its PendingExpiresAt); the relay's commit -> ack (the outbox row's ``created_at`` to its delete after the
broker's acknowledgement, a bench trigger, as ``pin_outbox_publish_latency_seconds``); the oldest unpublished row's
age and the overdue Pending appointments at every second (from the two bench logs after the run, see Series); each
consumer's event age (its inbox row's ``processed_at - occurred_at``, what ``pin status`` compares with the SLA);
dead tuples and size of every hot table at the phase's start and end; the embedded broker's CPU. At the end the
run drains and checks correctness: every deadline expired, each expired appointment exactly one crm entry and two
notifications (0 lost, 0 doubled in effect).
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import math
import os
import random
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench import kafka as bare
from bench.env import BenchEnv, Role, _url_with_database
from bench.relay import _ACK_LOG
from bench.results import percentile
from bench.seed import seed_appointments
from bench.timeout import HOT_TABLES as _TIMEOUT_TABLES
from pin.db import migrate
from pin.messaging import topics
from pin.messaging.groups import SLA_SECONDS

# The stress phases in the order they run; each is followed by a recovery phase at the offered load only, whose
# figures from RECOVERY_CHECK_SECONDS after the release on are held against the clean phase's (the issue's "within 2
# minutes of the release, every figure back to the clean phase's"), as the harness's scenarios end each stress with
# one. Seconds per mode: --quick keeps every stress phase at 2 minutes, the default holds the xmin for 30 minutes.
STRESSES = ("idle-in-tx", "active-readers", "high-load", "backend-kill", "pool-exhaustion", "postgres-restart")
PHASES = ("clean", *STRESSES, "recovery")
SECONDS: dict[str, dict[str, float]] = {
    "quick": {"clean": 60, "recovery": 180} | {p: 120 for p in STRESSES},
    "default": {"clean": 300, "idle-in-tx": 1800, "recovery": 180} | {p: 300 for p in STRESSES[1:]},
    # the correctness run of the deep tests (tests/pressure): a held xmin, backend kills and a restart, short
    "smoke": {"clean": 10, "idle-in-tx": 20, "backend-kill": 20, "postgres-restart": 20, "recovery": 10},
}
RECOVERY_CHECK_SECONDS = 120.0  # a recovery's figures are read from this long after the release on
FLAT_WINDOW_SECONDS = 300.0  # a stress phase's first and last windows (at most half the phase each): flat or not
HARNESS_RECOVERY_SHARE = 0.9  # the harness's chaos_recovery_time_s: completions/s back to 90 % of clean's median
# The goals' bounds (issue 35 point 2) the section judges each row by, and the run-to-run noise allowed when a window
# is held against another ("no worse than", "back to the clean phase's"): at most NOISE times the other's p99.
EXPIRY_LAG_P99_MS = 1000.0
RELAY_P99_MS = 1000.0
NOISE = 1.5
RATES = (100.0, 300.0)  # the offered appointments due per second: the default and the option
HIGH_LOAD = 1.5
WORKERS = 2  # appointment-timeout processes (``--workers``)
READERS = 4
READER_TRANSACTION_SECONDS = 30.0  # each reader's snapshot lives this long; the four start a quarter apart
KILL_EVERY_SECONDS = 1.0
DRAIN_SECONDS = 300.0
BENCH_APP = "pin-bench-pressure"  # the bench's own connections: never killed by backend-kill
CONSUMERS = ("crm", "notifications")
# the timeout phase's hot tables, and what a relay, the consumers and the jobs' bookkeeping rewrite beside them
HOT_TABLES = (
    *_TIMEOUT_TABLES,
    "outbox.relay_lease",
    "outbox.relay_instance",
    "outbox.relay_floor",
    "jobs.cycle",
    "jobs.item_failure",
    "messaging.inbox",
    "messaging.consumer_member",
    "notifications.appointment_state",
)

# Bench-only: when each appointment became Expired, on the database clock (the worker's transaction).
_EXPIRY_LOG = """
CREATE TABLE public.bench_expiry (id uuid, due timestamptz, expired_at timestamptz);
CREATE FUNCTION public.bench_expiry_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.bench_expiry VALUES (NEW.id, OLD.pending_expires_at, clock_timestamp());
    RETURN NULL;
END $$;
CREATE TRIGGER bench_expiry AFTER UPDATE OF status ON calendar.appointment
    FOR EACH ROW WHEN (NEW.status = 'Expired' AND OLD.status = 'Pending')
    EXECUTE FUNCTION public.bench_expiry_log();
"""


def _connect(url: str, **kwargs: Any) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, row_factory=dict_row, application_name=BENCH_APP, connect_timeout=5, **kwargs)


# ----------------------------------------------------------------------------------------------- the server


class DurableServer:
    """The durable PostgreSQL of the pressure phase.

    By default an embedded server of this run with fsync, full_page_writes and autovacuum on and the machine's
    PostgreSQL's max_connections (100): the bench owns it, so it may restart it and exhaust its connections without
    touching anyone else. With PIN_BENCH_DURABLE_DATABASE_URL, that server instead: autovacuum is turned on for the
    run (ALTER SYSTEM and a reload) and put back as it was at the end; postgres-restart then runs
    PIN_BENCH_DURABLE_STOP_COMMAND and PIN_BENCH_DURABLE_START_COMMAND (shell commands), and is skipped without them.
    """

    def __init__(self, env: BenchEnv) -> None:
        self.env = env
        self.external = os.environ.get("PIN_BENCH_DURABLE_DATABASE_URL", "")
        self.embedded: Any = None
        self.url = ""
        self._autovacuum_before: str | None = None
        self._user: str | None = None

    @property
    def can_restart(self) -> bool:
        """Whether postgres-restart can run on this server."""
        if self.external:
            return all(os.environ.get(f"PIN_BENCH_DURABLE_{step}_COMMAND") for step in ("STOP", "START"))
        return True

    def start(self) -> None:
        """Start the embedded server, or switch the configured one's autovacuum on."""
        if self.external:
            self.url = self.external
            with _connect(self.url, autocommit=True) as conn:
                row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'autovacuum'").fetchone()
                self._autovacuum_before = row["setting"] if row else None
                auto_conf = conn.execute(
                    "SELECT count(*) AS n FROM pg_file_settings WHERE name = 'autovacuum' "
                    "AND sourcefile LIKE '%postgresql.auto.conf'"
                ).fetchone()
                self._had_auto_conf = bool(auto_conf and auto_conf["n"])
                conn.execute("ALTER SYSTEM SET autovacuum = on")
                conn.execute("SELECT pg_reload_conf()")
            return
        from pin.local.embedded.postgres import EmbeddedPostgres

        self.embedded = EmbeddedPostgres(
            self.env.work_dir / "durable-postgres",
            settings={
                "fsync": "on",
                "full_page_writes": "on",
                "synchronous_commit": "on",
                "autovacuum": "on",
                "max_connections": "100",
            },
        )
        self.embedded.start()
        self.url = self.embedded.url

    def stop_for_restart(self) -> None:
        """Stop the server (a fast shutdown: every client disconnected, a checkpoint)."""
        if self.embedded is not None:
            self.embedded.stop("fast")
        else:
            subprocess.run(shlex.split(os.environ["PIN_BENCH_DURABLE_STOP_COMMAND"]), check=True, timeout=120)

    def start_after_restart(self) -> None:
        """Start the server again on the same port."""
        if self.embedded is not None:
            self.embedded._start_server(None if os.geteuid() != 0 else self.embedded.system_user)
        else:
            subprocess.run(shlex.split(os.environ["PIN_BENCH_DURABLE_START_COMMAND"]), check=True, timeout=120)

    def close(self) -> None:
        """Destroy the embedded server; on a configured one, put autovacuum back as it was."""
        if self.embedded is not None:
            self.embedded.destroy()
            return
        if self._autovacuum_before is None:
            return
        with _connect(self.url, autocommit=True) as conn:
            if self._had_auto_conf:
                conn.execute(f"ALTER SYSTEM SET autovacuum = {'on' if self._autovacuum_before == 'on' else 'off'}")
            else:
                conn.execute("ALTER SYSTEM RESET autovacuum")
            conn.execute("SELECT pg_reload_conf()")

    def describe(self) -> str:
        """What the figures ran on."""
        with _connect(self.url, autocommit=True) as conn:
            settings = {
                name: conn.execute(f"SHOW {name}").fetchone()[name]  # type: ignore[index]
                for name in ("server_version", "fsync", "synchronous_commit", "autovacuum", "max_connections")
            }
        where = "PIN_BENCH_DURABLE_DATABASE_URL" if self.external else "an embedded server of this run"
        return f"{where}: " + ", ".join(f"{k}={v}" for k, v in settings.items())


# ----------------------------------------------------------------------------------------------- the load


@dataclass
class Timeline:
    """The phases on one clock: offsets in seconds from T0 (the database clock's ``t0`` and ``time.monotonic``)."""

    phases: list[tuple[str, float]]
    rate: float
    t0_db: datetime = field(default_factory=lambda: datetime.min)
    t0: float = 0.0

    @property
    def lead(self) -> float:
        """How long before its deadlines each second's appointments are seeded: longer than a restart's outage,
        so that the deadlines during an outage were booked before it (as real ones are)."""
        restart = dict(self.phases).get("postgres-restart", 0.0)
        return restart / 2 + 15.0

    def bounds(self) -> list[tuple[str, float, float]]:
        out, at = [], 0.0
        for name, seconds in self.phases:
            out.append((name, at, at + seconds))
            at += seconds
        return out

    @property
    def total(self) -> float:
        return sum(seconds for _, seconds in self.phases)

    def rate_at(self, offset: float) -> float:
        """The offered appointments per second of the deadline second at ``offset``."""
        for name, start, end in self.bounds():
            if start <= offset < end:
                return self.rate * (HIGH_LOAD if name == "high-load" else 1.0)
        return 0.0


class Producer(threading.Thread):
    """Seeds each second's appointments ``Timeline.lead`` seconds before their deadlines, on its own connection; a
    batch that failed (the server down) is seeded again once the server is back, with its original deadlines."""

    def __init__(self, url: str, timeline: Timeline, stop: threading.Event) -> None:
        super().__init__(name="pressure-producer", daemon=True)
        self.url, self.timeline, self.stop_event = url, timeline, stop
        self.seeded = 0
        self.errors = 0

    def run(self) -> None:
        second, next_id, carry = 0, 1, 0.0
        conn: psycopg.Connection[dict[str, Any]] | None = None
        while not self.stop_event.is_set() and second < self.timeline.total:
            wait = self.timeline.t0 + second - self.timeline.lead - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            exact = self.timeline.rate_at(second) + carry
            count = int(exact)
            try:
                if conn is None or conn.closed:
                    conn = _connect(self.url)
                if count:
                    due = self.timeline.t0_db + timedelta(seconds=second)
                    seed_appointments(conn, count, due=due, step=timedelta(seconds=1 / count), tag="p", first=next_id)
            except psycopg.Error:
                self.errors += 1
                with contextlib.suppress(Exception):
                    conn.close()  # type: ignore[union-attr]
                conn = None
                self.stop_event.wait(0.5)
                continue  # the same second again
            carry = exact - count
            next_id += count
            self.seeded += count
            second += 1
        if conn is not None:
            conn.close()


@dataclass
class Series:
    """Per second of the timeline (offsets from T0): the oldest unpublished outbox row's age and the overdue Pending
    appointments, computed after the run from the bench's two logs (every outbox row's creation and delete, every
    appointment's deadline and expiry) rather than sampled by a query during it: such a query reads what a held
    horizon keeps (a scan of the outbox's dead rows and of the Pending index's dead entries, every second), and on
    2 cores it took 0.4 of a core by the 20th minute of a held xmin, the very load the phase measures."""

    oldest: list[float]  # s: at second t, t minus the creation of the oldest row created before t and not deleted
    overdue: list[int]  # at second t: appointments due before t and not yet Expired

    @classmethod
    def of(cls, conn: psycopg.Connection[dict[str, Any]], timeline: Timeline) -> Series:
        seconds = int(timeline.total) + 1

        def offsets(sql: str) -> list[tuple[float, float]]:
            rows = conn.execute(sql, {"t0": timeline.t0_db}).fetchall()
            return [(r["a"], r["b"] if r["b"] is not None else float("inf")) for r in rows]

        rows = offsets(
            "SELECT EXTRACT(EPOCH FROM created_at - %(t0)s)::float8 AS a, "
            "EXTRACT(EPOCH FROM deleted_at - %(t0)s)::float8 AS b FROM public.bench_ack "
            "UNION ALL SELECT EXTRACT(EPOCH FROM created_at - %(t0)s)::float8, NULL FROM outbox.message ORDER BY 1"
        )
        oldest: list[float] = []
        alive: list[tuple[float, float]] = []  # a heap of (created, deleted): its top is the oldest row, unless gone
        i = 0
        for t in range(seconds):
            while i < len(rows) and rows[i][0] <= t:
                heapq.heappush(alive, rows[i])
                i += 1
            while alive and alive[0][1] <= t:
                heapq.heappop(alive)
            oldest.append(round(t - alive[0][0], 3) if alive else 0.0)
        due = sorted(
            r["v"]
            for r in conn.execute(
                "SELECT EXTRACT(EPOCH FROM due - %(t0)s)::float8 AS v FROM public.bench_expiry "
                "UNION ALL SELECT EXTRACT(EPOCH FROM pending_expires_at - %(t0)s)::float8 FROM calendar.appointment "
                "WHERE status = 'Pending'",
                {"t0": timeline.t0_db},
            )
        )
        expired = sorted(
            r["v"]
            for r in conn.execute(
                "SELECT EXTRACT(EPOCH FROM expired_at - %(t0)s)::float8 AS v FROM public.bench_expiry",
                {"t0": timeline.t0_db},
            )
        )
        overdue = [bisect.bisect_left(due, t) - bisect.bisect_right(expired, t) for t in range(seconds)]
        return cls(oldest, overdue)

    def window(self, start: float, end: float) -> tuple[list[float], list[int]]:
        lo, hi = max(0, math.ceil(start)), max(0, math.ceil(end))
        return self.oldest[lo:hi], self.overdue[lo:hi]


# ----------------------------------------------------------------------------------------------- the stresses


@contextlib.contextmanager
def idle_in_tx(url: str) -> Iterator[dict[str, Any]]:
    """One transaction with an xid, idle for the whole phase: the xmin horizon stays where it was."""
    conn = _connect(url)
    row = conn.execute("SELECT txid_current() AS xid").fetchone()
    try:
        yield {"xid": row["xid"] if row else None}
    finally:
        with contextlib.suppress(Exception):
            conn.rollback()
            conn.close()


@contextlib.contextmanager
def active_readers(url: str) -> Iterator[dict[str, Any]]:
    """READERS REPEATABLE READ connections scanning the hot tables, each snapshot held READER_TRANSACTION_SECONDS,
    started a quarter of that apart so that a snapshot is always held."""
    stop = threading.Event()
    scans = [0]

    def reader(index: int) -> None:
        if stop.wait(index * READER_TRANSACTION_SECONDS / READERS):
            return
        while not stop.is_set():
            try:
                with _connect(url) as conn:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                    began = time.monotonic()
                    while not stop.is_set() and time.monotonic() - began < READER_TRANSACTION_SECONDS:
                        for table in ("calendar.appointment", "outbox.message", "messaging.inbox"):
                            conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                        scans[0] += 1
                        stop.wait(0.5)
                    conn.rollback()
            except psycopg.Error:
                stop.wait(1.0)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(READERS)]
    for t in threads:
        t.start()
    info: dict[str, Any] = {"readers": READERS}
    try:
        yield info
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        info["scans"] = scans[0]


def _role_backends(conn: psycopg.Connection[dict[str, Any]], database: str) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' "
        "AND application_name <> %s AND pid <> pg_backend_pid()",
        (database, BENCH_APP),
    ).fetchall()
    return [r["pid"] for r in rows]


@contextlib.contextmanager
def backend_kill(url: str, database: str) -> Iterator[dict[str, Any]]:
    """pg_terminate_backend of one of the roles' connections, chosen at random, every KILL_EVERY_SECONDS."""
    stop = threading.Event()
    info: dict[str, Any] = {"killed": 0}

    def killer() -> None:
        rng = random.Random(35)
        conn: psycopg.Connection[dict[str, Any]] | None = None
        while not stop.wait(KILL_EVERY_SECONDS):
            try:
                if conn is None or conn.closed:
                    conn = _connect(url, autocommit=True)
                pids = _role_backends(conn, database)
                if pids:
                    conn.execute("SELECT pg_terminate_backend(%s)", (rng.choice(pids),))
                    info["killed"] += 1
            except psycopg.Error:
                conn = None
        if conn is not None:
            conn.close()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        yield info
    finally:
        stop.set()
        thread.join(timeout=10)


@contextlib.contextmanager
def pool_exhaustion(url: str) -> Iterator[dict[str, Any]]:
    """Idle connections opened until the server refuses one, held for the phase."""
    held: list[psycopg.Connection[Any]] = []
    refused = ""
    while len(held) < 1000:
        try:
            held.append(psycopg.connect(url, application_name=BENCH_APP, connect_timeout=5))
        except psycopg.OperationalError as exc:
            refused = str(exc).strip().splitlines()[-1][:200]
            break
    info: dict[str, Any] = {"idle_connections": len(held), "refused_with": refused}
    try:
        yield info
    finally:
        for conn in held:
            with contextlib.suppress(Exception):
                conn.close()


@contextlib.contextmanager
def postgres_restart(server: DurableServer, seconds: float) -> Iterator[dict[str, Any]]:
    """A fast shutdown for half the phase, then the server starts again."""
    began = time.monotonic()
    server.stop_for_restart()
    time.sleep(max(0.0, seconds / 2 - (time.monotonic() - began)))
    server.start_after_restart()
    info = {"down_seconds": round(time.monotonic() - began, 1)}
    yield info


# ----------------------------------------------------------------------------------------------- the run


def _table_stats(url: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with _connect(url, autocommit=True) as conn:
        for name in HOT_TABLES:
            schema, table = name.split(".")
            row = conn.execute(
                "SELECT n_dead_tup AS dead, n_live_tup AS live, autovacuum_count AS autovacuums, "
                "pg_total_relation_size(relid) AS bytes FROM pg_stat_user_tables WHERE schemaname = %s "
                "AND relname = %s",
                (schema, table),
            ).fetchone()
            out[name] = dict(row) if row else {}
    return out


def _broker_cpu_seconds(env: BenchEnv) -> float | None:
    """The embedded broker's CPU seconds so far (None with a configured broker). Tansu's memory storage keeps every
    record and spends more CPU on a fetch the more it holds, so over a long run the broker takes a growing share of
    the machine: each phase's row says how much (docs/operations.md, "The embedded broker")."""
    process = env.embedded_kafka.process if env.embedded_kafka is not None else None
    if process is None:
        return None
    try:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats_when_up(url: str, timeout: float = 60) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _table_stats(url)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                return {}
            time.sleep(1)


def _stress(
    kind: str, server: DurableServer, url: str, database: str, seconds: float
) -> contextlib.AbstractContextManager[dict[str, Any]]:
    if kind == "idle-in-tx":
        return idle_in_tx(url)
    if kind == "active-readers":
        return active_readers(url)
    if kind == "backend-kill":
        return backend_kill(url, database)
    if kind == "pool-exhaustion":
        return pool_exhaustion(url)
    if kind == "postgres-restart":
        return postgres_restart(server, seconds)
    return contextlib.nullcontext({})


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except psycopg.Error:
            pass
        time.sleep(1.0)
    return False


def run(env: BenchEnv, mode: str, rate: float, workers: int = WORKERS) -> dict[str, Any]:
    """The pressure phases one after the other at ``rate`` appointments due per second; per-phase figures."""
    seconds = SECONDS[mode if mode in SECONDS else "default"]
    server = DurableServer(env)
    server.start()
    database = f"pin_pressure_{env.run_id}"
    roles: list[Role] = []
    stop = threading.Event()
    try:
        with _connect(server.url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        url = _url_with_database(server.url, database)
        migrate(url)
        with _connect(url, autocommit=True) as conn:
            conn.execute(_ACK_LOG)
            conn.execute(_EXPIRY_LOG)
        server_text = server.describe()
        env.restart_broker()
        bare.create_topics(env.kafka_bootstrap, list(topics.all_topics()))
        role_env = env.role_env(url)
        roles += [
            env.spawn_pin(f"pressure-timeout-{i}", ["worker", "appointment-timeout"], role_env)
            for i in range(1, workers + 1)
        ]
        roles.append(env.spawn_pin("pressure-relay", ["relay"], role_env))
        consumers = [env.spawn_pin(f"pressure-consume-{g}", ["consume", g], role_env) for g in CONSUMERS]
        roles += consumers
        for c in consumers:
            if not c.wait_for_log("partitions assigned", 90):
                raise RuntimeError(f"bench: consumer {c.name} got no partitions; see {c.log_path}")
        skipped = [] if server.can_restart else ["postgres-restart"]
        timeline = Timeline(_timeline_phases(seconds, skipped), rate)
        with _connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT clock_timestamp() AS t").fetchone()
            assert row is not None
            ahead = timeline.lead + 2
            timeline.t0_db, timeline.t0 = row["t"] + timedelta(seconds=ahead), time.monotonic() + ahead
        producer = Producer(url, timeline, stop)
        producer.start()
        time.sleep(max(0.0, timeline.t0 - time.monotonic()))
        phases: list[dict[str, Any]] = []
        for name, start, end in timeline.bounds():
            print(f"bench: pressure {name} ({end - start:.0f} s, load {os.getloadavg()[0]:.2f})", flush=True)
            stats_start = _stats_when_up(url)
            broker_start = _broker_cpu_seconds(env)
            began = time.monotonic()
            with _stress(name, server, url, database, end - start) as info:
                time.sleep(max(0.0, timeline.t0 + end - time.monotonic()))
            broker_end = _broker_cpu_seconds(env)
            broker = None if broker_start is None or broker_end is None else broker_end - broker_start
            phases.append({
                "phase": name, "start": start, "end": end, "info": info, "seconds": round(time.monotonic() - began, 1),
                "tables_start": stats_start, "tables_end": _stats_when_up(url), "load_1m": os.getloadavg()[0],
                "broker_cores": None if broker is None else round(broker / (time.monotonic() - began), 2),
            })  # fmt: skip
        print("bench: pressure drain ...", flush=True)
        drained = _drain(url, timeline, producer)
        stop.set()
        producer.join(timeout=10)
        figures = _figures(url, timeline, phases)
        correctness = _correctness(url)
    finally:
        stop.set()
        env.stop_roles(roles)
        with contextlib.suppress(Exception), _connect(server.url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        server.close()
    return {
        "rate": rate,
        "workers": workers,
        "server": server_text,
        "skipped": skipped,
        **figures,
        "drained": drained,
        "correctness": correctness,
        "producer": {"seeded": producer.seeded, "errors": producer.errors},
    }


def _timeline_phases(seconds: dict[str, float], skipped: list[str]) -> list[tuple[str, float]]:
    """clean, then each stress of the mode followed by a recovery phase."""
    out = [("clean", seconds["clean"])]
    for stress in STRESSES:
        if stress in seconds and stress not in skipped:
            out += [(stress, seconds[stress]), ("recovery", seconds["recovery"])]
    return out


def _drain(url: str, timeline: Timeline, producer: Producer) -> bool:
    """After the last phase: every deadline expired, the outbox empty and both consumers caught up."""
    producer.join(timeout=timeline.lead + 30)

    def done() -> bool:
        with _connect(url, autocommit=True) as conn:
            row = conn.execute(
                """
                SELECT (SELECT count(*) FROM calendar.appointment WHERE status = 'Pending') AS pending,
                       (SELECT count(*) FROM outbox.message) AS outbox,
                       (SELECT count(*) FROM public.bench_expiry) AS expired,
                       (SELECT count(*) FROM crm.lead_feed_entry) AS crm,
                       (SELECT count(DISTINCT subject_id) FROM notifications.notification) AS notified
                """
            ).fetchone()
            assert row is not None
            return row["pending"] == 0 and row["outbox"] == 0 and row["crm"] == row["expired"] == row["notified"]

    return _wait(done, DRAIN_SECONDS)


def _correctness(url: str) -> dict[str, Any]:
    """0 lost, 0 doubled in effect, every deadline expired (as the CI's short pressure run asserts)."""
    with _connect(url, autocommit=True) as conn:
        row = conn.execute(
            """
            SELECT (SELECT count(*) FROM calendar.appointment) AS appointments,
                   (SELECT count(*) FROM calendar.appointment WHERE status = 'Pending') AS still_pending,
                   (SELECT count(*) FROM calendar.appointment WHERE status = 'Expired') AS expired,
                   (SELECT count(*) FROM public.bench_expiry) AS expiries_logged,
                   (SELECT count(*) FROM calendar.appointment AS a WHERE a.status = 'Expired' AND NOT EXISTS
                       (SELECT 1 FROM crm.lead_feed_entry AS c WHERE c.appointment_id = a.id)) AS crm_lost,
                   (SELECT count(*) FROM calendar.appointment AS a WHERE a.status = 'Expired' AND
                       (SELECT count(*) FROM notifications.notification AS n WHERE n.subject_id = a.id) <> 2)
                       AS notifications_not_two,
                   (SELECT count(*) FROM crm.lead_feed_entry) - (SELECT count(DISTINCT appointment_id)
                       FROM crm.lead_feed_entry) AS crm_doubled,
                   (SELECT count(*) FROM public.bench_ack) - (SELECT count(*) FROM (SELECT DISTINCT message_id, topic
                       FROM public.bench_ack) AS d) AS outbox_rows_acked_twice,
                   (SELECT count(*) FROM outbox.dead_letter) AS outbox_dead_letters,
                   (SELECT count(*) FROM messaging.dead_letter) AS consumer_dead_letters
            """
        ).fetchone()
    assert row is not None
    return dict(row)


# The correctness counts that must be 0 after the drain (an outbox row acked twice is at least once, not an error).
MUST_BE_ZERO = ("still_pending", "crm_lost", "notifications_not_two", "crm_doubled", "outbox_dead_letters",
                "consumer_dead_letters")  # fmt: skip


def _window(
    conn: psycopg.Connection[dict[str, Any]], timeline: Timeline, series: Series, start: float, end: float
) -> dict[str, Any]:
    """The figures of the deadlines (and outbox rows, and consumer deliveries) that fall in [start, end), offsets in
    seconds from the timeline's T0."""
    t0 = timeline.t0_db
    lo, hi = t0 + timedelta(seconds=start), t0 + timedelta(seconds=end)
    secs = end - start

    def column(sql: str, *args: Any) -> list[float]:
        return [r["v"] for r in conn.execute(sql, (*args, lo, hi)).fetchall()]

    offered = column("SELECT count(*)::float8 AS v FROM calendar.appointment WHERE pending_expires_at >= %s "
                     "AND pending_expires_at < %s")[0]  # fmt: skip
    lags = column("SELECT EXTRACT(EPOCH FROM expired_at - due)::float8 * 1000 AS v FROM public.bench_expiry "
                  "WHERE due >= %s AND due < %s")  # fmt: skip
    completed = column("SELECT count(*)::float8 AS v FROM public.bench_expiry WHERE expired_at >= %s "
                       "AND expired_at < %s")[0]  # fmt: skip
    relay = column("SELECT EXTRACT(EPOCH FROM deleted_at - created_at)::float8 * 1000 AS v FROM public.bench_ack "
                   "WHERE created_at >= %s AND created_at < %s")  # fmt: skip
    ages: dict[str, float | None] = {}
    for group in CONSUMERS:
        ms = column(
            "SELECT EXTRACT(EPOCH FROM processed_at - occurred_at)::float8 * 1000 AS v FROM messaging.inbox "
            "WHERE consumer_group = %s AND occurred_at IS NOT NULL AND processed_at >= %s AND processed_at < %s",
            group,
        )
        ages[group] = round(percentile(ms, 99), 1) if ms else None
    oldest, overdue = series.window(start, end)
    return {
        "seconds": round(secs, 1),
        "offered_per_s": round(offered / secs, 1),
        "completed_per_s": round(completed / secs, 1),
        "expiry_lag_ms": _quantiles(lags),
        "relay_commit_to_ack_ms": _quantiles(relay),
        "oldest_unpublished_s": {"p99": _q(oldest, 99, 3), "max": round(max(oldest), 3) if oldest else None},
        "overdue_max": max(overdue) if overdue else None,
        "consumer_event_age_p99_ms": ages,
    }


def _completions_per_second(
    conn: psycopg.Connection[dict[str, Any]], timeline: Timeline, start: float, end: float
) -> list[int]:
    """Expiries committed in each whole second of [start, end) (offsets from T0), zeros included."""
    rows = conn.execute(
        "SELECT floor(EXTRACT(EPOCH FROM expired_at - %s))::int AS s, count(*) AS n FROM public.bench_expiry "
        "WHERE expired_at >= %s AND expired_at < %s GROUP BY 1",
        (timeline.t0_db, timeline.t0_db + timedelta(seconds=start), timeline.t0_db + timedelta(seconds=end)),
    ).fetchall()
    per = {r["s"]: r["n"] for r in rows}
    return [per.get(second, 0) for second in range(int(start), int(end))]


def _release(phase: dict[str, Any]) -> float:
    """When a stress let go (offset from T0): the server back up for a restart, the phase's end for the rest."""
    if phase["phase"] == "postgres-restart" and "down_seconds" in phase["info"]:
        return float(phase["start"] + phase["info"]["down_seconds"])
    return float(phase["end"])


def _figures(url: str, timeline: Timeline, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase; per stress its first and last windows (flat or not) and its recovery: the harness's recovery time
    (completions per second back to HARNESS_RECOVERY_SHARE of clean's median) and the figures from
    RECOVERY_CHECK_SECONDS after the release to the recovery phase's end, beside the clean phase's."""
    rows, flat, recovery = [], [], []
    with _connect(url, autocommit=True) as conn:
        series = Series.of(conn, timeline)
        for phase in phases:
            row = {"phase": phase["phase"], **_window(conn, timeline, series, phase["start"], phase["end"])}
            row |= {"tables_start": phase["tables_start"], "tables_end": phase["tables_end"], "info": phase["info"],
                    "load_1m_end": round(phase["load_1m"], 2), "broker_cores": phase.get("broker_cores")}  # fmt: skip
            rows.append(row)
        clean = next((p for p in phases if p["phase"] == "clean"), None)
        per_second = _completions_per_second(conn, timeline, clean["start"], clean["end"]) if clean else []
        baseline = float(percentile([float(n) for n in per_second], 50)) if per_second else 0.0
        for i, phase in enumerate(phases):
            if phase["phase"] not in STRESSES:
                continue
            width = min(FLAT_WINDOW_SECONDS, (phase["end"] - phase["start"]) / 2)
            flat.append({
                "phase": phase["phase"], "window_s": width,
                "first": _window(conn, timeline, series, phase["start"], phase["start"] + width),
                "last": _window(conn, timeline, series, phase["end"] - width, phase["end"]),
            })  # fmt: skip
            after = phases[i + 1] if i + 1 < len(phases) and phases[i + 1]["phase"] == "recovery" else None
            if after is None:
                continue
            release = _release(phase)
            counts = _completions_per_second(conn, timeline, release, after["end"])
            back = next((s for s, n in enumerate(counts) if n >= HARNESS_RECOVERY_SHARE * baseline), None)
            check_from = min(release + RECOVERY_CHECK_SECONDS, after["end"] - 1)
            recovery.append({
                "after": phase["phase"], "release_offset_s": round(release, 1),
                "harness_recovery_s": back, "clean_completions_per_s_median": baseline,
                "from_release_plus_s": round(check_from - release, 1),
                "settled": _window(conn, timeline, series, check_from, after["end"]),
            })  # fmt: skip
    return {"phases": rows, "flat": flat, "recovery": recovery}


def _q(values: list[float], q: float, digits: int = 1) -> float | None:
    return round(percentile(values, q), digits) if values else None


def _quantiles(ms: list[float]) -> dict[str, float | None]:
    return {"count": len(ms), "p50": _q(ms, 50), "p99": _q(ms, 99), "max": round(max(ms), 1) if ms else None}


def _goals_met(w: dict[str, Any]) -> bool:
    """A window's figures inside point 2's goals: expiry lag and relay p99 within 1 s, completed = offered (to 2 %
    or one a second), each consumer's event age p99 inside its SLA."""
    lag, relay = w["expiry_lag_ms"]["p99"], w["relay_commit_to_ack_ms"]["p99"]
    ages = w["consumer_event_age_p99_ms"]
    return (
        lag is not None and lag <= EXPIRY_LAG_P99_MS
        and relay is not None and relay <= RELAY_P99_MS
        and abs(w["completed_per_s"] - w["offered_per_s"]) <= max(1.0, 0.02 * w["offered_per_s"])
        and all(ages.get(g) is not None and ages[g] <= SLA_SECONDS[g] * 1000 for g in CONSUMERS)
    )  # fmt: skip


def _no_worse(w: dict[str, Any], than: dict[str, Any]) -> bool:
    """``w``'s p99 figures at most NOISE times ``than``'s (each expiry lag, relay, consumer age; 10 ms floor)."""
    pairs = [
        (w["expiry_lag_ms"]["p99"], than["expiry_lag_ms"]["p99"]),
        (w["relay_commit_to_ack_ms"]["p99"], than["relay_commit_to_ack_ms"]["p99"]),
    ]
    pairs += [(w["consumer_event_age_p99_ms"].get(g), than["consumer_event_age_p99_ms"].get(g)) for g in CONSUMERS]
    return all(a is not None and b is not None and a <= NOISE * max(b, 10.0) for a, b in pairs)  # fmt: skip


def _row(label: str, w: dict[str, Any], *extra: object) -> str:
    lag, relay, oldest = w["expiry_lag_ms"], w["relay_commit_to_ack_ms"], w["oldest_unpublished_s"]
    ages = w["consumer_event_age_p99_ms"]
    cells = [label, f"{w['seconds']:.0f}", w["offered_per_s"], w["completed_per_s"],
             f"{lag['p50']} / {lag['p99']} / {lag['max']}", f"{relay['p50']} / {relay['p99']}",
             f"{oldest['p99']} / {oldest['max']}", w["overdue_max"], ages.get("crm"), ages.get("notifications"),
             "yes" if _goals_met(w) else "**no**", *extra]  # fmt: skip
    return "| " + " | ".join(str(c) for c in cells) + " |"


_HEAD = ("s | offered/s | completed/s | expiry lag p50 / p99 / max ms | relay commit->ack p50 / p99 ms | oldest "
         "unpublished p99 / max s | overdue max | crm age p99 ms | notifications age p99 ms | goals met")  # fmt: skip


def section(result: dict[str, Any]) -> str:
    """The per-phase tables of a pressure run (summary.md)."""
    slas = ", ".join(f"{g} {SLA_SECONDS[g]:g} s" for g in CONSUMERS)
    lines = [
        f"## Pressure at {result['rate']:g} appointments due per second",
        "",
        f"Server: {result['server']}. Roles: {result['workers']} appointment-timeout workers, a relay, crm and "
        "notifications. "
        + (f"Skipped: {', '.join(result['skipped'])}. " if result["skipped"] else "")
        + f"Drained: {result['drained']}. Correctness: "
        + ", ".join(f"{k} {v}" for k, v in result["correctness"].items())
        + ".",
        "",
        f"Goals met: expiry lag and relay p99 <= {EXPIRY_LAG_P99_MS:g} / {RELAY_P99_MS:g} ms, completed = offered "
        f"(2 %), each consumer's event age p99 inside its SLA ({slas}).",
        "",
        f"| phase | {_HEAD} | load | broker cores |",
        "|---|---:|---:|---:|---|---|---|---:|---:|---:|---|---:|---:|",
    ]
    lines += [_row(p["phase"], p, p["load_1m_end"], p.get("broker_cores")) for p in result["phases"]]
    clean = next((p for p in result["phases"] if p["phase"] == "clean"), None)
    if result.get("flat"):
        lines += [
            "",
            f"Flat: each stress phase's first and last window (at most {FLAT_WINDOW_SECONDS / 60:g} min each); flat "
            f"when the last's p99 figures are at most {NOISE:g} times the first's.",
            "",
            f"| stress, window | {_HEAD} | flat |",
            "|---|---:|---:|---:|---|---|---|---:|---:|---:|---|---|",
        ]
        for f in result["flat"]:
            flat = "yes" if _no_worse(f["last"], f["first"]) else "**no**"
            lines.append(_row(f"{f['phase']}, first {f['window_s']:.0f} s", f["first"], ""))
            lines.append(_row(f"{f['phase']}, last {f['window_s']:.0f} s", f["last"], flat))
    if result.get("recovery") and clean is not None:
        lines += [
            "",
            "Recovery: the harness's recovery time (s from the release until the expiries committed in a second reach "
            f"{HARNESS_RECOVERY_SHARE:g} of the clean phase's median per second; the release is the server's start "
            "for a restart, the phase's end otherwise), and the figures from "
            f"{RECOVERY_CHECK_SECONDS:g} s after the release to the recovery phase's end, back to the clean phase's "
            f"when their p99 figures are at most {NOISE:g} times clean's.",
            "",
            f"| after | {_HEAD} | harness recovery s | back to clean |",
            "|---|---:|---:|---:|---|---|---|---:|---:|---:|---|---:|---|",
        ]
        lines.append(_row("(clean)", clean, "", ""))
        for r in result["recovery"]:
            back = "yes" if _no_worse(r["settled"], clean) else "**no**"
            label = f"{r['after']}, from +{r['from_release_plus_s']:g} s"
            lines.append(_row(label, r["settled"], r["harness_recovery_s"], back))
    lines += [
        "",
        "Dead tuples and total size (MB) of the hot tables, phase start -> end:",
        "",
        "| phase | " + " | ".join(HOT_TABLES) + " |",
        "|---|" + "---|" * len(HOT_TABLES),
    ]
    for p in result["phases"]:
        cells = []
        for t in HOT_TABLES:
            a, b = p["tables_start"].get(t, {}), p["tables_end"].get(t, {})
            cells.append(f"{a.get('dead')} -> {b.get('dead')}; {_mb(a.get('bytes'))} -> {_mb(b.get('bytes'))}")
        lines.append(f"| {p['phase']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mb(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.1f}"


def check(rate: float = 50.0) -> int:
    """The correctness run `.ci/run` makes: the smoke phases (a held xmin, backend kills, a restart) on a durable
    embedded server and an embedded broker, then the drain; 0 when nothing was lost, nothing doubled in effect and
    every deadline expired, 1 otherwise. No figure of time is asserted."""
    import logging
    import tempfile

    from pin.observability.logging import configure_unstarted

    configure_unstarted(logging.WARNING)
    env = BenchEnv(Path(tempfile.mkdtemp(prefix="pin-pressure-")))
    try:
        result = run(env, "smoke", rate)
    finally:
        for role in reversed(env.roles):
            role.stop(timeout=5)
        if env.embedded_kafka is not None:
            env.embedded_kafka.stop()
    print(section(result))
    wrong = {k: v for k, v in result["correctness"].items() if k in MUST_BE_ZERO and v}
    expired_once = result["correctness"]["expiries_logged"] == result["correctness"]["appointments"]
    if wrong or not result["drained"] or not expired_once:
        print(f"pressure: FAILED: drained {result['drained']}, expired once each {expired_once}, {wrong}")
        print(f"pressure: the roles' logs are in {env.work_dir}")
        return 1
    print(f"pressure: ok: {result['correctness']['appointments']} appointments, none lost, none doubled")
    shutil.rmtree(env.work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(check())
