"""Consumer processes of the consumer benchmark (`python -m bench.consume_proc ...`).

``runtime GROUP KAFKA_GROUP_ID BENCH_TOPIC=REAL_TOPIC[,...]``: the group's real runtime (pin.messaging.consumer
.ConsumerRuntime with the group's own handlers, built as pin.messaging.groups.build_runtime builds it, in a process
started like `pin consume`), reading the bench topic with the handler of the real topic, under a consumer group
id of the bench's own (a configured broker's real groups are never touched). Runs until SIGTERM.

``bare KAFKA_GROUP_ID TOPIC COUNT each|batch OUT.json``: the baseline, a bare consume-and-commit loop with the
same consumer configuration: ``each`` commits every message's offset synchronously (the runtime's discipline:
offset after effect), ``batch`` commits asynchronously every 1,000 messages (the broker's ceiling). Writes its
rate (first message to the COUNT-th) to OUT.json and exits.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError

from pin.db import create_pool
from pin.messaging.consumer import ConsumerRuntime
from pin.messaging.groups import routes_of
from pin.messaging.kafka import consumer_config, producer_config
from pin.roles import start_role
from pin.settings import load_settings


def runtime(group: str, kafka_group: str, mapping: str) -> int:
    """The group's runtime on a bench topic."""
    routes = routes_of(group)
    pairs = [item.partition("=") for item in mapping.split(",")]
    context = start_role(f"consume-{group}", metrics=False)
    settings = context.settings
    pool = create_pool(settings.require_database_url(), min_size=1, max_size=2, name=f"consume-{group}")
    try:
        ConsumerRuntime(
            group=group,
            routes={bench_topic: routes[real_topic] for bench_topic, _, real_topic in pairs},
            pool=pool,
            consumer_config=consumer_config(settings, kafka_group, **{"client.id": f"pin-consume-{group}"}),
            producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
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


def main(argv: list[str]) -> int:
    """Dispatch on the first argument."""
    if argv[0] == "runtime":
        return runtime(argv[1], argv[2], argv[3])
    return bare(argv[1], argv[2], int(argv[3]), argv[4], Path(argv[5]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
