"""Deadlines spread over time: the expiry lag of one worker, and end to end with everything running.

Expiry lag: one ``pin worker appointment-timeout`` (default settings: 60 s ticks, the next-deadline poll every
second) runs; N appointments are seeded with PendingExpiresAt spread evenly over S seconds from a few seconds
ahead. Lag of an item = the commit of its expiry (the ``created_at`` of its appointment-cancelled outbox row,
written just before the COMMIT) minus its PendingExpiresAt, both on the database clock.

End to end: the relay, both workers and the four consumer groups run (``pin relay``, ``pin worker ...``,
``pin consume ...``); the same kind of spread deadlines; per appointment, the time from PendingExpiresAt to the
later of its two notification rows (agent and investor; ``created_at`` is set in the consumer's transaction).
A bench-only trigger records when the relay deleted (after the broker's ack) each outbox row, which splits the
total into expiry, relay and consumer parts.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from bench import kafka as bare
from bench.env import BenchEnv, Role
from bench.relay import _ACK_LOG
from bench.results import percentile
from bench.seed import seed_appointments
from pin.db import connect, database_now
from pin.messaging import topics
from pin.messaging.topics import CONSUMER_GROUPS


def _seed_spread(url: str, count: int, spread: float, lead: float = 3.0) -> None:
    with connect(url, autocommit=True) as conn:
        now = database_now(conn)
        seed_appointments(
            conn, count, due=now + timedelta(seconds=lead), step=timedelta(seconds=spread / count), tag="live"
        )


def _wait_pending_gone(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) AS n FROM calendar.appointment WHERE status = 'Pending'").fetchone()
            if row is not None and row["n"] == 0:
                return
            time.sleep(0.5)
    raise RuntimeError("bench: appointments were still Pending long after their deadlines")


def _distribution(ms: list[float]) -> dict[str, float]:
    return {
        "count": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
        "min_ms": min(ms) if ms else float("nan"),
    }


def expiry_lag(env: BenchEnv, count: int, spread: float) -> dict[str, Any]:
    """One worker; ``count`` deadlines over ``spread`` seconds; the lag distribution."""
    url = env.fresh_database("lag")
    role = env.spawn_pin("lag-worker", ["worker", "appointment-timeout"], env.role_env(url))
    try:
        if not role.wait_for_log("worker started", 60):
            raise RuntimeError(f"bench: the worker did not start; see {role.log_path}")
        _seed_spread(url, count, spread)
        _wait_pending_gone(url, spread + 120)
        with connect(url, autocommit=True) as conn:
            rows = conn.execute(
                """
                SELECT EXTRACT(EPOCH FROM m.created_at - a.pending_expires_at)::float8 * 1000 AS ms,
                       EXTRACT(EPOCH FROM a.pending_expires_at - min(a.pending_expires_at) OVER ())::float8 AS at
                  FROM calendar.appointment AS a
                  JOIN outbox.message AS m ON m.message_key = a.id::text AND m.topic = %s
                 ORDER BY a.pending_expires_at
                """,
                (topics.APPOINTMENT_CANCELLED,),
            ).fetchall()
    finally:
        env.stop_roles([role])
    env.drop_database(url)
    ms = [r["ms"] for r in rows]
    return {**_distribution(ms), "lags_ms": ms, "due_offsets_s": [r["at"] for r in rows], "spread_s": spread}


def end_to_end(env: BenchEnv, count: int, spread: float) -> dict[str, Any]:
    """Everything running; PendingExpiresAt -> both notification rows."""
    env.restart_broker()
    bare.create_topics(env.kafka_bootstrap, list(topics.all_topics()))
    url = env.fresh_database("e2e")
    with connect(url, autocommit=True) as conn:
        conn.execute(_ACK_LOG)
    role_env = env.role_env(url)
    roles: list[Role] = [
        env.spawn_pin("e2e-relay", ["relay"], role_env),
        env.spawn_pin("e2e-timeout", ["worker", "appointment-timeout"], role_env),
        env.spawn_pin("e2e-promotions", ["worker", "expire-promotions"], role_env),
    ]
    consumers = [_consumer(env, group, role_env) for group in CONSUMER_GROUPS]
    roles += consumers
    try:
        for c in consumers:
            if not c.wait_for_log("partitions assigned", 90):
                raise RuntimeError(f"bench: consumer {c.name} got no partitions; see {c.log_path}")
        time.sleep(1.0)
        _seed_spread(url, count, spread)
        _wait_pending_gone(url, spread + 120)
        deadline = time.monotonic() + 120
        with connect(url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT count(*) AS n FROM notifications.notification").fetchone()
                if row is not None and row["n"] >= 2 * count:
                    break
                time.sleep(0.5)
            rows = conn.execute(
                """
                SELECT EXTRACT(EPOCH FROM n.last - a.pending_expires_at)::float8 * 1000 AS total_ms,
                       EXTRACT(EPOCH FROM k.created_at - a.pending_expires_at)::float8 * 1000 AS expiry_ms,
                       EXTRACT(EPOCH FROM k.deleted_at - k.created_at)::float8 * 1000 AS relay_ms,
                       EXTRACT(EPOCH FROM n.last - k.deleted_at)::float8 * 1000 AS consumer_ms,
                       n.recipients
                  FROM calendar.appointment AS a
                  JOIN (SELECT subject_id, max(created_at) AS last, count(DISTINCT recipient_user_id) AS recipients
                          FROM notifications.notification GROUP BY subject_id) AS n ON n.subject_id = a.id
                  LEFT JOIN public.bench_ack AS k ON k.message_key = a.id::text AND k.topic = %s
                """,
                (topics.APPOINTMENT_CANCELLED,),
            ).fetchall()
            complete = conn.execute(
                "SELECT count(*) AS n FROM (SELECT subject_id FROM notifications.notification "
                "GROUP BY subject_id HAVING count(DISTINCT recipient_user_id) = 2) AS s"
            ).fetchone()
    finally:
        env.stop_roles(roles)
    env.drop_database(url)
    total = [r["total_ms"] for r in rows if r["recipients"] == 2]
    return {
        "appointments": count,
        "both_notified": complete["n"] if complete else 0,
        "total": _distribution(total),
        "expiry": _distribution([r["expiry_ms"] for r in rows if r["expiry_ms"] is not None]),
        "relay": _distribution([r["relay_ms"] for r in rows if r["relay_ms"] is not None]),
        "consumer": _distribution([r["consumer_ms"] for r in rows if r["consumer_ms"] is not None]),
        "totals_ms": total,
    }


def _consumer(env: BenchEnv, group: str, role_env: dict[str, str]) -> Role:
    """`pin consume <group>` on an embedded broker; on a configured one, the same runtime under a bench group id."""
    import sys

    if not env.external_kafka:
        return env.spawn_pin(f"e2e-consume-{group}", ["consume", group], role_env)
    from pin.consumer_groups import routes_of

    mapping = ",".join(f"{t}={t}" for t in routes_of(group))
    return env.spawn(
        f"e2e-consume-{group}",
        [sys.executable, "-m", "bench.consume_proc", "runtime", group, f"bench-{env.run_id}-e2e-{group}", mapping],
        role_env,
    )
