"""The lease tables' dead row versions under a held xmin horizon: one real relay, a trickle of writes, 2 minutes.

A `pin relay` process (its heartbeat every second, as deployed) on a fresh database of an embedded PostgreSQL and
broker; a writer inserts outbox rows spread over every vpart (so that every floor moves); after ``--clean`` seconds
a session runs ``BEGIN; SELECT txid_current();`` and holds it for ``--held`` seconds, so that vacuum may remove
nothing. Every 10 s it prints the dead and the updated row versions of the tables the relay rewrites for its leases
(``outbox.relay_lease``, ``outbox.relay_instance`` and, where it exists, ``outbox.relay_floor``) from
pg_stat_user_tables. The same script runs on a checkout before the change (the tables it does not have are left
out), which is how bench/README.md's before and after were taken.

    .venv/bin/python -m bench.lease_versions [--clean 10] [--held 120] [--rate 200]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from typing import Any

import psycopg

from bench.env import make_env
from pin.db import connect

TABLES = ("outbox.relay_lease", "outbox.relay_instance", "outbox.relay_floor")
_STATS = """
SELECT relid::regclass::text AS name, n_dead_tup AS dead, n_tup_upd AS updated, n_tup_hot_upd AS hot
FROM pg_stat_user_tables WHERE relid::regclass::text = ANY(%s)
"""


def _writer(url: str, rate: float, stop: threading.Event) -> None:
    """Outbox rows at ``rate`` a second, one a transaction, keys spread over the vparts."""
    with connect(url, autocommit=True) as conn:
        started = time.monotonic()
        n = 0
        while not stop.is_set():
            conn.execute(
                "INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version,"
                " payload, value, occurred_at) VALUES (%s, %s, 'pin.bench.leases.v1', %s, 'e', 1, '{}', '{}', now())",
                (uuid.uuid4(), n % 64, f"k-{n}"),
            )
            n += 1
            ahead = started + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def _stats(url: str) -> dict[str, dict[str, int]]:
    with connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return {
            str(r["name"]): {"dead": int(str(r["dead"])), "updated": int(str(r["updated"])), "hot": int(str(r["hot"]))}
            for r in conn.execute(_STATS, (list(TABLES),))
        }


def run(clean: float, held: float, rate: float) -> list[dict[str, Any]]:
    """One relay, a writer, the horizon held from ``clean`` to ``clean + held`` s; a sample every 10 s."""
    env = make_env()
    samples: list[dict[str, Any]] = []
    try:
        env.start()
        url = env.fresh_database("leases")
        env.spawn_pin("relay", ["relay"], env.role_env(url, PIN_RELAY_HEARTBEAT_SECONDS="1"))
        stop = threading.Event()
        writer = threading.Thread(target=_writer, args=(url, rate, stop), daemon=True)
        writer.start()
        holder = psycopg.connect(url)
        started = time.monotonic()
        held_from: float | None = None
        while (elapsed := time.monotonic() - started) < clean + held:
            if held_from is None and elapsed >= clean:
                holder.execute("SELECT txid_current()")  # BEGIN; SELECT txid_current(); held
                held_from = elapsed
            sample = {"t": round(elapsed), "held": held_from is not None, "tables": _stats(url)}
            samples.append(sample)
            print(json.dumps(sample), flush=True)
            time.sleep(10.0)
        samples.append({"t": round(time.monotonic() - started), "held": True, "tables": _stats(url)})
        print(json.dumps(samples[-1]), flush=True)
        stop.set()
        holder.close()
        writer.join(timeout=5)
    finally:
        env.close()
    return samples


def main() -> None:
    """Run and print one JSON line per sample."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", type=float, default=10.0)
    parser.add_argument("--held", type=float, default=120.0)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    run(args.clean, args.held, args.rate)


if __name__ == "__main__":
    main()
