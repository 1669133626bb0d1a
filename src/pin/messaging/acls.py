"""The Kafka ACL bindings each role needs, derived from the one table of who writes and who reads each topic
(:func:`pin.messaging.groups.topic_table`), and how a cluster converges to them (`pin acls [--apply]`).

A binding is granted only for a call the role's code makes; docs/operations.md, "Access control", lists them with
the call behind each. No IO here: the broker is behind the :class:`AclAdmin` port (adapter:
:mod:`pin.messaging.acl_admin`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

from pin.messaging.groups import KAFKA_ROLES, OPERATOR, RELAY, TopicAccess
from pin.messaging.topics import CONSUMER_GROUPS, STATUS_PROBE_GROUP
from pin.settings import Settings

# Kafka's name of its one cluster resource (IDEMPOTENT_WRITE is granted on it)
CLUSTER_NAME = "kafka-cluster"
# Operations Kafka's authorizer counts as DESCRIBE too: a DESCRIBE beside one of them is never granted
_IMPLY_DESCRIBE = frozenset({"READ", "WRITE", "DELETE", "ALTER"})


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL binding: ``principal`` may (``permission``) do ``operation`` on a resource, from ``host``."""

    principal: str
    resource_type: str  # TOPIC, GROUP, CLUSTER (what the broker returns may hold others)
    resource_name: str
    pattern_type: str  # LITERAL, or PREFIXED: every resource whose name starts with resource_name
    operation: str
    host: str = "*"
    permission: str = "ALLOW"
    # the call of the role's code that needs it (not part of the binding: never compared)
    reason: str = field(default="", compare=False)

    def line(self) -> str:
        """One readable line: ``ALLOW User:pin-crm READ TOPIC pin.calendar... (LITERAL)``."""
        pattern = "" if self.pattern_type == "LITERAL" else f" ({self.pattern_type})"
        host = "" if self.host == "*" else f" from {self.host}"
        resource = f"{self.resource_type} {self.resource_name}{pattern}"
        return f"{self.permission} {self.principal} {self.operation} {resource}{host}"


def _topic(principal: str, operation: str, topic: str, reason: str) -> AclEntry:
    return AclEntry(principal, "TOPIC", topic, "LITERAL", operation, reason=reason)


def _group(principal: str, operation: str, group: str, reason: str, *, prefixed: bool = False) -> AclEntry:
    return AclEntry(principal, "GROUP", group, "PREFIXED" if prefixed else "LITERAL", operation, reason=reason)


def _idempotent_write(principal: str, reason: str) -> AclEntry:
    return AclEntry(principal, "CLUSTER", CLUSTER_NAME, "LITERAL", "IDEMPOTENT_WRITE", reason=reason)


def _writes(access: TopicAccess, principal: str, role: str) -> AclEntry:
    reasons = {RELAY: "`pin relay` publishes the outbox's rows", OPERATOR: "`pin dlq replay` sends dead letters back"}
    return _topic(principal, "WRITE", access.topic, reasons.get(role, "the group's dead letters"))


def _reads(access: TopicAccess, principal: str, role: str) -> AclEntry:
    reason = "`pin dlq list` and `pin dlq replay` read it" if role == OPERATOR else "the group's route table"
    return _topic(principal, "READ", access.topic, reason)


def required_acls(settings: Settings, table: Sequence[TopicAccess]) -> tuple[AclEntry, ...]:
    """Every binding the roles need, sorted, for ``table`` (:func:`pin.messaging.groups.topic_table` of the groups'
    route tables)."""
    principal = settings.kafka_principal
    wanted = [_writes(a, principal(role), role) for a in table for role in a.writers]
    wanted += [_reads(a, principal(role), role) for a in table for role in a.readers]
    producers = dict.fromkeys(role for a in table for role in a.writers)
    # every producer of PIN is idempotent (producer_config): InitProducerId needs this on the cluster
    wanted += [_idempotent_write(principal(role), "idempotent producer (InitProducerId)") for role in producers]
    wanted += [_group(principal(g), "READ", g, "joins its group, commits its offsets") for g in CONSUMER_GROUPS]
    # every relay reads each group's committed offsets: what waits for the group while it is down (outbox/waiting.py)
    relay_reason = "`pin relay`: the group's committed offsets (what waits for it)"
    wanted += [_group(principal(RELAY), "DESCRIBE", g, relay_reason) for g in CONSUMER_GROUPS]
    wanted += _operator(settings, table)
    return tuple(sorted(_without_implied(wanted)))


def _operator(settings: Settings, table: Sequence[TopicAccess]) -> list[AclEntry]:
    """The operator's bindings besides its reads and writes: `pin topics`, `pin status`, `pin dlq`'s readers."""
    from pin.messaging.consumer.dead_letters.command import DLQ_READER_GROUP_PREFIX

    operator = settings.kafka_principal(OPERATOR)
    entries = [_topic(operator, "CREATE", a.topic, "`pin topics` creates it") for a in table]
    entries += [_topic(operator, "DESCRIBE", a.topic, "`pin status`: partitions, end offsets") for a in table]
    entries += [_group(operator, "DESCRIBE", g, "`pin status`: the group's committed offsets") for g in CONSUMER_GROUPS]
    entries.append(_group(operator, "DESCRIBE", STATUS_PROBE_GROUP, "`pin status` lists the topics"))
    entries.append(_group(operator, "DESCRIBE", DLQ_READER_GROUP_PREFIX, "`pin dlq`'s readers", prefixed=True))
    return entries


def _without_implied(entries: Iterable[AclEntry]) -> list[AclEntry]:
    """``entries`` without a DESCRIBE that a READ or WRITE of the same principal on the same resource implies."""
    entries = list(dict.fromkeys(entries))
    implied = {
        (e.principal, e.resource_type, e.resource_name, e.pattern_type)
        for e in entries
        if e.operation in _IMPLY_DESCRIBE
    }
    return [
        e
        for e in entries
        if e.operation != "DESCRIBE" or (e.principal, e.resource_type, e.resource_name, e.pattern_type) not in implied
    ]


def managed_principals(settings: Settings) -> frozenset[str]:
    """The principals `pin acls --apply` owns the bindings of: one per role."""
    return frozenset(settings.kafka_principal(role) for role in KAFKA_ROLES)


# -- converging a cluster -----------------------------------------------------------------------------------------


class AclAdmin(Protocol):
    """The broker's ACL APIs (DescribeAcls, CreateAcls, DeleteAcls)."""

    def describe(self) -> Iterable[AclEntry]:
        """Every binding the cluster holds."""

    def create(self, entries: Sequence[AclEntry]) -> None:
        """Add these bindings."""

    def delete(self, entries: Sequence[AclEntry]) -> None:
        """Remove exactly these bindings."""


@dataclass(frozen=True)
class AclChanges:
    """What a convergence did (or would do): bindings created and bindings deleted."""

    created: tuple[AclEntry, ...] = ()
    deleted: tuple[AclEntry, ...] = ()


def plan(current: Iterable[AclEntry], wanted: Iterable[AclEntry], managed: frozenset[str]) -> AclChanges:
    """The changes that make the managed principals' bindings in ``current`` exactly ``wanted``; others untouched."""
    have = {entry for entry in current if entry.principal in managed}
    want = set(wanted)
    return AclChanges(created=tuple(sorted(want - have)), deleted=tuple(sorted(have - want)))


def converge(admin: AclAdmin, wanted: Iterable[AclEntry], managed: frozenset[str]) -> AclChanges:
    """Apply :func:`plan` to the cluster: creations first, so that no role loses a binding it still needs."""
    wanted = tuple(wanted)
    changes = plan(admin.describe(), wanted, managed)
    reasons = {entry: entry.reason for entry in wanted}  # the broker's copy has none
    if changes.created:
        admin.create(changes.created)
    if changes.deleted:
        admin.delete(changes.deleted)
    created = tuple(AclEntry(**{**asdict(e), "reason": reasons.get(e, e.reason)}) for e in changes.created)
    return AclChanges(created=created, deleted=changes.deleted)


# -- rendering ----------------------------------------------------------------------------------------------------


def as_json(entries: Iterable[AclEntry]) -> str:
    """The bindings as one JSON array (`pin acls --json`)."""
    return json.dumps(records(entries), indent=2)


def records(entries: Iterable[AclEntry]) -> list[dict[str, str]]:
    """The bindings as JSON-ready objects, one per binding."""
    return [asdict(entry) for entry in entries]


def table(entries: Sequence[AclEntry]) -> str:
    """The bindings as aligned columns (`pin acls`)."""
    rows = [("PRINCIPAL", "OPERATION", "RESOURCE", "NAME", "PATTERN", "WHY")]
    rows += [(e.principal, e.operation, e.resource_type, e.resource_name, e.pattern_type, e.reason) for e in entries]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + f"  {row[5]}" for row in rows
    )


def markdown(entries: Sequence[AclEntry]) -> str:
    """The bindings as the markdown table of docs/operations.md ("Access control")."""
    lines = ["| principal | operation | resource | name | pattern | why |", "|---|---|---|---|---|---|"]
    lines += [
        f"| `{e.principal}` | {e.operation} | {e.resource_type} | `{e.resource_name}` | {e.pattern_type} | {e.reason} |"
        for e in entries
    ]
    return "\n".join(lines)
