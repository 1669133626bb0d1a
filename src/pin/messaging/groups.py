"""The four consumer groups (SPEC section 7): which topics each reads, and a runtime built for one.

Part of the composition root (called by :func:`pin.bootstrap.run_consumer` and by tests); the contexts' handler
modules are imported lazily so that one group's process does not load the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime, Route
from pin.messaging.consumer.metrics import SLA
from pin.messaging.contracts import successions
from pin.messaging.kafka import consumer_config, producer_config
from pin.messaging.topics import CONSUMER_GROUPS, INTEGRATION_TOPICS, dead_letter_topic
from pin.operations.pauses import GROUP, PauseFlag
from pin.settings import ConfigurationError, ContractMigration, Settings

# group -> the module whose routes() says what the group reads
_HANDLERS = {
    "crm": "pin.crm.handler",
    "notifications": "pin.notifications.handler",
    "catalog": "pin.catalog.handler",
    "news": "pin.news.handler",
}
assert set(_HANDLERS) == set(CONSUMER_GROUPS)

# group -> its SLA in seconds (seed 003: crm < 1 min, notifications < 5 min; seed 002: catalog and news < 1 min):
# an event's effect commits within this long of its OccurredAt. Each runtime exports its group's value as
# pin_consumer_sla_seconds, which ConsumerSlaBreached compares the p99 of pin_consumer_event_age_seconds with;
# `pin status` compares the inbox's recent p99 with it; docs/specification.md's table is checked against it.
SLA_SECONDS = {"crm": 60.0, "notifications": 300.0, "catalog": 60.0, "news": 60.0}
assert set(SLA_SECONDS) == set(CONSUMER_GROUPS)
# The p99 is taken over this window: the alert's rate window, and what `pin status` calls recent.
SLA_WINDOW_SECONDS = 300


def routes_of(group: str, settings: Settings | None = None) -> dict[str, Route[Any]]:
    """The topics ``group``'s code reads and its handler for each; with ``settings``, those it reads now (of an
    event type it reads in both versions, the one PIN_CONTRACT_MIGRATIONS gives it: :func:`select_routes`)."""
    if group not in _HANDLERS:
        raise ConfigurationError(f"unknown consumer group {group!r} (one of {', '.join(CONSUMER_GROUPS)})")
    routes: dict[str, Route[Any]] = importlib.import_module(_HANDLERS[group]).routes()
    return routes if settings is None else select_routes(group, routes, settings.contract_migrations)


def select_routes(
    group: str, routes: Mapping[str, Route[Any]], migrations: Mapping[str, ContractMigration]
) -> dict[str, Route[Any]]:
    """The routes ``group`` reads now: of an event type whose v1 and v2 it both handles, v2 when the event type's
    migration lists the group among its ``v2_groups``, else v1 (operators move a group by that setting, without a
    release). A group moved to a v2 it has no route for is a configuration error.

    A group moved to v2 has no position on the v2 topic yet: it reads it from its start (auto.offset.reset
    earliest), which is at most the migration window ago, and its inbox (whose dedup window the window may not
    exceed: pin.settings) skips every event it already applied from v1 under the same MessageId.
    """
    chosen = dict(routes)
    for event_type, (old, new) in successions().items():
        migration = migrations.get(event_type)
        on_v2 = migration is not None and group in migration.v2_groups
        if on_v2 and new.TOPIC not in routes:
            raise ConfigurationError(
                f"PIN_CONTRACT_MIGRATIONS: {group} is moved to {new.TOPIC} but handles no such topic"
            )
        if old.TOPIC in routes and new.TOPIC in routes:
            del chosen[old.TOPIC if on_v2 else new.TOPIC]
    return chosen


def topics_of(group: str) -> tuple[str, ...]:
    """The topics ``group`` subscribes to: its route table's, the one source for status, docs and runbooks."""
    return tuple(routes_of(group))


def build_runtime(group: str, settings: Settings, pool: ConnectionPool[Conn], **options: Any) -> ConsumerRuntime:
    """A consumer instance of ``group`` on ``pool``; ``options``: :class:`ConsumerConfig` fields over the settings'
    (retry, batches, lanes), and the runtime's hooks (``after_effect``, ``paused``; a test's own ``routes``)."""
    names = ConsumerConfig.field_names()
    config = ConsumerConfig.from_settings(settings, **{k: v for k, v in options.items() if k in names})
    hooks = {k: v for k, v in options.items() if k not in names}
    runtime = ConsumerRuntime(
        group=group,
        routes=hooks.pop("routes", None) or routes_of(group, settings),
        pool=pool,
        consumer_config=consumer_config(settings, group, **{"client.id": f"pin-consume-{group}"}),
        producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
        config=config,
        **{"paused": PauseFlag(pool, kind=GROUP, name=group), **hooks},
    )
    SLA.labels(group).set(SLA_SECONDS[group])
    return runtime


# -- Who writes and who reads each topic -------------------------------------------------------------------------
# The roles that hold a Kafka principal (PIN_KAFKA_PRINCIPAL_<ROLE>): the relay, each consumer group, and the
# operator's commands. `pin acls` derives every ACL binding from the table below (pin.messaging.acls).
RELAY = "relay"
OPERATOR = "operator"
KAFKA_ROLES = (RELAY, *CONSUMER_GROUPS, OPERATOR)


@dataclass(frozen=True)
class TopicAccess:
    """One topic, the roles whose code writes to it and the roles whose code reads it."""

    topic: str
    writers: tuple[str, ...]
    readers: tuple[str, ...]


def topic_table() -> tuple[TopicAccess, ...]:
    """Every topic with its writers and readers: the one table of who writes and who reads what.

    The relay writes the integration topics (each contract's TOPIC is one) and the groups read them as their route
    tables say; `pin dlq replay` (the operator) writes a dead letter back to the topic it came from, so it writes
    every topic a group reads.
    Each group writes its own dead-letter topic, which `pin dlq list|replay` (the operator) reads.
    """
    readers = {topic: tuple(g for g in CONSUMER_GROUPS if topic in topics_of(g)) for topic in INTEGRATION_TOPICS}
    table = [
        TopicAccess(topic, (RELAY, OPERATOR) if read_by else (RELAY,), read_by) for topic, read_by in readers.items()
    ]
    table += [TopicAccess(dead_letter_topic(g), (g,), (OPERATOR,)) for g in CONSUMER_GROUPS]
    return tuple(table)
