"""A prototype, not used by the workers: psycopg's pipeline mode putting an item's commit and the next claim in one
round trip (issue 38, point 1). `python -m bench.pipeline_claim [--url URL] [--items N] [--rounds R]`.

One item per transaction, as appointment-timeout does it: a claim (``FOR UPDATE SKIP LOCKED LIMIT 1`` on a partial
index of due rows, the row returned), one write statement (the guarded UPDATE and the outbox row in one CTE, as the
worker's), the commit. Three ways of sending it, on one connection, over ``--items`` due rows each:

- ``sequential``: what psycopg does today outside a pipeline: BEGIN, the claim, the write, COMMIT, each its own
  round trip (4 per item; psycopg sends BEGIN on its own before the first statement of a transaction);
- ``begin+claim``: BEGIN queued with the claim in one pipeline sync, then the write and COMMIT in another (2);
- ``commit+next claim``: the write, COMMIT, BEGIN and the *next* item's claim in one sync (1 per item): the next
  claim runs in its own transaction after the commit, so what it sees is what it would have seen one round trip
  later. On an error in the write, the pipeline aborts what follows it up to the sync: the COMMIT does not run
  (the item is rolled back, as today) and the claim must be sent again.

The connection is in autocommit mode so that BEGIN and COMMIT are plain statements the pipeline can queue (psycopg's
own ``commit()`` in a pipeline ends with a sync of its own). The tables are the prototype's own (``public.proto_*``)
in a database created for the run and dropped after. Prints items/s and the client's CPU per item for each way, in
rounds that alternate the order, and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

SCHEMA = """
CREATE TABLE public.proto_item (
    id uuid PRIMARY KEY, tenant_id uuid NOT NULL, due timestamptz NOT NULL, status text NOT NULL,
    slot_id uuid NOT NULL, agent uuid NOT NULL, investor uuid NOT NULL
);
CREATE INDEX proto_item_due ON public.proto_item (due, id) WHERE status = 'Pending';
CREATE TABLE public.proto_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, message_id uuid NOT NULL, topic text NOT NULL,
    message_key text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
SEED = """
INSERT INTO public.proto_item
SELECT gen_random_uuid(), gen_random_uuid(), now() - interval '1 hour' + g * interval '1 microsecond', 'Pending',
       gen_random_uuid(), gen_random_uuid(), gen_random_uuid()
  FROM generate_series(1, %s) AS g
"""
CLAIM = """
SELECT id, tenant_id, slot_id, agent, investor, due FROM public.proto_item
 WHERE status = 'Pending' AND due <= now() ORDER BY due, id FOR UPDATE SKIP LOCKED LIMIT 1
"""
WRITE = """
WITH u AS (UPDATE public.proto_item SET status = 'Expired' WHERE id = %(id)s AND status = 'Pending' RETURNING id)
INSERT INTO public.proto_outbox (message_id, topic, message_key, payload)
SELECT m.mid, m.topic, u.id::text, m.payload FROM u,
       (VALUES (%(m1)s::uuid, 'appointment-cancelled', %(p1)s::jsonb),
               (%(m2)s::uuid, 'event-status-changed', %(p2)s::jsonb)) AS m (mid, topic, payload)
"""

Row = tuple[Any, ...]


def _params(row: Row) -> dict[str, Any]:
    payload = f'{{"AppointmentId": "{row[0]}", "TenantId": "{row[1]}", "Reason": "Expired"}}'
    return {"id": row[0], "m1": uuid.uuid4(), "m2": uuid.uuid4(), "p1": payload, "p2": payload}


def sequential(conn: psycopg.Connection[Row]) -> int:
    """4 round trips per item."""
    done = 0
    while True:
        conn.execute("BEGIN")
        row = conn.execute(CLAIM, prepare=True).fetchone()
        if row is None:
            conn.execute("COMMIT")
            return done
        conn.execute(WRITE, _params(row), prepare=True)
        conn.execute("COMMIT")
        done += 1


def begin_with_claim(conn: psycopg.Connection[Row]) -> int:
    """2 round trips per item: [BEGIN, claim], [write, COMMIT]."""
    done = 0
    with conn.pipeline() as pipe:
        while True:
            conn.execute("BEGIN")
            cur = conn.execute(CLAIM, prepare=True)
            pipe.sync()
            row = cur.fetchone()
            if row is None:
                conn.execute("COMMIT")
                pipe.sync()
                return done
            conn.execute(WRITE, _params(row), prepare=True)
            conn.execute("COMMIT")
            pipe.sync()
            done += 1


def commit_with_next_claim(conn: psycopg.Connection[Row]) -> int:
    """1 round trip per item: [write, COMMIT, BEGIN, next claim]."""
    done = 0
    with conn.pipeline() as pipe:
        conn.execute("BEGIN")
        cur = conn.execute(CLAIM, prepare=True)
        pipe.sync()
        row = cur.fetchone()
        while row is not None:
            conn.execute(WRITE, _params(row), prepare=True)
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            cur = conn.execute(CLAIM, prepare=True)
            pipe.sync()
            row = cur.fetchone()
            done += 1
        conn.execute("COMMIT")
        pipe.sync()
    return done


WAYS: dict[str, Callable[[psycopg.Connection[Row]], int]] = {
    "sequential": sequential,
    "begin+claim": begin_with_claim,
    "commit+next claim": commit_with_next_claim,
}


def _reseed(url: str, items: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE public.proto_item, public.proto_outbox")
        conn.execute(SEED, (items,))
        conn.execute("VACUUM ANALYZE public.proto_item")


def _one(url: str, way: str, items: int) -> tuple[float, float]:
    """(items/s, client CPU µs per item) of one way over ``items`` due rows."""
    _reseed(url, items)
    with psycopg.connect(url, autocommit=True) as conn:
        cpu, wall = time.process_time(), time.perf_counter()
        done = WAYS[way](conn)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        left = conn.execute("SELECT count(*) FROM public.proto_item WHERE status = 'Pending'").fetchone()
        written = conn.execute("SELECT count(*) FROM public.proto_outbox").fetchone()
    if done != items or left != (0,) or written != (2 * items,):
        raise RuntimeError(f"{way}: {done} of {items} items, {left} left, {written} outbox rows")
    return items / wall, cpu / items * 1e6


def run(url: str, items: int, rounds: int) -> dict[str, dict[str, Any]]:
    """Every way ``rounds`` times, alternating the order; the median of each."""
    rates: dict[str, list[float]] = {way: [] for way in WAYS}
    cpus: dict[str, list[float]] = {way: [] for way in WAYS}
    order = list(WAYS)
    for r in range(rounds):
        for way in order if r % 2 == 0 else reversed(order):
            rate, cpu = _one(url, way, items)
            rates[way].append(rate)
            cpus[way].append(cpu)
    base = statistics.median(rates["sequential"])
    return {
        way: {
            "items_per_second": round(statistics.median(rates[way]), 1),
            "spread": [round(min(rates[way]), 1), round(max(rates[way]), 1)],
            "client_cpu_us_per_item": round(statistics.median(cpus[way]), 1),
            "vs_sequential": round(statistics.median(rates[way]) / base, 3),
        }
        for way in WAYS
    }


def main(argv: list[str] | None = None) -> int:
    """Create the prototype's database, measure, drop it."""
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_claim", description=__doc__)
    parser.add_argument("--url", default="", help="a server's URL (default: an embedded PostgreSQL of this run)")
    parser.add_argument("--items", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from bench.env import _url_with_database, make_env

    env = make_env()
    server = args.url
    embedded = None
    if not server:
        from pin.local.embedded.postgres import EmbeddedPostgres

        embedded = EmbeddedPostgres(env.work_dir / "postgres")
        embedded.start()
        server = embedded.url
    name = f"pin_bench_pipeline_{env.run_id}"
    try:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
            settings = {s: admin.execute(f"SHOW {s}").fetchone()[0] for s in ("fsync", "synchronous_commit")}  # type: ignore[index]
        url = _url_with_database(server, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA)
        load = os.getloadavg()[0]
        result = run(url, args.items, args.rounds)
        print(f"pipeline_claim: {'embedded' if embedded else args.url} {settings}, {args.items:,} items, "
              f"{args.rounds} rounds, load {load:.2f} -> {os.getloadavg()[0]:.2f}")  # fmt: skip
        for way, figures in result.items():
            print(f"  {way:18} {figures}")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if embedded is not None:
            embedded.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
