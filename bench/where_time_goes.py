"""Where the time goes, per item (issue 38, point 1): `python -m bench.where_time_goes [--items N] [--out FILE]`.

For each workload, on the bench's own servers (embedded, or PIN_DATABASE_URL / PIN_KAFKA_BOOTSTRAP_SERVERS as
`python -m bench`): the unprofiled rate and its same-run baseline (the phases' own functions, at ``--items``), then
cProfile of the same work (bench/profile_worker.py) counting the main thread's CPU time
(``PIN_BENCH_PROFILE_CLOCK=thread``: a busy machine's waits for a CPU and every blocked call count nothing), its self
time split into the parts of issue 38 (tracing, the log line, metrics, contracts: payloads and outbox rows, the
cycle's bookkeeping, psycopg's client work, ...; ``profile_worker.PARTS``), as microseconds per item. The two
workers also run their first half of the items without the profiler, which gives their CPU per item as it runs:
cProfile inflates the parts by about that ratio, small functions most, so read the parts as shares of that figure.
Workloads: one appointment-timeout worker per appointment, expire-promotions per purchase (batches of 200), the
relay per message (its main thread: the settling thread's DELETE is not in it), the crm and notifications consumers
per message (one lane: all of it on the main thread). Prints a markdown table per workload; ``--out`` keeps the JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import consumers, promotion, relay, timeout
from bench.env import BenchEnv, make_env
from bench.seed import MessageFactory

GROUPS = ("crm", "notifications")


def _per_item_us(rate: float) -> float:
    return 1e6 / rate if rate else float("nan")


def _workload(name: str, rate: float, baseline: float, baseline_what: str, prof: dict[str, Any]) -> dict[str, Any]:
    items = prof["items"]
    return {
        "workload": name,
        "unprofiled_us_per_item": round(_per_item_us(rate), 1),
        "baseline_us_per_item": round(_per_item_us(baseline), 1),
        "baseline": baseline_what,
        "ratio": round(rate / baseline, 3) if baseline else None,
        "profiled_us_per_item": round(prof["wall_seconds"] / items * 1e6, 1),
        "profiled_cpu_us_per_item": round(prof["profiled_seconds"] / items * 1e6, 1),
        "unprofiled_job": prof.get("unprofiled") or {},
        "parts_us_per_item": {k: round(v / items * 1e6, 1) for k, v in prof["parts"].items()},
        "top_cumulative_us_per_item": [
            {**t, "us_per_item": round(t["seconds"] / items * 1e6, 1)} for t in prof["top_cumulative"][:25]
        ],
        "items": items,
        "load_1m": os.getloadavg()[0],
    }


def measure(env: BenchEnv, items: int) -> list[dict[str, Any]]:
    """Every workload: unprofiled rate, baseline, profile."""
    from bench.__main__ import promotion_profile

    cap = timeout.capture(env)
    script = timeout.item_script(cap, "a")
    statements, templates = promotion.capture(env)
    factory = MessageFactory({**cap.templates, **templates})
    out: list[dict[str, Any]] = []

    base = timeout.pgbench_drain(env, script, items, 1, label="wtg_pgbench_timeout")
    run = timeout.worker_drain(env, items, 1, label="wtg_timeout")
    out.append(_workload("appointment-timeout, one worker, per appointment", run["items_per_second"],
                         base["items_per_second"], "pgbench -c 1 on the captured statements",
                         timeout.profile(env, items)))  # fmt: skip

    count = max(items, 2_000) // promotion.BATCH * promotion.BATCH
    pscript = promotion.batch_script(statements)
    pbase = promotion.pgbench_drain(env, pscript, count, label="wtg_pgbench_promotion")
    prun = promotion.worker_drain(env, count, label="wtg_promotion")
    out.append(_workload("expire-promotions, per purchase (batches of 200)", prun["items_per_second"],
                         pbase["items_per_second"], "pgbench, one transaction per batch",
                         promotion_profile(env, count)))  # fmt: skip

    rcount = max(items * 10, 20_000)
    drain = relay.throughput(env, factory, rcount)
    out.append(_workload("relay, per message", drain["messages_per_second"], drain["baseline_messages_per_second"],
                         "bare producer, the relay's configuration", relay.profile(env, factory, rcount)))  # fmt: skip

    runs = consumers.run(env, factory, items, list(GROUPS))
    for group in GROUPS:
        g = runs[group]
        prof = consumers.profile(env, factory, group, items)
        out.append(_workload(f"{group} consumer, per message", g["messages_per_second"],
                             g["same_statements"]["messages_per_second"], "the same statements, bare loop",
                             prof))  # fmt: skip
    return out


def markdown(workloads: list[dict[str, Any]]) -> str:
    """One table per workload: microseconds per item by part."""
    lines: list[str] = []
    for w in workloads:
        lines += [
            f"#### {w['workload']}",
            "",
            f"Unprofiled {w['unprofiled_us_per_item']:,.0f} µs per item against {w['baseline_us_per_item']:,.0f} for "
            f"the baseline ({w['baseline']}; ratio {w['ratio']}); under cProfile {w['profiled_us_per_item']:,.0f} µs "
            f"({w['items']:,} items, load {w['load_1m']:.2f}); the main thread's CPU under the profiler "
            f"{w['profiled_cpu_us_per_item']:,.0f} µs per item"
            + (
                f", without it {w['unprofiled_job']['cpu_us_per_item']:,.0f} µs (the first "
                f"{w['unprofiled_job']['items']:,} items, in process)"
                if w["unprofiled_job"]
                else ""
            )
            + ".",
            "",
            "| part | µs of the main thread's CPU per item (profiled) | share |",
            "|---|---:|---:|",
        ]
        total = sum(w["parts_us_per_item"].values()) or 1.0
        for part, us in w["parts_us_per_item"].items():
            lines.append(f"| {part} | {us:,.1f} | {100 * us / total:.0f}% |")
        lines += ["", "Heaviest pin functions, cumulative µs per item (profiled): " + ", ".join(
            f"`{t['function']}` {t['us_per_item']:,.1f}" for t in w["top_cumulative_us_per_item"][:12]
        ), ""]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(prog="python -m bench.where_time_goes", description=__doc__)
    parser.add_argument("--items", type=int, default=2_000, help="items per workload (the relay: 10 times that)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    args = parser.parse_args(argv)
    from pin.observability.logging import configure_unstarted

    configure_unstarted(logging.WARNING)
    os.environ["PIN_BENCH_PROFILE_CLOCK"] = "thread"  # the profiled children count their main thread's CPU
    os.environ["PIN_BENCH_PROFILE_UNPROFILED_ITEMS"] = str(args.items // 2)
    env = make_env()
    started = time.monotonic()
    try:
        env.start()
        workloads = measure(env, args.items)
    finally:
        env.close()
    print(markdown(workloads))
    print(f"where_time_goes: {time.monotonic() - started:.0f} s, load at end {os.getloadavg()}")
    if args.out is not None:
        args.out.write_text(json.dumps(workloads, indent=2) + "\n")
    shutil.rmtree(env.work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
