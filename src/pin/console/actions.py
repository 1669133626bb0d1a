"""What an operator does, for the console and the command line alike. Every action checks its arguments first and
records itself in ``operations.audit`` (who, what, the filter, the counts, the reason) in the transaction that does
it; a replay is first a dry run that says what it would do.

A dry run of the groups' dead letters tells, per letter, what its group would do with it if it came again: skip it
(the group's inbox holds its MessageId: it was applied after all), refuse it (the Version guard: the context stored
a newer Version of the purchase), or apply it. A replay sends each letter to its original topic with its key,
value and headers (so the same MessageId), then marks it replayed; a discard marks it discarded (kept, hidden by
default). The relay's letters go back to the outbox at the head of their key (:mod:`pin.outbox.dead_letters`), or
are discarded (kept in ``outbox.dead_letter_discarded``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from pin.catalog.handler import CARD_BOOST
from pin.db import Conn, load_queries
from pin.messaging.consumer.dead_letters import index
from pin.messaging.kafka import producer_config
from pin.messaging.topics import CONSUMER_GROUPS, PURCHASE_CHANGED
from pin.news.handler import POST_BOOST
from pin.operations import audit, pauses
from pin.outbox import dead_letters as relay_letters
from pin.outbox.writer import OutboxMode
from pin.settings import Settings
from pin.status.database import JOBS

_QUERIES = load_queries(__package__)
INBOX_HOLDS = _QUERIES["console_inbox_holds"]
# the groups whose handler keeps a Version guard (the boost of purchase-changed), and where it keeps the Versions
VERSION_GUARDS = {
    group: _QUERIES["console_purchase_versions"].format(schema=tables.schema)
    for group, tables in (("catalog", CARD_BOOST), ("news", POST_BOOST))
}

# What can be paused: the polling workers' jobs and the consumer groups.
PAUSABLE = {pauses.JOB: tuple(items.job for items in JOBS), pauses.GROUP: CONSUMER_GROUPS}
# The most letters one request acts on (a page); "every letter matching the filter" beyond it is refused.
ACTION_LIMIT = 50
GROUP, RELAY = "group", "relay"


@dataclass(frozen=True)
class Said:
    """Who acts, why, and on what (the audit record's actor, reason and target)."""

    actor: str
    reason: str
    target: dict[str, Any]


class ActionError(ValueError):
    """An action that cannot be done as asked (unknown target, no reason, too many letters): nothing changed."""


class TooManyLettersError(ActionError):
    """More letters match than one request acts on: a replay of them is a job (:mod:`pin.console.replay_jobs`)."""


def record(conn: Conn, said: Said, action: str, counts: dict[str, int]) -> audit.AuditRecord:
    """The action's audit record, in ``conn``'s transaction."""
    return audit.record(conn, actor=said.actor, action=action, target=said.target, reason=said.reason, counts=counts)


def pause_or_resume(conn: Conn, *, kind: str, name: str, action: str, actor: str, reason: str) -> bool:
    """Pause or resume job or group ``name`` (recorded); True when it changed."""
    if name not in PAUSABLE.get(kind, ()):
        raise ActionError(f"nothing to pause called {kind} {name!r}")
    if action == "pause":
        return pauses.pause(conn, kind=kind, name=name, actor=actor, reason=reason)
    if action == "resume":
        return pauses.resume(conn, kind=kind, name=name, actor=actor, reason=reason)
    raise ActionError("action is pause or resume")


@dataclass
class Preview:
    """What a replay of some letters would do: the ids of those it would apply, skip and see refused."""

    kind: str
    apply: list[int] = field(default_factory=list)
    skip: list[int] = field(default_factory=list)  # the inbox holds their MessageId
    refuse: list[int] = field(default_factory=list)  # the Version guard holds a newer Version

    @property
    def total(self) -> int:
        """Letters looked at."""
        return len(self.apply) + len(self.skip) + len(self.refuse)

    def counts(self) -> dict[str, int]:
        """The counts an audit record and a page show."""
        return {"letters": self.total, "apply": len(self.apply), "skip": len(self.skip), "refuse": len(self.refuse)}


def select_group_letters(conn: Conn, where: index.LetterFilter) -> list[dict[str, Any]]:
    """The open letters ``where`` selects (at most :data:`ACTION_LIMIT`; more is an :class:`ActionError`)."""
    rows = index.page(conn, where, before=None, limit=ACTION_LIMIT + 1)
    if len(rows) > ACTION_LIMIT:
        raise TooManyLettersError(f"more than {ACTION_LIMIT} letters match: narrow the filter, or replay them as a job")
    return [full for row in rows if (full := index.one(conn, int(row["id"]))) is not None]


def preview_group(conn: Conn, letters: Sequence[dict[str, Any]]) -> Preview:
    """What each letter's group would do with it now: skip (inbox), refuse (Version guard) or apply."""
    preview = Preview(GROUP)
    for group in {str(letter["consumer_group"]) for letter in letters}:
        mine = [letter for letter in letters if letter["consumer_group"] == group]
        ids = [letter["message_id"] for letter in mine if letter["message_id"] is not None]
        held = {row["message_id"] for row in conn.execute(INBOX_HOLDS, {"group": group, "ids": ids}).fetchall()}
        stale = _stale(conn, group, [letter for letter in mine if letter["message_id"] not in held])
        for letter in mine:
            bucket = (
                preview.skip
                if letter["message_id"] in held
                else preview.refuse
                if letter["id"] in stale
                else preview.apply
            )
            bucket.append(int(letter["id"]))
    return preview


def _stale(conn: Conn, group: str, letters: Sequence[dict[str, Any]]) -> set[int]:
    """The letters of purchase-changed whose Version is older than the one ``group``'s guard stored."""
    query = VERSION_GUARDS.get(group)
    versions: dict[int, tuple[uuid.UUID, int]] = {}
    for letter in letters if query is not None else ():
        purchase = _purchase_version(letter) if letter["topic"] == PURCHASE_CHANGED else None
        if purchase is not None:
            versions[int(letter["id"])] = purchase
    if not versions or query is None:
        return set()
    ids = [purchase_id for purchase_id, _ in versions.values()]
    stored = {row["purchase_id"]: row["version"] for row in conn.execute(query, {"ids": ids}).fetchall()}
    return {
        letter_id for letter_id, (purchase_id, version) in versions.items()
        if purchase_id in stored and version < int(str(stored[purchase_id]))
    }  # fmt: skip


def _purchase_version(letter: dict[str, Any]) -> tuple[uuid.UUID, int] | None:
    """(PurchaseId, Version) of a purchase-changed letter, when its value says so."""
    try:
        value = json.loads(letter["message_value"] or b"")
        return uuid.UUID(str(value["PurchaseId"])), int(value["Version"])
    except (ValueError, KeyError, TypeError):
        return None


def replay_group(
    conn: Conn, settings: Settings, letters: Sequence[dict[str, Any]], said: Said
) -> tuple[audit.AuditRecord, Preview]:
    """Send ``letters`` back to their original topics (key, value and headers as read: the same MessageId), then
    mark them replayed, recorded with the dry run's counts. Every letter goes, the skipped and refused too: the
    group's inbox and guard decide, as they would for a redelivery."""
    preview = preview_group(conn, letters)
    if not letters:
        raise ActionError("no open dead letter matches")
    publish(settings, letters)
    done = record(conn, said, "dlq.replay", preview.counts())
    index.resolve(conn, [int(letter["id"]) for letter in letters], resolution=index.REPLAYED, audit_id=done.id)
    conn.commit()
    return done, preview


def publish(settings: Settings, letters: Sequence[dict[str, Any]]) -> None:
    """Produce every letter to its original topic and wait for the broker's acknowledgements."""
    if not settings.kafka_bootstrap_servers:
        raise ActionError("PIN_KAFKA_BOOTSTRAP_SERVERS is not set: this instance cannot replay to the broker")
    largest = max(len(letter["message_value"] or b"") + len(letter["message_key"] or b"") for letter in letters)
    config = producer_config(settings, **{"client.id": "pin-console-replay", "linger.ms": 0,
                                          "message.max.bytes": max(1_000_000, largest + 64 * 1024)})  # fmt: skip
    producer = Producer(config)
    failures: list[object] = []
    for letter in letters:
        headers: list[tuple[str, str | bytes | None]] = [*letter["headers"]]
        producer.produce(
            str(letter["topic"]), key=letter["message_key"], value=letter["message_value"], headers=headers,
            on_delivery=lambda err, _msg: failures.append(err) if err is not None else None,
        )  # fmt: skip
    remaining = producer.flush(30)
    if remaining or failures:
        raise ActionError(f"the broker did not acknowledge {remaining + len(failures)} replayed letter(s): none marked")


def discard_group(conn: Conn, letters: Sequence[dict[str, Any]], said: Said) -> audit.AuditRecord:
    """Mark ``letters`` discarded (kept, hidden by default), recorded."""
    if not letters:
        raise ActionError("no open dead letter matches")
    ids = [int(letter["id"]) for letter in letters]
    done = record(conn, said, "dlq.discard", {"letters": len(ids)})
    index.resolve(conn, ids, resolution=index.DISCARDED, audit_id=done.id)
    conn.commit()
    return done


def preview_relay(letters: Sequence[dict[str, Any]]) -> Preview:
    """A relay's letter never reached a consumer: a replay puts every one back at the head of its key."""
    return Preview(RELAY, apply=[int(letter["id"]) for letter in letters])


def replay_relay(conn: Conn, settings: Settings, letters: Sequence[dict[str, Any]], said: Said) -> audit.AuditRecord:
    """Put the relay's ``letters`` back into the outbox (each at the head of its key), recorded."""
    if not letters:
        raise ActionError("no dead letter matches")
    mode = OutboxMode(settings.outbox_mode)  # in cdc mode the replayed rows are captured too
    done = record(conn, said, "outbox.replay", {"letters": len(letters)})
    for letter in letters:  # dead_letter_replay commits: the record and the first letter together, then each
        relay_letters.dead_letter_replay(conn, letter["message_id"], str(letter["topic"]), mode=mode)
    return done


def discard_relay(conn: Conn, letters: Sequence[dict[str, Any]], said: Said) -> audit.AuditRecord:
    """Discard the relay's ``letters`` (kept in ``outbox.dead_letter_discarded``; their keys' later rows flow)."""
    if not letters:
        raise ActionError("no dead letter matches")
    done = record(conn, said, "outbox.discard", {"letters": len(letters)})
    for letter in letters:
        relay_letters.dead_letter_discard(conn, letter["message_id"], str(letter["topic"]))
    return done


def replay_relay_named(
    conn: Conn, settings: Settings, message_id: uuid.UUID | None, topic: str | None, said: Said
) -> tuple[audit.AuditRecord | None, list[uuid.UUID]]:
    """`pin outbox dead-letters replay`: the relay's letter ``message_id`` (None: every one, of ``topic`` or all) back
    into the outbox, recorded with its count in the same transaction; (None, []) when none matched (nothing done).
    Raises :class:`~pin.outbox.dead_letters.AmbiguousMessageIdError` as the outbox does."""
    # in cdc mode the replayed rows are captured too
    replayed = relay_letters.put_back(conn, message_id, topic, mode=OutboxMode(settings.outbox_mode))
    if not replayed:
        conn.rollback()
        return None, []
    done = record(conn, said, "outbox.replay", {"letters": len(replayed)})
    conn.commit()
    return done, replayed


def discard_relay_named(conn: Conn, message_id: uuid.UUID, topic: str | None, said: Said) -> audit.AuditRecord | None:
    """`pin outbox dead-letters discard`: the relay's letter ``message_id`` discarded, recorded in the same
    transaction; None when there is no such letter (nothing done)."""
    if not relay_letters.set_aside(conn, message_id, topic):
        conn.rollback()
        return None
    done = record(conn, said, "outbox.discard", {"letters": 1})
    conn.commit()
    return done
