"""Kafka client configuration and topic administration (confluent-kafka / librdkafka)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from pin.messaging.topics import all_topics
from pin.observability.logging import RepeatFilter
from pin.settings import Settings

# librdkafka's own lines (connection failures, rebalances, broker errors) go through this logger, so they are
# rendered and redacted like every other line instead of raw on stderr; a client hands them over on poll().
CLIENT_LOGGER = logging.getLogger("pin.kafka.client")
CLIENT_LOGGER.addFilter(RepeatFilter())


def client_config(settings: Settings, **overrides: Any) -> dict[str, Any]:
    """Base librdkafka settings: bootstrap servers, our logger, PIN_KAFKA_CLIENT_CONFIG (SASL, TLS) passed through."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.kafka.require_bootstrap_servers(),
        "logger": CLIENT_LOGGER,
        # a broker behind a link that drops packets: every wait on it is bounded, the dead socket noticed
        "socket.timeout.ms": settings.kafka.socket_timeout_ms,
        "socket.keepalive.enable": True,
    }
    config.update(settings.kafka.extra_config())
    config.update(overrides)
    return config


def silent_client_logger(name: str) -> logging.Logger:
    """A logger for librdkafka's own lines (its ``logger`` setting) that drops them.

    For one-shot commands that report a broker failure themselves, in one line: without it librdkafka writes
    a connection failure to stderr on every reconnect attempt.
    """
    logger = logging.getLogger(name)
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


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
            "request.timeout.ms": settings.kafka.request_timeout_ms,
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
            "session.timeout.ms": settings.kafka.session_timeout_ms,
            "heartbeat.interval.ms": max(500, settings.kafka.session_timeout_ms // 5),
            # a member stuck (on a dead database, say) leaves the group after this instead of holding its rebalance
            "max.poll.interval.ms": max(settings.kafka.max_poll_interval_ms, settings.kafka.session_timeout_ms),
            # a rebalance moves only the partitions that change owner; the others keep being consumed meanwhile
            "partition.assignment.strategy": "cooperative-sticky",
            # the consumer-only fetch wait: set here, not in client_config, so producers and admin clients never see it
            "fetch.wait.max.ms": settings.kafka.consumer_fetch_wait_max_ms,
            **overrides,
        },
    )


def ensure_topics(settings: Settings, topics: Iterable[str] | None = None, timeout: float = 15.0) -> list[str]:
    """Create missing topics with PIN_KAFKA_TOPIC_PARTITIONS partitions; returns the names it created.

    A topic that exists keeps its partitions: adding some moves keys to other partitions (docs/operations.md)."""
    admin = AdminClient(client_config(settings))
    wanted = list(topics) if topics is not None else list(all_topics())
    futures = admin.create_topics(
        [NewTopic(name, settings.kafka.topic_partitions, 1) for name in wanted], request_timeout=timeout
    )
    created: list[str] = []
    try:
        for name, future in futures.items():
            try:
                future.result(timeout=timeout)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            else:
                created.append(name)
    finally:
        admin.poll(0)  # hands librdkafka's lines (why the broker did not answer) to the logger
    return created


def missing_topics(settings: Settings, topics: Iterable[str], timeout: float = 10.0) -> list[str]:
    """The ``topics`` the broker does not have, by one Metadata request for all topics (never one that names
    them, which a broker with ``auto.create.topics.enable`` would answer by creating them its own way).

    Kafka lists only the topics the principal may DESCRIBE, which READ and WRITE imply: a topic this role may
    not use counts as missing.
    """
    admin = AdminClient(client_config(settings))
    try:
        present = admin.list_topics(timeout=timeout).topics
    finally:
        admin.poll(0)  # hands librdkafka's lines (why the broker did not answer) to the logger
    return [name for name in topics if name not in present or present[name].error is not None]
