"""The four consumer groups (SPEC section 7) as the plumbing knows them: each group's SLA, which version of a
migrating event type it reads, and who writes and who reads each topic (for the ACLs).

What each group reads is its handler module's route table, which only the composition root imports
(:mod:`pin.consumer_groups`): the functions here are handed a group's routes or topics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pin.messaging.contracts import successions
from pin.messaging.topics import CONSUMER_GROUPS, INTEGRATION_TOPICS, dead_letter_topic
from pin.settings import ConfigurationError, ContractMigration

if TYPE_CHECKING:
    from pin.messaging.consumer.routes import Route

# group -> its SLA in seconds (seed 003: crm < 1 min, notifications < 5 min; seed 002: catalog and news < 1 min):
# an event's effect commits within this long of its OccurredAt. Each runtime exports its group's value as
# pin_consumer_sla_seconds, which ConsumerSlaBreached compares the p99 of pin_consumer_event_age_seconds with;
# `pin status` compares the inbox's recent p99 with it; docs/specification.md's table is checked against it.
SLA_SECONDS = {"crm": 60.0, "notifications": 300.0, "catalog": 60.0, "news": 60.0}
assert set(SLA_SECONDS) == set(CONSUMER_GROUPS)
# The p99 is taken over this window: the alert's rate window, and what `pin status` calls recent.
SLA_WINDOW_SECONDS = 300


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


def topic_table(reads: Mapping[str, Sequence[str]]) -> tuple[TopicAccess, ...]:
    """Every topic with its writers and readers: the one table of who writes and who reads what, from ``reads``
    (group -> the topics its route table reads: :func:`pin.consumer_groups.group_topics`).

    The relay writes the integration topics (each contract's TOPIC is one) and the groups read them as their route
    tables say; `pin dlq replay` (the operator) writes a dead letter back to the topic it came from, so it writes
    every topic a group reads.
    Each group writes its own dead-letter topic, which `pin dlq list|replay` (the operator) reads.
    """
    readers = {topic: tuple(g for g in CONSUMER_GROUPS if topic in reads[g]) for topic in INTEGRATION_TOPICS}
    table = [
        TopicAccess(topic, (RELAY, OPERATOR) if read_by else (RELAY,), read_by) for topic, read_by in readers.items()
    ]
    table += [TopicAccess(dead_letter_topic(g), (g,), (OPERATOR,)) for g in CONSUMER_GROUPS]
    return tuple(table)
