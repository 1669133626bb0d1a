"""Kafka client configuration and topic administration (confluent-kafka / librdkafka)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from pin.messaging.topics import PARTITIONS, all_topics
from pin.settings import Settings


def client_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """Base librdkafka settings: bootstrap servers plus PIN_KAFKA_CLIENT_CONFIG (SASL, TLS) passed through."""
    config: dict[str, Any] = {"bootstrap.servers": settings.require_kafka()}
    config.update(settings.kafka_extra_config())
    config.update(overrides)
    return config


def producer_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """A producer that never reorders or duplicates on its own retries and partitions like Java clients."""
    return client_config(
        settings,
        **{
            "enable.idempotence": True,
            "acks": "all",
            # murmur2 as Java clients and Kafka Connect: a key lands on the same partition whoever produces it.
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "compression.type": "none",
            **overrides,
        },
    )


def consumer_config(settings: Settings, group: str, **overrides: Any) -> dict[str, Any]:
    """A consumer of a group that commits offsets only when told to."""
    return client_config(
        settings,
        **{
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": settings.kafka_session_timeout_ms,
            "heartbeat.interval.ms": max(500, settings.kafka_session_timeout_ms // 5),
            **overrides,
        },
    )


def ensure_topics(settings: Settings, topics: Iterable[str] | None = None, timeout: float = 15.0) -> list[str]:
    """Create missing topics with SPEC's partition count; returns the names it created."""
    admin = AdminClient(client_config(settings))
    wanted = list(topics) if topics is not None else list(all_topics())
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in wanted], request_timeout=timeout)
    created: list[str] = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        else:
            created.append(name)
    return created
