"""`python -m bench.held_horizon URL [--rate R] [--clean S] [--held S]`: the relay's read under a held xmin horizon.

Not a phase of `python -m bench` (the pressure phase runs the whole system): a short look at the outbox read alone.
On the migrated database URL (emptied first), writer threads insert outbox rows at a steady rate while a loop does
what the relay does with the database: its read (``OUTBOX_READ_OWNED``), the delete of what it read, and the
heartbeat every second (the instance renewed, the floors advanced and stored when due). After ``--clean`` seconds
a transaction takes an xid and holds the horizon for ``--held`` seconds. Per 10-second window it prints the read's
duration (p50, p99), the commit to delete latency (p50, p99, max: the relay's
``pin_outbox_publish_latency_seconds`` without the broker), the dead rows, and the shared buffers of one read a
second (EXPLAIN (ANALYZE, BUFFERS): counted, not timed); and the load average. It imports whichever `pin` is on the
path, so the same script measures an older checkout (``PYTHONPATH=<checkout>/src``).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import defaultdict
from typing import Any

import psycopg

from bench.results import percentile
from pin.db import connect
from pin.outbox.relay import queries
from pin.outbox.relay.kept_floors import KeptFloors
from pin.outbox.writer import OutboxRow, outbox_insert, vpart_of

OWNER = "held-horizon"
KEYS = 5_000
# the settle's acknowledged positions (outbox.acked_position): none, there is no broker here
_NO_MARKS = {"topics": "{}", "partitions": "{}", "offsets": "{}"}


def _row(n: int) -> OutboxRow:
    import uuid
    from datetime import UTC, datetime

    key = f"appointment-{n % KEYS}"
    assert vpart_of(key) >= 0
    return OutboxRow(uuid.uuid4(), "pin.bench.horizon.v1", key, "pin.bench.thing", 1, {"N": n}, {"correlation-id": "b"},
                     datetime.now(UTC))  # fmt: skip


def _writer(url: str, rate: float, stop: threading.Event) -> None:
    """Rows at ``rate`` per second, ten per transaction."""
    n = 0
    started = time.monotonic()
    with connect(url) as conn:
        while not stop.is_set():
            outbox_insert(conn, [_row(n + k) for k in range(10)])
            conn.commit()
            n += 10
            ahead = started + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def _read_buffers(conn: psycopg.Connection[dict[str, Any]], plan: Any, floors: KeptFloors) -> float:
    """The shared buffers one read touches (EXPLAIN (ANALYZE, BUFFERS) of the read itself)."""
    params = {**floors.params(), "owner": OWNER, "per_vpart": 32, "limit": 2000, "in_flight": "{}"}
    with conn.transaction():
        if plan:
            conn.execute(plan)
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.OUTBOX_READ_OWNED, params).fetchone()
    assert row is not None
    top = next(iter(row.values()))[0]["Plan"]
    return float(top["Shared Hit Blocks"] + top["Shared Read Blocks"])


def run(url: str, rate: float, clean: float, held: float) -> dict[str, Any]:
    """The relay's database loop beside steady writers, a horizon held from ``clean`` to ``clean + held`` s."""
    plan = getattr(queries, "RELAY_PLAN_BY_INDEX", None)  # absent in a checkout without floors
    windows: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM outbox.message")
        conn.execute(
            "INSERT INTO outbox.relay_instance (instance_id, expires_at) VALUES (%s, now() + interval '1 hour')",
            (OWNER,),
        )
        conn.execute("UPDATE outbox.relay_lease SET owner = %s", (OWNER,))
        floors = KeptFloors()
        floors.load(conn, range(64))
    stop = threading.Event()
    writers = [threading.Thread(target=_writer, args=(url, rate / 2, stop), daemon=True) for _ in range(2)]
    for thread in writers:
        thread.start()
    holder = psycopg.connect(url)
    started = time.monotonic()
    renewed = 0.0
    held_since: float | None = None
    with connect(url, autocommit=True) as conn:
        while (elapsed := time.monotonic() - started) < clean + held:
            if held_since is None and elapsed >= clean:
                holder.execute("SELECT pg_current_xact_id()")
                held_since = elapsed
            window = windows[int(elapsed // 10)]
            if time.monotonic() - renewed >= 1.0:
                with conn.transaction():  # the heartbeat: the instance renewed, the floors advanced (stored when due)
                    conn.execute(queries.RELAY_INSTANCE_RENEW, {"owner": OWNER, "ttl": 3600})
                    if plan:
                        conn.execute(plan)
                    floors.advance(conn)
                    floors.write(conn, OWNER)
                renewed = time.monotonic()
                dead = conn.execute(
                    "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'outbox.message'::regclass"
                ).fetchone()
                window["dead"].append(float(str(dead["n_dead_tup"])) if dead else 0.0)
                window["buffers"].append(_read_buffers(conn, plan, floors))
            params = {**floors.params(), "owner": OWNER, "per_vpart": 32, "limit": 2000, "in_flight": "{}"}
            t0 = time.perf_counter()
            with conn.transaction(), conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
                if plan:
                    cur.execute(plan)
                rows = cur.execute(queries.OUTBOX_READ_OWNED, params).fetchall()
            window["read_ms"].append((time.perf_counter() - t0) * 1000)
            if rows:
                ids = "{" + ",".join(str(r[0]) for r in rows) + "}"
                for record in conn.execute(queries.OUTBOX_DELETE_PUBLISHED, {**_NO_MARKS, "ids": ids}):
                    window["latency_ms"].append(float(str(record["latency"])) * 1000)
            else:
                time.sleep(0.05)  # the relay waits for a NOTIFY or its poll; a short stand-in
    stop.set()
    holder.close()
    for thread in writers:
        thread.join(timeout=5)
    return {"windows": windows, "held_since": held_since}


def main() -> None:
    """Run and print one line per 10-second window."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--clean", type=float, default=20.0)
    parser.add_argument("--held", type=float, default=120.0)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    result = run(args.url, args.rate, args.clean, args.held)
    print(f"rate {args.rate:.0f} rows/s; horizon held from {result['held_since']:.0f} s; load {load_before:.1f} ->"
          f" {os.getloadavg()[0]:.1f} (1 min, 2 cores)")  # fmt: skip
    for number, window in sorted(result["windows"].items()):
        reads, latency, dead, buffers = window["read_ms"], window["latency_ms"], window["dead"], window["buffers"]
        print(
            f"{number * 10:4d}-{number * 10 + 10:<4d}s read ms p50 {percentile(reads, 50):7.2f} p99"
            f" {percentile(reads, 99):7.2f}  commit->delete ms p50 {percentile(latency, 50):7.1f} p99"
            f" {percentile(latency, 99):7.1f}  max {max(latency, default=0):7.1f}  dead {max(dead, default=0):8.0f}"
            f"  read buffers p50 {percentile(buffers, 50):7.0f}"
        )


if __name__ == "__main__":
    main()
