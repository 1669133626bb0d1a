"""Consumer processes of the consumer benchmark (`python -m bench.consume_proc ...`).

``runtime GROUP KAFKA_GROUP_ID BENCH_TOPIC=REAL_TOPIC[,...] [LANES [WAIT_MS]]``: the group's real runtime
(pin.messaging.consumer.ConsumerRuntime with the group's own handlers, built as pin.consumer_groups.build_runtime
builds it, in a process started like `pin consume`), reading the bench topic with the handler of the real topic,
under a consumer group id of the bench's own (a configured broker's real groups are never touched), with LANES
lanes (1 unless given) and its pool sized from them. WAIT_MS (notifications only, bench only): the delivery port
waits that long per message before it stores the batch's notifications, as a provider's call would (I/O, no CPU).
Runs until SIGTERM.

``bare KAFKA_GROUP_ID TOPIC COUNT each|batch OUT.json``: the baseline, a bare consume-and-commit loop with the
same consumer configuration: ``each`` commits every message's offset synchronously (the runtime's discipline:
offset after effect), ``batch`` commits asynchronously every 1,000 messages (the broker's ceiling). Writes its
rate (first message to the COUNT-th) to OUT.json and exits.

``same GROUP KAFKA_GROUP_ID BENCH_TOPIC=REAL_TOPIC COUNT OUT.json``: the baseline of the runtime's own work, the
same statements for the same batches with no runtime around them. First (untimed) it reads the topic once under a
throwaway group id and records, per message, the statements the group's handler sends for it alone (the handler run
on a recording connection; its reads answer "nothing stored", as on the bench's fresh database). Then a bare
consumer reads the topic again and, per poll (one message, then what is already fetched, up to the runtime's batch
size), per partition, sends in one transaction what the runtime sends for that batch: the inbox statement (its
answer read), then the handler's statements in one pipeline, each set-based statement once with its array
parameters concatenated over the batch's messages (exactly the statement the handler builds for the batch when
their keys differ, as the bench's do) and any other statement once per message; then commits the polled offsets
asynchronously, as the runtime does. Its rate is taken as the runtime's is (first transaction's start to the
last's, without the last's messages).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from psycopg import sql

from pin.consumer_groups import routes_of
from pin.db import Conn, create_pool
from pin.local.state_folder import load_settings
from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime, HandlingContext, Route
from pin.messaging.consumer.inbox import INBOX_INSERT
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.runtime import pool_size
from pin.messaging.envelope import Decoded, decode_message
from pin.messaging.kafka import consumer_config, producer_config
from pin.notifications.delivery import DatabaseDelivery, Delivered, Notification
from pin.notifications.handler import routes as notifications_routes
from pin.roles import start_role


class WaitingDelivery(DatabaseDelivery):
    """The database delivery after waiting ``wait`` seconds per message of the call (bench only: a provider's I/O)."""

    def __init__(self, wait: float) -> None:
        self._wait = wait

    def deliver(self, conn: Conn, notifications: Sequence[Notification]) -> Delivered:
        """Wait for each message's notifications, then store them all."""
        time.sleep(self._wait * len({notification.message_id for notification in notifications}))
        return super().deliver(conn, notifications)


def runtime(group: str, kafka_group: str, mapping: str, lanes: int = 1, wait_ms: float = 0.0) -> int:
    """The group's runtime on a bench topic."""
    if wait_ms:
        if group != "notifications":
            raise SystemExit("bench: WAIT_MS is the notifications delivery port's")
        routes = notifications_routes(WaitingDelivery(wait_ms / 1000))
    else:
        routes = routes_of(group)
    pairs = [item.partition("=") for item in mapping.split(",")]
    context = start_role(f"consume-{group}", metrics=False)
    settings = context.settings
    pool = create_pool(settings.database.require_url(), min_size=1, max_size=pool_size(lanes), name=f"consume-{group}")
    try:
        ConsumerRuntime(
            group=group,
            routes={bench_topic: routes[real_topic] for bench_topic, _, real_topic in pairs},
            pool=pool,
            consumer_config=consumer_config(settings, kafka_group, **{"client.id": f"pin-consume-{group}"}),
            producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
            config=ConsumerConfig(lanes=lanes),
        ).run(context.stop)
    finally:
        pool.close()
    return 0


def bare(kafka_group: str, topic: str, count: int, mode: str, out: Path) -> int:
    """Consume ``count`` messages and commit (each synchronously, or every 1,000 asynchronously)."""
    settings = load_settings()
    consumer = Consumer(consumer_config(settings, kafka_group))
    consumer.subscribe([topic])
    seen = 0
    first = last = 0.0
    deadline = time.monotonic() + 1800
    try:
        while seen < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    print(f"consumer error: {error}", file=sys.stderr)
                continue
            if seen == 0:
                first = time.perf_counter()
            seen += 1
            if mode == "each":
                consumer.commit(message=message, asynchronous=False)
            elif seen % 1000 == 0 or seen == count:
                consumer.commit(message=message, asynchronous=True)
            last = time.perf_counter()
    finally:
        consumer.close()
    seconds = last - first
    rate = (seen - 1) / seconds if seen > 1 and seconds > 0 else 0.0
    out.write_text(json.dumps({"messages": seen, "seconds": seconds, "messages_per_second": rate}))
    return 0 if seen == count else 1


# One statement as a handler sent it: its text, its parameters, and whether the handler read its answer.
Statement = tuple[str, tuple[Any, ...], bool]


class _Recorded:
    """What a recording connection's execute returns: no rows, and the note that the caller read them."""

    def __init__(self, log: list[list[Any]], index: int) -> None:
        self._log, self._index = log, index
        self.rowcount = 0

    def fetchall(self) -> list[Any]:
        self._log[self._index][2] = True
        return []

    def fetchone(self) -> None:
        self._log[self._index][2] = True


class _Recording:
    """Stands for the connection a handler writes through: records each statement instead of sending it."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn
        self.log: list[list[Any]] = []

    def execute(self, query: Any, params: Any = ()) -> _Recorded:
        text = query.as_string(self._conn) if isinstance(query, sql.Composable) else str(query)
        self.log.append([text, tuple(params), False])
        return _Recorded(self.log, len(self.log) - 1)

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[None]:
        yield


def record_one(conn: Conn, route: Route[Any], decoded: Decoded, *, group: str) -> list[Statement]:
    """The statements ``route``'s handler sends for one message alone (nothing is sent)."""
    recording = _Recording(conn)
    context = HandlingContext(group, decoded.message.topic, decoded.envelope.message_id)
    route.apply_many(recording, [(decoded.event, context)])  # type: ignore[arg-type]
    return [(text, params, fetched) for text, params, fetched in recording.log]


def send_batch(
    conn: Conn,
    group: str,
    messages: list[Received],
    ids: list[Any],
    per_message: list[list[Statement]],
    *,
    occurred_at: list[Any],
) -> None:
    """One partition's batch as the runtime sends it: the inbox rows, then the handler's statements in a pipeline."""
    statements = batch_statements(per_message)
    with conn.transaction():
        first = messages[0]
        conn.execute(
            INBOX_INSERT, (group, first.topic, first.partition, ids, [m.offset for m in messages], occurred_at)
        ).fetchall()
        with conn.pipeline():
            for text, params, fetched in statements:
                cursor = conn.execute(text.encode(), params)
                if fetched:
                    cursor.fetchall()


def _record(group: str, real_topic: str, *, kafka_group: str, topic: str, count: int, conn: Conn) -> dict[Any, Any]:
    """Per (partition, offset): the message's MessageId and the statements its handler sends for it alone."""
    route = routes_of(group)[real_topic]
    consumer = Consumer(consumer_config(load_settings(), kafka_group))
    consumer.subscribe([topic])
    recorded: dict[tuple[int, int], tuple[Any, list[Statement]]] = {}
    deadline = time.monotonic() + 600
    try:
        while len(recorded) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            decoded = decode_message(Received.of(message), route, 1 << 30)
            statements = record_one(conn, route, decoded, group=group)
            recorded[message.partition(), message.offset()] = (
                decoded.envelope.message_id,
                decoded.envelope.occurred_at,
                statements,
            )
    finally:
        consumer.close()
    return recorded


def batch_statements(per_message: list[list[Statement]]) -> list[Statement]:
    """The batch's statements: a set-based one (every parameter a list) once, its lists concatenated; others each."""
    merged: dict[str, list[Any]] = {}
    out: list[Any] = []
    for statements in per_message:
        for text, params, fetched in statements:
            if params and all(isinstance(p, list) for p in params):
                if text not in merged:
                    merged[text] = [text, tuple([] for _ in params), fetched]
                    out.append(merged[text])
                for column, values in zip(merged[text][1], params, strict=True):
                    column.extend(values)
            else:
                out.append([text, params, fetched])
    return [(text, params, fetched) for text, params, fetched in out]


def same(group: str, kafka_group: str, mapping: str, count: int, out: Path) -> int:
    """The same statements for the same batches as the runtime, with no runtime around them."""
    topic, _, real_topic = mapping.partition("=")
    settings = load_settings()
    pool = create_pool(settings.database.require_url(), min_size=1, max_size=2, name=f"same-{group}")
    with pool.connection() as conn:
        recorded = _record(group, real_topic, kafka_group=f"{kafka_group}-record", topic=topic, count=count, conn=conn)
    batch_size = ConsumerConfig().batch_size  # the runtime's batch
    consumer = Consumer(consumer_config(settings, kafka_group))
    consumer.subscribe([topic])
    starts: list[tuple[float, int]] = []  # each transaction's start and its messages
    seen = 0
    deadline = time.monotonic() + 1800
    try:
        while seen < count and time.monotonic() < deadline:
            first = consumer.poll(0.5)
            if first is None:
                continue
            polled = [first, *consumer.consume(num_messages=batch_size - 1, timeout=0)]
            by_partition: dict[int, list[Message]] = {}
            for message in polled:
                if message.error() is None:
                    by_partition.setdefault(message.partition(), []).append(message)
            offsets = []
            for partition, messages in by_partition.items():
                items = [recorded[partition, m.offset()] for m in messages]
                starts.append((time.perf_counter(), len(messages)))
                with pool.connection() as conn:
                    send_batch(conn, group, [Received.of(m) for m in messages], [i for i, _, _ in items],
                               [s for _, _, s in items], occurred_at=[o for _, o, _ in items])  # fmt: skip
                offsets.append(TopicPartition(topic, partition, messages[-1].offset() + 1))
                seen += len(messages)
            consumer.commit(offsets=offsets, asynchronous=True)
    finally:
        consumer.close()
        pool.close()
    seconds = starts[-1][0] - starts[0][0] if len(starts) > 1 else 0.0
    rate = (seen - starts[-1][1]) / seconds if seconds > 0 else 0.0
    out.write_text(json.dumps({"messages": seen, "seconds": seconds, "messages_per_second": rate,
                               "transactions": len(starts)}))  # fmt: skip
    return 0 if seen == count else 1


def main(argv: list[str]) -> int:
    """Dispatch on the first argument."""
    if argv[0] == "runtime":
        extra = argv[4:]
        return runtime(argv[1], argv[2], argv[3], *([int(extra[0])] if extra else []), *map(float, extra[1:2]))
    if argv[0] == "same":
        return same(argv[1], argv[2], argv[3], int(argv[4]), Path(argv[5]))
    return bare(argv[1], argv[2], int(argv[3]), argv[4], Path(argv[5]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
