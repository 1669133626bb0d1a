"""The appointment-timeout worker's client CPU per item, kept cursors against a new cursor per statement, in one
process: `python -m bench.timeout_cpu [--items N] [--rounds R]`.

On an embedded PostgreSQL (or PIN_DATABASE_URL; the job needs no broker), the job as `profile_worker` builds it
drains ``--items`` due appointments per drain, the two ways alternated ``--rounds`` times after a warm-up drain of
each: "new" gives the claim and the write a new cursor per statement (closed before the next one, as the ``with``
blocks did before ``pin.db.kept_cursor``), "kept" is the code as it is. The figure is the main thread's CPU
(``time.thread_time``) per item: a busy machine's waits count nothing. The log lines go to /dev/null (rendered as
in production, not written to a terminal). Prints one JSON line per drain and the means.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench import timeout
from bench.env import make_env


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(prog="python -m bench.timeout_cpu", description=__doc__)
    parser.add_argument("--items", type=int, default=3_000, help="due appointments per drain")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two ways")
    args = parser.parse_args(argv)
    os.environ.setdefault("PIN_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # no broker: the job writes the outbox only
    env = make_env()
    env.start()
    try:
        url = env.fresh_database("timeout_cpu")
        os.environ.update(env.role_env(url))
        from psycopg.rows import tuple_row

        from pin.calendar import expiry, repository
        from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob
        from pin.db import create_pool, kept_cursor
        from pin.roles import start_role

        opened: list[Any] = []

        def new_cursor(conn: Any, *, binary: bool = False) -> Any:
            while opened:
                opened.pop().close()
            cur = conn.cursor(row_factory=tuple_row, binary=binary)
            opened.append(cur)
            return cur

        ways = {"new": new_cursor, "kept": kept_cursor}
        context = start_role("appointment-timeout", metrics=False)
        pool = create_pool(context.settings.database.require_url(), min_size=1, max_size=2, name="timeout-cpu")
        batch = context.settings.jobs.appointment_timeout_batch_size
        job = AppointmentTimeoutJob(pool, AppointmentTimeoutConfig(batch_size=batch))
        devnull, saved = os.open(os.devnull, os.O_WRONLY), (os.dup(1), os.dup(2))
        results: list[dict[str, Any]] = []
        for i, way in enumerate(["new", "kept"] + ["new", "kept"] * args.rounds):
            timeout._seed_due(url, 400 if i < 2 else args.items, tag=f"c{i}")
            expiry.kept_cursor = repository.kept_cursor = ways[way]  # type: ignore[assignment]
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            cpu, wall, done = time.thread_time(), time.perf_counter(), 0
            while n := job.run_once().expired_count:
                done += n
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            if i >= 2:
                row = {
                    "way": way,
                    "items": done,
                    "cpu_us_per_item": round(cpu / done * 1e6, 1),
                    "wall_us_per_item": round(wall / done * 1e6, 1),
                    "load_1m": round(os.getloadavg()[0], 2),
                }
                results.append(row)
                print(json.dumps(row), flush=True)
        pool.close()
        for way in ways:
            cpus = [r["cpu_us_per_item"] for r in results if r["way"] == way]
            print(f"{way}: CPU µs per item {cpus}, mean {sum(cpus) / len(cpus):.1f}")
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
