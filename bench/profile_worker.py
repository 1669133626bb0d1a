"""A role's work profiled with cProfile, in a process configured like the role (`python -m bench.profile_worker`).

Usage, with PIN_DATABASE_URL (and PIN_KAFKA_BOOTSTRAP_SERVERS) set:

- ``appointment-timeout OUT.json`` / ``expire-promotions OUT.json``: cycles of the job (built as pin.bootstrap
  builds it) until a cycle finds nothing to do;
- ``relay OUT.json``: the relay as `pin relay --once` runs it (``OutboxRelay.run(..., until_empty=True)``), until
  the outbox is empty;
- ``consumer OUT.json GROUP KAFKA_GROUP_ID BENCH_TOPIC=REAL_TOPIC COUNT``: the group's runtime until its inbox
  holds COUNT messages.

Writes a summary: wall time, items, and where the time went (self time grouped by package; the time psycopg
spends blocked on the server is its own category).
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

from pin.db import create_pool
from pin.roles import start_role

# psycopg functions whose self time is the process blocked on the server: its wait loop, and the PQexec of the
# transaction commands it sends itself (BEGIN, COMMIT, SAVEPOINT, RELEASE), and the pipeline's send/receive loop.
_BLOCKING = frozenset(
    {"wait", "wait_c", "wait_conn", "wait_select", "wait_epoll", "wait_poll", "_exec_command", "_communicate_gen"}
)

CATEGORIES = (
    ("waiting for PostgreSQL (round trips and server work)", ("<wait>",)),
    ("psycopg client work (building and sending queries, adapting values, reading rows, pool)", ("psycopg",)),
    ("logging (structlog, stdlib logging, redaction, JSON rendering)", ("structlog", "logging", "observability")),
    ("tracing (opentelemetry no-op spans)", ("opentelemetry",)),
    ("pydantic (contracts, serialisation)", ("pydantic",)),
    ("pin code (worker, domain, repository, unit of work)", ("pin/",)),
    ("uuid, json, datetime and other stdlib", ("uuid", "json", "datetime", "enum", "copy", "re")),
)


BROKER = "waiting for the broker (librdkafka poll, commit, flush, produce)"

# The parts of issue 38's per-item profile (bench/where_time_goes.py): finer than CATEGORIES, by source file; the
# first whose needle is in a function's file takes its self time (a builtin's goes to its heaviest caller's part).
WAITING, PSYCOPG = "waiting for PostgreSQL", "psycopg client work"
PARTS = (
    ("tracing", ("opentelemetry", "pin/observability/tracing")),
    ("log line", ("structlog", "/logging/", "pin/observability/logging")),
    ("metrics", ("prometheus_client", "pin/observability/metrics", "/metrics.py")),
    # the workers build payloads and outbox rows here; the consumers decode and validate messages here
    (
        "contracts: payloads, outbox rows, envelopes",
        ("pin/outbox/writer", "contracts.py", "pin/messaging/envelope", "pydantic"),
    ),
    ("cycle bookkeeping and unit of work", ("pin/jobs/", "pin/unit_of_work", "pin/faults", "pin/db.py")),
    (PSYCOPG, ("psycopg",)),
    ("relay machinery", ("pin/outbox/",)),
    ("consumer runtime (decode, inbox, offsets)", ("pin/messaging/",)),
    ("domain, service, repository, handler", ("pin/",)),
    ("confluent_kafka (Python side)", ("confluent_kafka",)),
    ("stdlib (uuid, datetime, json, threading, ...)", ("/lib/python", "<frozen")),
)


def _part(filename: str, name: str) -> str | None:
    if filename == "~":
        if "cimpl" in name or "confluent_kafka" in name:
            return BROKER
        if "wait" in name or "select" in name or "poll" in name:
            return WAITING
        return None
    if name in _BLOCKING and "psycopg" in filename:
        return WAITING
    for label, needles in PARTS:
        if any(needle in filename for needle in needles):
            return label
    return "other"


def _category(filename: str, name: str) -> str | None:
    if filename == "~":
        if "cimpl" in name or "confluent_kafka" in name:
            return BROKER
        if "wait" in name or "select" in name or "poll" in name:
            return CATEGORIES[0][0]
        return None  # a builtin: charged to its caller
    if name in _BLOCKING and "psycopg" in filename:
        return CATEGORIES[0][0]
    for label, needles in CATEGORIES[1:]:
        if any(f"/{needle}" in filename or filename.startswith(needle) for needle in needles):
            return label
    return "other"


def summarize(stats: pstats.Stats, wall: float) -> dict[str, Any]:
    """Self time grouped by category; a builtin's self time goes to the category of its heaviest caller."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    parts: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for func, (_cc, _nc, tottime, _ct, callers) in raw.items():
        filename, _line, name = func
        heaviest = max(callers.items(), key=lambda item: item[1][2] if len(item[1]) > 2 else 0)[0] if callers else None
        label = _category(filename, name)
        if label is None:
            label = (_category(heaviest[0], heaviest[2]) if heaviest else None) or "other"
        totals[label] = totals.get(label, 0.0) + tottime
        part = _part(filename, name)
        if part is None:
            part = (_part(heaviest[0], heaviest[2]) if heaviest else None) or "other"
        parts[part] = parts.get(part, 0.0) + tottime
        top.append((tottime, f"{Path(filename).name}:{name}"))
    profiled = sum(totals.values())
    breakdown = {
        k: {"seconds": round(v, 3), "share": round(v / profiled, 3)}
        for k, v in sorted(totals.items(), key=lambda kv: -kv[1])
    }
    top.sort(reverse=True)
    return {
        "wall_seconds": round(wall, 3),
        "profiled_seconds": round(profiled, 3),
        "breakdown": breakdown,
        "top_self_time": [{"function": f, "seconds": round(t, 3)} for t, f in top[:15]],
        "parts": {k: round(v, 4) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])},
        "top_cumulative": _top_cumulative(raw),
    }


def _top_cumulative(raw: dict[Any, Any], count: int = 40) -> list[dict[str, Any]]:
    """The pin functions with the most cumulative time (what each step costs with what it calls)."""
    rows = [
        (ct, nc, f"{filename.split('/src/')[-1]}:{name}")
        for (filename, _line, name), (_cc, nc, _tt, ct, _callers) in raw.items()
        if "/pin/" in filename
    ]
    rows.sort(reverse=True)
    return [{"function": f, "calls": nc, "seconds": round(ct, 4)} for ct, nc, f in rows[:count]]


# PIN_BENCH_PROFILE_CLOCK=thread: the profile counts the main thread's CPU time (time.thread_time) instead of wall
# time, so that a busy machine's waits for a CPU and every blocked call (PostgreSQL, the broker) count nothing: what
# is left is the client's own work, by part (bench/where_time_goes.py sets it).
THREAD_CLOCK = os.environ.get("PIN_BENCH_PROFILE_CLOCK") == "thread"
# With it, a job's first PIN_BENCH_PROFILE_UNPROFILED_ITEMS items (whole cycles) run without the profiler, their
# CPU and wall time per item reported as "unprofiled" (the profiler's own cost is then known).


def _profiler() -> cProfile.Profile:
    return cProfile.Profile(time.thread_time) if THREAD_CLOCK else cProfile.Profile()


def _profiled(work: Any) -> tuple[Any, dict[str, Any]]:
    profiler = _profiler()
    started = time.perf_counter()
    profiler.enable()
    try:
        result = work()
    finally:
        profiler.disable()
    wall = time.perf_counter() - started
    return result, summarize(pstats.Stats(profiler), wall)


def relay(out: Path) -> int:
    """`pin relay --once` (pin.bootstrap.run_relay: start-up, leases, drain, close), profiled."""
    from pin.bootstrap import run_relay

    totals, summary = _profiled(lambda: run_relay(once=True))
    assert totals is not None
    summary["items"] = totals["published"]
    summary["items_per_second_under_profiler"] = round(totals["published"] / summary["wall_seconds"], 1)
    out.write_text(json.dumps(summary, indent=2))
    return 0


def consumer(out: Path, group: str, kafka_group: str, mapping: str, count: int) -> int:
    """A group's runtime until its inbox holds ``count`` messages, profiled (the main thread)."""
    import threading

    from pin.consumer_groups import routes_of
    from pin.messaging.consumer import ConsumerRuntime
    from pin.messaging.kafka import consumer_config, producer_config

    context = start_role(f"consume-{group}", metrics=False)
    settings = context.settings
    bench_topic, _, real_topic = mapping.partition("=")
    pool = create_pool(settings.database.require_url(), min_size=1, max_size=3, name=f"consume-{group}")
    runtime = ConsumerRuntime(
        group=group,
        routes={bench_topic: routes_of(group)[real_topic]},
        pool=pool,
        consumer_config=consumer_config(settings, kafka_group, **{"client.id": f"pin-consume-{group}"}),
        producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
    )

    def watch() -> None:
        with pool.connection() as conn:
            while not context.stop.wait(0.5):
                row = conn.execute(
                    "SELECT count(*) AS n FROM messaging.inbox WHERE consumer_group = %s", (group,)
                ).fetchone()
                conn.commit()
                if row is not None and int(str(row["n"])) >= count:
                    context.stop.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        _, summary = _profiled(lambda: runtime.run(context.stop))
    finally:
        pool.close()
    summary["items"] = count
    summary["items_per_second_under_profiler"] = round(count / summary["wall_seconds"], 1)
    summary["note"] = "wall time includes the group join (a few seconds on the embedded broker)"
    out.write_text(json.dumps(summary, indent=2))
    return 0


def main(argv: list[str]) -> int:
    """Profile one job until it has nothing left to do."""
    job_name, out = argv[0], Path(argv[1])
    if job_name == "relay":
        return relay(out)
    if job_name == "consumer":
        return consumer(out, argv[2], argv[3], argv[4], int(argv[5]))
    context = start_role(job_name, metrics=False)
    settings = context.settings
    pool = create_pool(settings.database.require_url(), min_size=1, max_size=2, name=job_name)
    job: Any
    if job_name == "appointment-timeout":
        from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob

        job = AppointmentTimeoutJob(
            pool, AppointmentTimeoutConfig(batch_size=settings.jobs.appointment_timeout_batch_size)
        )
        items = "expired_count"
    else:
        from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob

        job = ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=settings.jobs.expire_promotions_batch_size))
        items = "expired_count"
    unprofiled: dict[str, float] = {}
    if THREAD_CLOCK:  # the first items without the profiler: the client's CPU per item as it runs
        half = int(os.environ.get("PIN_BENCH_PROFILE_UNPROFILED_ITEMS", "0"))
        cpu, wall, done = time.thread_time(), time.perf_counter(), 0
        while done < half:
            n = getattr(job.run_once(), items)
            done += n
            if n == 0:
                break
        if done:
            unprofiled = {
                "items": done,
                "cpu_us_per_item": round((time.thread_time() - cpu) / done * 1e6, 1),
                "wall_us_per_item": round((time.perf_counter() - wall) / done * 1e6, 1),
            }
    profiler = _profiler()
    done = 0
    started = time.perf_counter()
    profiler.enable()
    while True:
        result = job.run_once()
        done += getattr(result, items)
        if getattr(result, items) == 0:
            break
    profiler.disable()
    wall = time.perf_counter() - started
    pool.close()
    summary = summarize(pstats.Stats(profiler), wall)
    summary["unprofiled"] = unprofiled
    summary["items"] = done
    summary["items_per_second_under_profiler"] = round(done / wall, 1)
    out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
