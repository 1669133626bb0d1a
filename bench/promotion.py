"""expire-promotions: drain throughput of one worker vs pgbench on the statements of one batch.

Drain: N due Active purchases with 1 to 3 targets; ``pin worker expire-promotions`` (BatchSize 200) starts
blocked behind a bench lock on promotion.purchase, which is released at T0; the drain time runs from T0 to the
last batch's commit (its outbox rows' ``created_at``).

Baseline: pgbench, ``-M prepared``, one client, each transaction one captured cycle of the real worker (claim,
then whatever the worker sent: today one savepoint around the set-based guarded UPDATE of the batch with its 200
outbox rows in the same statement, failure bookkeeping, commit, the cycle record). The claim's rows are not fetched
by pgbench: a helper statement computes the next batch's purchase ids from the seed's id scheme (the claim returns
exactly those, oldest first), new message ids, and gathers the captured payloads into the one array parameter
psycopg sends (one ``-D`` constant each; all 200 in one would exceed the kernel's limit on one argument).
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any

import psycopg

from bench import seed, trace
from bench.env import BenchEnv, Role
from bench.pgbench import run_pgbench
from bench.timeout import Script, _wait_blocked, table_stats
from pin.db import connect, database_now

BATCH = 200
HOT_TABLES = ("promotion.purchase", "promotion.purchase_target", "outbox.message")


def capture(env: BenchEnv) -> tuple[list[trace.Statement], dict[str, dict[str, Any]]]:
    """One full cycle (BatchSize 200) of ExpirePromotionsJob on a recording pool; and the outbox templates."""
    from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob

    url = env.fresh_database("capture_promotion")
    with connect(url, autocommit=True) as conn:
        now = database_now(conn)
        seed.seed_purchases(conn, BATCH, due=now - timedelta(seconds=10), step=timedelta(milliseconds=1), tag="p")
    pool = trace.recording_pool(url)
    try:
        trace.TRACE.clear()
        result = ExpirePromotionsJob(pool, ExpirePromotionsConfig(batch_size=BATCH)).run_once()
        statements = list(trace.TRACE)
        trace.TRACE.clear()
    finally:
        pool.close()
    if result.expired_count != BATCH:
        raise RuntimeError(f"bench: the capture cycle expired {result.expired_count} of {BATCH} purchases")
    with connect(url, autocommit=True) as conn:
        templates = seed.outbox_templates(conn)
    env.drop_database(url)
    return statements, templates


def batch_script(statements: list[trace.Statement]) -> Script:
    """The pgbench script of one batch."""
    claim = next(s for s in statements if "WITH claimed AS MATERIALIZED" in s.sql)
    as_of = claim.params["as_of"]
    known = {seed.purchase_id("p", k + 1): f"h_p{k}" for k in range(BATCH)}
    instance = next(
        (s.params[1] for s in statements if s.text.startswith("INSERT INTO jobs.cycle") and isinstance(s.params, list)),
        None,
    )
    if instance is not None:
        known[str(instance)] = "client_id"
    # The backlog gauge after the cycle counts the due purchases (at most BACKLOG_CAP) at the database's time then:
    # the baseline's count runs at its own AsOf, which is past every seeded deadline, so that it counts what the
    # worker's counts (the remaining due purchases), not none (a constant of the capture's time is before them all).
    counts = (s for s in statements if s.text.startswith("SELECT count(*)") and "promotion.purchase" in s.sql)
    backlog = next(counts, None)
    if backlog is not None and isinstance(backlog.params, dict):
        known[str(backlog.params["as_of"])] = "as_of"
    # psycopg sends a list as one array parameter, and so does pgbench: the batch's ids in claim order, the new
    # message ids and the outbox payloads are each one variable the helper fills. (The payloads are one -D constant
    # each, gathered into an array by the helper: one -D string of them all would exceed the kernel's 128 KiB limit
    # on one argument.)
    batch_ids = tuple(seed.purchase_id("p", k + 1) for k in range(BATCH))
    binder = trace.Binder(known=known, as_of=as_of, known_lists={batch_ids: ":h_ids::uuid[]"})
    extra_columns: list[str] = []
    write = next((s for s in statements if s.kind == "execute" and "INSERT INTO outbox.message" in s.sql), None)
    if write is not None and isinstance(write.params, dict):
        message_ids = write.params["outbox_message_id"]
        binder.known_lists[tuple(str(m) for m in message_ids)] = ":h_mids::uuid[]"
        extra_columns.append(
            f"(SELECT array_agg(gen_random_uuid()) FROM generate_series(1, {len(message_ids)}))::text AS mids"
        )
        payloads = write.params["outbox_payload"]
        binder.known_lists[tuple(payloads)] = ":h_payloads::text[]"
        extra_columns.append(
            "ARRAY[" + ", ".join(f":{binder.constant(p)}" for p in payloads) + "]::text[]::text AS payloads"
        )
    body = [
        trace.pgbench_command(s, binder)
        for s in statements
        if not s.text.upper().startswith("DEALLOCATE")  # see bench.timeout.item_script
    ]
    # chr(58) is ':' (pgbench would read ':pur' inside a literal as a variable)
    one_id = "md5('p' || chr(58) || 'pur' || chr(58) || ({n}))::uuid"
    columns = [
        f"{one_id.format(n=f'base + {k + 1}')} AS p{k}"
        for k in range(BATCH)
        if re.search(rf":h_p{k}\b", "\n".join(body))
    ]
    if any(":h_ids::" in line for line in body):
        columns.append(
            f"(SELECT array_agg({one_id.format(n='k')} ORDER BY k) FROM generate_series(base + 1, base + {BATCH}) AS k)"
            "::text AS ids"
        )
    columns += extra_columns
    columns += [f"gen_random_uuid() AS m{k}" for k in range(len(binder.fresh_uuids))]
    helper = (
        f"WITH b AS (SELECT (nextval('public.bench_batch') - 1) * {BATCH} AS base) SELECT {', '.join(columns)} FROM b "
        "\\gset h_"
    )
    text = "-- generated by bench/promotion.py from a recorded cycle of ExpirePromotionsJob; do not edit\n"
    text += helper + "\n" + "\n".join(body) + "\n"
    constants = dict(binder.constants)
    # later than every seeded deadline, whenever the baseline runs (all its items are due, like the drain's)
    constants["as_of"] = (as_of + timedelta(days=1)).isoformat()
    per_batch = [s.text for s in statements]
    return Script(text, constants, per_batch, [])


def _seed_due(url: str, count: int) -> None:
    with connect(url, autocommit=True) as conn:
        now = database_now(conn)
        step = timedelta(microseconds=1)
        seed.seed_purchases(conn, count, due=now - timedelta(seconds=5) - count * step, step=step, tag="p")
        conn.execute("VACUUM ANALYZE promotion.purchase, promotion.purchase_target")
        conn.execute("CREATE SEQUENCE public.bench_batch")


def worker_drain(env: BenchEnv, count: int, *, label: str) -> dict[str, Any]:
    """Drain ``count`` due purchases with one `pin worker expire-promotions` process."""
    url = env.fresh_database(label)
    _seed_due(url, count)
    holder = psycopg.connect(url)
    holder.execute("LOCK TABLE promotion.purchase IN ACCESS EXCLUSIVE MODE")
    roles: list[Role] = [env.spawn_pin(f"{label}-worker", ["worker", "expire-promotions"], env.role_env(url))]
    try:
        _wait_blocked(env, url, 1)
        row = holder.execute("SELECT clock_timestamp() AS t0").fetchone()
        assert row is not None
        t0 = row[0]
        holder.commit()
        holder.close()
        wall0 = time.monotonic()
        with connect(url, autocommit=True) as conn:
            while True:
                left = conn.execute("SELECT count(*) AS n FROM promotion.purchase WHERE status = 'Active'").fetchone()
                assert left is not None
                if left["n"] == 0:
                    break
                if roles[0].process.poll() is not None:
                    raise RuntimeError(f"bench: the worker exited during the drain; see {roles[0].log_path}")
                if time.monotonic() - wall0 > 1800:
                    raise RuntimeError("bench: the promotion drain did not finish in 30 minutes")
                time.sleep(0.25)
            last = conn.execute("SELECT max(created_at) AS last, count(*) AS n FROM outbox.message").fetchone()
            assert last is not None
    finally:
        env.stop_roles(roles)
    time.sleep(1.0)
    stats = table_stats(url, HOT_TABLES)
    env.drop_database(url)
    seconds = (last["last"] - t0).total_seconds()
    return {"count": count, "seconds": seconds, "items_per_second": last["n"] / seconds, "table_stats": stats}


def pgbench_drain(env: BenchEnv, script: Script, count: int, *, label: str) -> dict[str, Any]:
    """The baseline: ``count / 200`` pgbench transactions, one per batch, one client."""
    url = env.fresh_database(label)
    _seed_due(url, count)
    path = env.work_dir / f"{label}.sql"
    path.write_text(script.text)
    result = run_pgbench(
        env.pgbench_path(),
        url,
        path,
        clients=1,
        transactions_per_client=count // BATCH,
        constants=script.constants,
        log_path=env.work_dir / f"{label}.log",
    )
    with connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) AS n FROM promotion.purchase WHERE status = 'Expired'").fetchone()
    assert row is not None
    if row["n"] != count:
        raise RuntimeError(f"bench: pgbench expired {row['n']} of {count} purchases; see {path}")
    stats = table_stats(url, HOT_TABLES)
    env.drop_database(url)
    return {
        "count": count,
        "items_per_second": result.tps * BATCH,
        "batch_latency_ms": result.latency_ms,
        "table_stats": stats,
    }
