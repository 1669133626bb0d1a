"""Bare confluent-kafka clients: the baselines of the relay and consumer benchmarks, and topic set-up."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, Producer

from bench.results import percentile
from pin.messaging.kafka import ensure_topics, producer_config
from pin.settings import Settings


def settings_for(bootstrap: str) -> Settings:
    """Settings with only the broker (the clients' configuration comes from pin.messaging.kafka)."""
    return Settings.model_validate({"kafka_bootstrap_servers": bootstrap, "kafka_session_timeout_ms": 6000})


def create_topics(bootstrap: str, topics: Sequence[str]) -> None:
    """Create topics with SPEC's 3 partitions (idempotent)."""
    ensure_topics(settings_for(bootstrap), list(topics), timeout=15.0)


def relay_like_producer(bootstrap: str) -> Producer:
    """A producer configured exactly as the relay's (idempotent, acks=all, murmur2, linger 5 ms)."""
    return Producer(producer_config(settings_for(bootstrap), **{"message.timeout.ms": 10_000, "client.id": "bench"}))


Message = tuple[str, bytes, bytes, list[tuple[str, bytes]]]  # topic, key, value, headers


def produce_all(bootstrap: str, messages: Sequence[Message]) -> dict[str, Any]:
    """Send every message as fast as the client allows, then flush; msgs/s from the first send to the last ack."""
    producer = relay_like_producer(bootstrap)
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    started = time.perf_counter()
    for topic, key, value, headers in messages:
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(60)
    seconds = time.perf_counter() - started
    if remaining or errors:
        raise RuntimeError(f"bench: bare producer: {remaining} unflushed, {len(errors)} errors ({errors[:1]})")
    return {"messages": len(messages), "seconds": seconds, "messages_per_second": len(messages) / seconds}


def produce_paced(bootstrap: str, messages: Sequence[Message], rate: float) -> dict[str, Any]:
    """Send at a steady ``rate``; latency = delivery report (broker ack) minus the send, per message."""
    producer = relay_like_producer(bootstrap)
    latencies: list[float] = []
    errors: list[KafkaError] = []
    # warm-up, as the relay is warm when measured: connections, metadata and the idempotent producer id
    for topic in sorted({m[0] for m in messages}):
        producer.produce(topic, value=b"{}", key=b"warm-up")
    producer.flush(30)
    started = time.perf_counter()
    for i, (topic, key, value, headers) in enumerate(messages):
        due = started + i / rate
        while True:
            wait = due - time.perf_counter()
            if wait <= 0:
                break
            producer.poll(min(wait, 0.002))
        sent = time.perf_counter()

        def on_delivery(err: KafkaError | None, _msg: object, sent: float = sent) -> None:
            if err is not None:
                errors.append(err)
            else:
                latencies.append(time.perf_counter() - sent)

        producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"bench: paced producer: {len(errors)} errors ({errors[:1]})")
    ms = [x * 1000 for x in latencies]
    return {
        "messages": len(messages),
        "rate": len(messages) / seconds,
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
        "latencies_ms": ms,
    }
