"""appointment-timeout: drain throughput vs pgbench on the worker's own statements, a profile, the scaling runs.

Drain: N due appointments are seeded (each with its slot, event and two reminders), then ``pin worker
appointment-timeout`` processes start while a bench transaction holds an ACCESS EXCLUSIVE lock on
calendar.appointment, so every worker is blocked at its first query; the lock is released at T0 and the drain
time is from T0 (database clock) to the last commit (the newest outbox row's ``created_at``, written just
before the item's COMMIT). No relay runs: the outbox rows stay, as they would while the relay catches up.

Baseline: pgbench, ``-M prepared``, running the statements the worker issued for one item (captured from the
worker's own code, see :mod:`bench.trace`), with the cycle's own statements executed once per 200 items.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench import seed, trace
from bench.env import BenchEnv, Role
from bench.pgbench import run_pgbench
from pin.db import connect, database_now

HOT_TABLES = (
    "calendar.appointment",
    "calendar.availability_slot",
    "calendar.calendar_event",
    "calendar.event_reminder",
    "outbox.message",
)


def _reminder_id(prefix: str, appointment: str) -> str:
    return str(uuid.UUID(hashlib.md5(f"{prefix}{appointment}".encode()).hexdigest()))  # noqa: S324


@dataclass
class Capture:
    """One cycle of the real worker over three due appointments, as recorded statement by statement."""

    statements: list[trace.Statement]
    appointment_ids: list[str]
    templates: dict[str, dict[str, Any]]


def capture(env: BenchEnv) -> Capture:
    """Run one cycle of AppointmentTimeoutJob (in this process, on a recording pool) over three due items."""
    from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob

    url = env.fresh_database("capture_timeout")
    with connect(url, autocommit=True) as conn:
        now = database_now(conn)
        seed.seed_appointments(conn, 3, due=now - timedelta(seconds=10), step=timedelta(milliseconds=1), tag="a")
    pool = trace.recording_pool(url)
    try:
        trace.TRACE.clear()
        result = AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(batch_size=200)).run_once()
        statements = list(trace.TRACE)
        trace.TRACE.clear()
    finally:
        pool.close()
    if result.expired_count != 3:
        raise RuntimeError(f"bench: the capture cycle expired {result.expired_count} of 3 appointments")
    with connect(url, autocommit=True) as conn:
        templates = seed.outbox_templates(conn)
    env.drop_database(url)
    ids = [seed.appointment_id("a", n) for n in (1, 2, 3)]
    return Capture(statements, ids, templates)


def _is_claim(statement: trace.Statement) -> bool:
    return "WITH claimed AS MATERIALIZED" in statement.sql


@dataclass
class Script:
    """A pgbench script and the -D constants it needs."""

    text: str
    constants: dict[str, str]
    per_item: list[str]  # the statements of one item, as the report lists them
    per_cycle: list[str]


def item_script(cap: Capture, item_tag: str) -> Script:
    """The pgbench script of one item (the second item of the captured cycle) plus the cycle's statements / 200."""
    st = cap.statements
    a, b, c = cap.appointment_ids
    first_ref = next(i for i, s in enumerate(st) if trace.references(s, [a]))
    a_start = max(i for i in range(first_ref) if st[i].text.upper() == "COMMIT") + 1
    c_ref = next(i for i, s in enumerate(st) if trace.references(s, [c]))
    c_end = next(i for i in range(c_ref, len(st)) if st[i].text.upper() == "COMMIT") + 1
    start, end = trace.item_segment(st, [a], [b])
    segment = st[start:end]
    # DEALLOCATE ALL (psycopg after a ROLLBACK) would drop pgbench's own prepared statements: left out, and
    # reported as a cost the worker pays and the baseline does not.
    cycle = [s for s in st[:a_start] + st[c_end:] if not s.text.upper().startswith("DEALLOCATE")]
    claim = next(s for s in segment if _is_claim(s))
    as_of = claim.params["as_of"]
    # What the worker knows from rows it fetched, by the variable pgbench \gset them into: the claim returns the
    # appointment with its locked slot, event and reminders (one statement).
    with_seed = _seeded_cluster(b)
    known = {
        b: "c_id",
        with_seed["slot"]: "c_slot_id",
        with_seed["event"]: "c_calendar_event_id",
        _reminder_id("r1", b): "h_r1",
        _reminder_id("r2", b): "h_r2",
    }
    instance = next(
        (s.params[1] for s in cycle if s.text.startswith("INSERT INTO jobs.cycle") and isinstance(s.params, list)),
        None,
    )
    if instance is not None:
        known[str(instance)] = "client_id"  # one jobs.cycle row per instance, as one per worker process
    # The claim's cursor (the previous item's place in the index, reset at each cycle): in pgbench the previous
    # transaction's claim result, which \gset left in c_pending_expires_at and c_id.
    cursor: dict[str, str] = {}
    if isinstance(claim.params, dict) and claim.params.get("after_id") is not None:
        known[str(claim.params["after_at"])] = "c_pending_expires_at"
        known[str(claim.params["after_id"])] = "c_id"
        cursor = {"c_pending_expires_at": "-infinity", "c_id": "00000000-0000-0000-0000-000000000000"}
    binder = trace.Binder(known=known, as_of=as_of)
    lines = ["-- generated by bench/timeout.py from a recorded cycle of AppointmentTimeoutJob; do not edit"]
    for s in segment:
        gset = "c_" if _is_claim(s) else None
        lines.append(trace.pgbench_command(s, binder, gset))
        if _is_claim(s):
            lines.append("@HELPER@")
    lines += ["\\set cycle random(1, 200)", "\\if :cycle = 1"]
    if cursor:  # a new cycle starts from the head of the index
        lines.append(
            f"SELECT '{cursor['c_pending_expires_at']}' AS pending_expires_at, '{cursor['c_id']}' AS id \\gset c_"
        )
    lines += [trace.pgbench_command(s, binder) for s in cycle]
    lines.append("\\endif")
    fresh = ", ".join(f"gen_random_uuid() AS m{k}" for k in range(len(binder.fresh_uuids)))
    helper = f"SELECT md5('r1' || :c_id)::uuid AS r1, md5('r2' || :c_id)::uuid AS r2, {fresh} \\gset h_"
    text = "\n".join(helper if line == "@HELPER@" else line for line in lines) + "\n"
    constants = dict(binder.constants) | cursor
    # later than every seeded deadline, whenever the baseline runs (all its items are due, like the drain's)
    constants["as_of"] = (as_of + timedelta(days=1)).isoformat()
    return Script(text, constants, [s.text for s in segment], [s.text for s in cycle])


def _seeded_cluster(appointment: str) -> dict[str, str]:
    """Slot and event ids of a seeded appointment, found by searching the seed's id scheme (n <= 3, tag a)."""
    for n in range(1, 4):
        if seed.appointment_id("a", n) == appointment:
            digest = hashlib.md5
            return {
                "slot": str(uuid.UUID(digest(f"a:slot:{n}".encode()).hexdigest())),
                "event": str(uuid.UUID(digest(f"a:event:{n}".encode()).hexdigest())),
            }
    raise KeyError(appointment)


# --------------------------------------------------------------------------------------------- runs


def _seed_due(url: str, count: int, tag: str = "a") -> datetime:
    """Seed ``count`` appointments all due (the oldest first), VACUUM ANALYZE; returns the newest deadline."""
    with connect(url, autocommit=True) as conn:
        now = database_now(conn)
        step = timedelta(microseconds=1)
        due = now - timedelta(seconds=5) - count * step
        seed.seed_appointments(conn, count, due=due, step=step, tag=tag)
        conn.execute("VACUUM ANALYZE calendar.availability_slot, calendar.appointment, calendar.calendar_event")
        conn.execute("VACUUM ANALYZE calendar.event_reminder")
    return due + count * step


def table_stats(url: str, tables: Sequence[str] = HOT_TABLES) -> dict[str, dict[str, Any]]:
    """Live and dead tuples, (auto)vacuum counts and sizes of the hot tables, plus the claim index's size."""
    out: dict[str, dict[str, Any]] = {}
    with connect(url, autocommit=True) as conn:
        for name in tables:
            schema, table = name.split(".")
            row = conn.execute(
                """
                SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, vacuum_count, autovacuum_count,
                       pg_total_relation_size(relid) AS total_bytes
                  FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s
                """,
                (schema, table),
            ).fetchone()
            out[name] = dict(row) if row else {}
        index = conn.execute(
            "SELECT pg_relation_size('calendar.ix_appointments_pending_expires_at') AS bytes"
        ).fetchone()
        out["calendar.ix_appointments_pending_expires_at"] = {"bytes": index["bytes"] if index else None}
    return out


def _wait_blocked(env: BenchEnv, url: str, count: int, timeout: float = 90) -> None:
    name = url.split("?", 1)[0].rsplit("/", 1)[1]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with env.admin() as admin:
            row = admin.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                (name,),
            ).fetchone()
        if row and row["n"] >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"bench: {count} workers did not reach their first query in {timeout} s")


def worker_drain(
    env: BenchEnv, count: int, workers: int, *, label: str, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Drain ``count`` due appointments with ``workers`` `pin worker appointment-timeout` processes."""
    url = env.fresh_database(label)
    _seed_due(url, count)
    holder = psycopg.connect(url)
    holder.execute("LOCK TABLE calendar.appointment IN ACCESS EXCLUSIVE MODE")
    role_env = env.role_env(url, **(extra_env or {}))
    roles: list[Role] = [
        env.spawn_pin(f"{label}-worker{k}", ["worker", "appointment-timeout"], role_env) for k in range(workers)
    ]
    try:
        _wait_blocked(env, url, workers)
        row = holder.execute("SELECT clock_timestamp() AS t0").fetchone()
        assert row is not None
        t0 = row[0]
        holder.commit()
        holder.close()
        wall0 = time.monotonic()
        with connect(url, autocommit=True) as conn:
            while True:
                left = conn.execute(
                    "SELECT count(*) AS n FROM calendar.appointment WHERE status = 'Pending'"
                ).fetchone()
                assert left is not None
                if left["n"] == 0:
                    break
                if any(r.process.poll() is not None for r in roles):
                    raise RuntimeError(f"bench: a worker exited during the drain; see {roles[0].log_path}")
                if time.monotonic() - wall0 > 3600:
                    raise RuntimeError("bench: the drain did not finish in an hour")
                time.sleep(0.25)
            last = conn.execute("SELECT max(created_at) AS last, count(*) AS n FROM outbox.message").fetchone()
            assert last is not None
    finally:
        env.stop_roles(roles)
    time.sleep(1.0)  # the workers' backends flushed their statistics at exit
    stats = table_stats(url)
    seconds = (last["last"] - t0).total_seconds()
    expired_rows = last["n"] // 2
    env.drop_database(url)
    return {
        "count": count,
        "workers": workers,
        "seconds": seconds,
        "items_per_second": expired_rows / seconds,
        "outbox_rows": last["n"],
        "table_stats": stats,
        "log": str(roles[0].log_path),
    }


def pgbench_drain(env: BenchEnv, script: Script, count: int, clients: int, *, label: str) -> dict[str, Any]:
    """The baseline: pgbench runs the captured per-item statements ``count`` times over ``count`` due items."""
    url = env.fresh_database(label)
    # one due appointment more per client than the clients' transactions: a claim then always finds a free one
    # (with exactly ``count``, a client's last claim could find the remaining few all locked by the other clients,
    # SKIP LOCKED gave it no row and its write failed on an empty id: pgbench aborted that client)
    _seed_due(url, count + clients)
    path = env.work_dir / f"{label}.sql"
    path.write_text(script.text)
    result = run_pgbench(
        env.pgbench_path(),
        url,
        path,
        clients=clients,
        transactions_per_client=count // clients,
        constants=script.constants,
        log_path=env.work_dir / f"{label}.log",
    )
    with connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) AS n FROM calendar.appointment WHERE status = 'Expired'").fetchone()
    assert row is not None
    if row["n"] != count:
        raise RuntimeError(f"bench: pgbench expired {row['n']} of {count} appointments; see {path}")
    stats = table_stats(url)
    env.drop_database(url)
    return {
        "count": count,
        "clients": clients,
        "items_per_second": result.tps,
        "latency_ms": result.latency_ms,
        "table_stats": stats,
    }


def profile(env: BenchEnv, count: int) -> dict[str, Any]:
    """cProfile of the real job (in a child process configured like the role) draining ``count`` items."""
    import sys

    url = env.fresh_database("profile")
    _seed_due(url, count)
    out = env.work_dir / "timeout-profile.json"
    role = env.spawn(
        "profile-timeout",
        [sys.executable, "-m", "bench.profile_worker", "appointment-timeout", str(out)],
        env.role_env(url),
    )
    code = role.process.wait(timeout=1800)
    env.roles.remove(role)
    env.drop_database(url)
    if code != 0:
        raise RuntimeError(f"bench: the profiled worker failed; see {role.log_path}")
    summary: dict[str, Any] = json.loads(out.read_text())
    return summary


def write_script(path: Path, script: Script) -> None:
    """Keep the generated script (and its constants) next to the results, for the record."""
    header = "-- constants (-D): " + json.dumps({k: v[:80] for k, v in script.constants.items()}) + "\n"
    path.write_text(header + script.text)
