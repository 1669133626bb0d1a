"""Consumers: N messages through each group's real runtime (dedup in the inbox + the handler's effect + offset
commit per message) vs a bare consume-and-commit loop on the same topic, and vs the same statements for the same
batches sent by a bare psycopg loop (``bench.consume_proc same``, on a fresh database of its own).

Each group reads a topic of its own (``pin.bench.<run>.consume-<group>``, 3 partitions) holding N copies of a
real message of the topic it reads in production: appointment-cancelled (Reason Expired: two notifications) for
crm and notifications, purchase-changed (1 to 3 targets) for catalog and news. The runtime's rate is taken
from its inbox (first to last ``processed_at``, the start of each transaction: the messages of the last
transaction are not counted), so the group join is not counted; the bare loops time
themselves from their first message.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench import kafka as bare
from bench.env import BenchEnv
from bench.seed import MessageFactory
from pin.db import connect
from pin.messaging import topics

SOURCE = {
    "crm": topics.APPOINTMENT_CANCELLED,
    "notifications": topics.APPOINTMENT_CANCELLED,
    "catalog": topics.PURCHASE_CHANGED,
    "news": topics.PURCHASE_CHANGED,
}


def _bare_loop(env: BenchEnv, url: str, group: str, topic: str, *, count: int, mode: str) -> dict[str, Any]:
    out = env.work_dir / f"bare-{group}-{mode}.json"
    role = env.spawn(
        f"bare-{group}-{mode}",
        [sys.executable, "-m", "bench.consume_proc", "bare", f"bench-{env.run_id}-bare-{mode}-{group}", topic,
         str(count), mode, str(out)],
        env.role_env(url),
    )  # fmt: skip
    code = role.process.wait(timeout=1800)
    env.roles.remove(role)
    if code != 0:
        raise RuntimeError(f"bench: the bare consumer ({mode}) of {group} failed; see {role.log_path}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _same_statements(env: BenchEnv, group: str, mapping: str, count: int) -> dict[str, Any]:
    """The group's statements for the same batches, no runtime around them, on a fresh database of its own."""
    url = env.fresh_database(f"consumers_same_{group}")
    out = env.work_dir / f"same-{group}.json"
    role = env.spawn(
        f"same-{group}",
        [sys.executable, "-m", "bench.consume_proc", "same", group, f"bench-{env.run_id}-same-{group}", mapping,
         str(count), str(out)],
        env.role_env(url),
    )  # fmt: skip
    try:
        code = role.process.wait(timeout=1800)
        env.roles.remove(role)
    finally:
        env.drop_database(url)
    if code != 0:
        raise RuntimeError(f"bench: the same-statements loop of {group} failed; see {role.log_path}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_group(env: BenchEnv, url: str, factory: MessageFactory, group: str, count: int) -> dict[str, Any]:
    """One group: produce, bare loops, then the runtime."""
    topic = env.topic(f"consume-{group}")
    bare.create_topics(env.kafka_bootstrap, [topic])
    source = SOURCE[group]
    messages = [factory.make(source, n, topic=topic) for n in range(count)]
    bare.produce_all(
        env.kafka_bootstrap,
        [(topic, m["message_key"].encode(), factory.kafka_value(m), factory.kafka_headers(m)) for m in messages],
    )
    del messages
    each = _bare_loop(env, url, group, topic, count=count, mode="each")
    batch = _bare_loop(env, url, group, topic, count=count, mode="batch")
    same = _same_statements(env, group, f"{topic}={source}", count)
    measured = _runtime_rate(env, url, group, f"bench-{env.run_id}-{group}", mapping=f"{topic}={source}", count=count)
    return {
        "group": group,
        "source_topic": source,
        "count": count,
        **measured,
        "bare_each": each,
        "bare_batch": batch,
        "same_statements": same,
    }


def _runtime_rate(
    env: BenchEnv, url: str, group: str, kafka_group: str, *, mapping: str, count: int, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The group's runtime (``extra``: its lanes and wait, see bench.consume_proc) until ``count`` messages are in
    its inbox; its rate from the inbox's times."""
    role = env.spawn(
        f"consume-{group}-{kafka_group}",
        [sys.executable, "-m", "bench.consume_proc", "runtime", group, kafka_group, mapping, *extra],
        env.role_env(url),
    )
    try:
        wall0 = time.monotonic()
        with connect(url, autocommit=True) as conn:
            while True:
                row = conn.execute(
                    "SELECT count(*) AS n, min(processed_at) AS first, max(processed_at) AS last "
                    "FROM messaging.inbox WHERE consumer_group = %s",
                    (group,),
                ).fetchone()
                assert row is not None
                if row["n"] >= count:
                    break
                if role.process.poll() is not None:
                    raise RuntimeError(f"bench: the {group} consumer exited; see {role.log_path}")
                if time.monotonic() - wall0 > 1800:
                    raise RuntimeError(f"bench: the {group} consumer did not finish in 30 minutes")
                time.sleep(0.5)
    finally:
        env.stop_roles([role])
    with connect(url, autocommit=True) as conn:
        # processed_at is the start of the transaction (now()): from the first transaction's start to the last
        # one's, every message but the last transaction's was handled (one message per transaction: n - 1)
        tail = conn.execute(
            "SELECT count(*) AS n FROM messaging.inbox WHERE consumer_group = %s AND processed_at = %s",
            (group, row["last"]),
        ).fetchone()
    assert tail is not None
    seconds = (row["last"] - row["first"]).total_seconds()
    rate = (row["n"] - tail["n"]) / seconds if seconds > 0 else 0.0
    return {"seconds": seconds, "messages_per_second": rate}


# The I/O-bound group: notifications whose delivery port waits this long per message (bench only), at these lanes.
IO_WAIT_MS = 5.0
IO_LANES = (1, 8)


def run_io_wait(env: BenchEnv, factory: MessageFactory, count: int) -> dict[str, Any]:
    """notifications with a delivery port that waits :data:`IO_WAIT_MS` per message, at each of :data:`IO_LANES`
    lanes in turn, on the same 3-partition topic (each run a fresh database and a consumer group id of its own)."""
    topic = env.topic("consume-io-wait")
    bare.create_topics(env.kafka_bootstrap, [topic])
    source = SOURCE["notifications"]
    messages = [factory.make(source, n, topic=topic) for n in range(count)]
    bare.produce_all(
        env.kafka_bootstrap,
        [(topic, m["message_key"].encode(), factory.kafka_value(m), factory.kafka_headers(m)) for m in messages],
    )
    del messages
    runs: dict[str, Any] = {"count": count, "wait_ms": IO_WAIT_MS}
    for lanes in IO_LANES:
        url = env.fresh_database(f"consumers_io_{lanes}")
        try:
            runs[f"lanes_{lanes}"] = _runtime_rate(
                env, url, "notifications", f"bench-{env.run_id}-io-{lanes}", mapping=f"{topic}={source}",
                count=count, extra=(str(lanes), str(IO_WAIT_MS)),
            )  # fmt: skip
        finally:
            env.drop_database(url)
    return runs


def run(env: BenchEnv, factory: MessageFactory, count: int, groups: list[str]) -> dict[str, dict[str, Any]]:
    """Every group in turn, on one fresh database and a fresh broker."""
    env.restart_broker()
    url = env.fresh_database("consumers")
    try:
        return {group: run_group(env, url, factory, group, count) for group in groups}
    finally:
        env.drop_database(url)


def profile(env: BenchEnv, factory: MessageFactory, group: str, count: int) -> dict[str, Any]:
    """cProfile of one group's runtime over ``count`` messages (fresh database; the join is in the wall time)."""
    topic = env.topic(f"prof-{group}")
    bare.create_topics(env.kafka_bootstrap, [topic])
    source = SOURCE[group]
    messages = [factory.make(source, n, topic=topic) for n in range(count)]
    bare.produce_all(
        env.kafka_bootstrap,
        [(topic, m["message_key"].encode(), factory.kafka_value(m), factory.kafka_headers(m)) for m in messages],
    )
    url = env.fresh_database("profile_consumer")
    out = env.work_dir / f"consumer-{group}-profile.json"
    argv = [sys.executable, "-m", "bench.profile_worker", "consumer", str(out), group,
            f"bench-{env.run_id}-prof-{group}", f"{topic}={source}", str(count)]  # fmt: skip
    role = env.spawn(f"profile-consume-{group}", argv, env.role_env(url))
    code = role.process.wait(timeout=1800)
    env.roles.remove(role)
    env.drop_database(url)
    if code != 0:
        raise RuntimeError(f"bench: the profiled {group} consumer failed; see {role.log_path}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result
