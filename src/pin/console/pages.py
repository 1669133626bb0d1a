"""What each console page shows, read from the database in bounded statements (``queries.sql``), and from `pin
status`'s snapshot for the overview. Nothing here reads a Kafka topic: the groups' dead letters come from their
index (:mod:`pin.messaging.consumer.dead_letters.index`)."""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from pin.db import Conn, load_queries
from pin.messaging.consumer.dead_letters import index
from pin.messaging.topics import CONSUMER_GROUPS
from pin.operations import audit, pauses
from pin.outbox.floors import FLOORS, PLAN_BY_INDEX
from pin.outbox.writer import VPARTS
from pin.status import database
from pin.status.snapshot import OutboxView

_QUERIES = load_queries(__package__)
_OUTBOX_WAITING = _QUERIES["console_outbox_waiting"].format(**FLOORS)

# Rows per page of every list; the next page starts after the last row shown (keyset, never OFFSET).
PAGE_SIZE = 50
# The outbox's count on a page stops after this many waiting rows (read past the floors, vpart by vpart): a bounded
# read at any backlog; the exact count per topic is the gauge pin_outbox_backlog (its chart).
OUTBOX_COUNT_CAP = 10_001
# An owned vpart is stale once its owner's instance row expired this many relay heartbeats ago: nothing advances
# its floor, and nobody took it over (the relays take an expired owner's vparts at their next heartbeat).
FLOOR_STALE_HEARTBEATS = 3
# The most bytes of a payload a letter's page shows (the rest is counted, not shown).
SHOWN_PAYLOAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Page:
    """One page of a keyset-paginated list: its rows and the cursor of the next page (None: the last)."""

    rows: list[dict[str, Any]]
    next_cursor: int | None = None


def _page(rows: list[dict[str, Any]], limit: int) -> Page:
    """``rows`` read with ``limit + 1``: the extra row only says that there is a next page."""
    shown = rows[:limit]
    return Page(shown, int(shown[-1]["id"]) if len(rows) > limit else None)


def shown_bytes(value: bytes | None) -> str:
    """Bytes as an operator reads them: JSON pretty-printed, else UTF-8 with undecodable bytes replaced; bounded.
    Escaping is the template's (autoescape): this is text, never markup."""
    if value is None:
        return ""
    text = value[:SHOWN_PAYLOAD_BYTES].decode("utf-8", "replace")
    with contextlib.suppress(ValueError):  # not JSON: shown as the text it is
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    cut = len(value) - SHOWN_PAYLOAD_BYTES
    return text + (f"\n… {cut} more bytes not shown" if cut > 0 else "")


# --- the pages' reads ------------------------------------------------------------------------------------------


def paused(conn: Conn) -> list[pauses.Pause]:
    """What is paused now (every page shows it)."""
    return pauses.pauses(conn)


def open_group_letters(conn: Conn) -> dict[str, int]:
    """Each group's open dead letters (counts stop at 10 001)."""
    rows = conn.execute(_QUERIES["console_open_group_letters"], {"groups": list(CONSUMER_GROUPS)}).fetchall()
    return {str(r["consumer_group"]): int(str(r["open_letters"])) for r in rows}


def cycles(conn: Conn, limit: int = 50) -> list[dict[str, Any]]:
    """The last cycle of every worker instance, the most recent first."""
    return list(conn.execute(_QUERIES["console_cycles"], {"limit": limit}).fetchall())


def poison(
    conn: Conn, *, job: str | None = None, item: uuid.UUID | None = None, limit: int = PAGE_SIZE
) -> list[dict[str, Any]]:
    """The workers' poison items (of ``job``, of ``item``), the longest failing first."""
    return list(conn.execute(_QUERIES["console_poison"], {"job": job, "item": item, "limit": limit}).fetchall())


def outbox_view(conn: Conn) -> OutboxView:
    """The outbox's figures a page shows, on the page's connection: rows waiting per topic (up to
    :data:`OUTBOX_COUNT_CAP`, from ``outbox.unpublished``), the oldest one's age (the first row past each floor), the
    relay's dead letters, the live leases."""
    backlog = database.read(conn, lambda c: database.outbox_backlog(c, OUTBOX_COUNT_CAP))
    return OutboxView(backlog, database.read(conn, database.dead_letters), database.read(conn, database.leases))


def outbox_waiting(conn: Conn, *, topic: str | None, after: int | None, limit: int = PAGE_SIZE) -> Page:
    """One page of the outbox rows waiting, oldest first: read past each vpart's floor as the relay reads, at most
    ``limit + 1`` rows a vpart (docs/design/outbox-storage.md), never a walk of ``outbox.message`` by id."""
    with conn.transaction():
        conn.execute(PLAN_BY_INDEX)  # each part along its own index, whatever the statistics say
        rows = conn.execute(_OUTBOX_WAITING, {"topic": topic, "after": after, "limit": limit + 1}).fetchall()
    return _page(list(rows), limit)


def lease_map(conn: Conn, *, heartbeat_seconds: float) -> list[dict[str, Any]]:
    """Every vpart's lease (``VPARTS`` rows) with its stored floor; ``floor_stale``: an owned vpart whose owner's
    heartbeat stopped :data:`FLOOR_STALE_HEARTBEATS` heartbeats ago (nothing advances its floor)."""
    stale_after = FLOOR_STALE_HEARTBEATS * heartbeat_seconds
    rows = list(conn.execute(_QUERIES["console_lease_map"], {"stale_after": stale_after}).fetchall())
    assert len(rows) <= VPARTS
    return rows


@dataclass(frozen=True)
class RelayFilter:
    """Which of the relay's dead letters an operator means (every field optional)."""

    topic: str | None = None
    key: str | None = None
    error: str | None = None
    since: Any = None
    until: Any = None
    ids: tuple[int, ...] | None = None

    @classmethod
    def of(cls, where: index.LetterFilter) -> RelayFilter:
        """The relay's letters a filter of the dead-letters page selects (its group, if any, does not apply)."""
        return cls(where.topic, where.key, where.error, where.since, where.until, where.ids)

    def params(self) -> dict[str, Any]:
        """The bound parameters."""
        ids = list(self.ids) if self.ids is not None else None
        return {"topic": self.topic, "key": self.key, "error": self.error, "since": self.since, "until": self.until,
                "ids": ids}  # fmt: skip


def relay_dead_letters(conn: Conn, where: RelayFilter, *, before: int | None, limit: int = PAGE_SIZE) -> Page:
    """One page of the relay's dead letters, newest first."""
    rows = conn.execute(
        _QUERIES["console_relay_dead_letters"], {**where.params(), "before": before, "limit": limit + 1}
    ).fetchall()
    return _page(list(rows), limit)


def relay_dead_letter(conn: Conn, outbox_id: int) -> dict[str, Any] | None:
    """One of the relay's dead letters, whole, with the rows of its key it holds back."""
    row = conn.execute(_QUERIES["console_relay_dead_letter_one"], {"id": outbox_id}).fetchone()
    return dict(row) if row is not None else None


def group_dead_letters(conn: Conn, where: index.LetterFilter, *, before: int | None, limit: int = PAGE_SIZE) -> Page:
    """One page of the groups' dead letters (their index), newest first."""
    return _page(index.page(conn, where, before=before, limit=limit + 1), limit)


def held(
    conn: Conn, *, group: str | None = None, key: bytes | None = None, limit: int = PAGE_SIZE
) -> list[dict[str, Any]]:
    """The messages consumers hold in retry (of ``group``, of ``key``), the longest held first."""
    rows = conn.execute(_QUERIES["console_held"], {"group": group, "key": key, "limit": limit}).fetchall()
    return [{**row, "key_text": index.key_text(_bytes(row["message_key"]))} for row in rows]


def members(conn: Conn, group: str | None = None) -> list[dict[str, Any]]:
    """The consumer instances (of ``group``), live or not."""
    return list(conn.execute(_QUERIES["console_members"], {"group": group}).fetchall())


def recent_audit(conn: Conn, limit: int = 200) -> list[audit.AuditRecord]:
    """The latest operator actions, newest first."""
    return audit.recent(conn, limit=limit)


@dataclass
class KeyView:
    """Everything about one message key, and the one-line answer to "why is this key not moving?"."""

    key: str
    outbox: list[dict[str, Any]] = field(default_factory=list)
    relay_letters: list[dict[str, Any]] = field(default_factory=list)
    group_letters: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    poison: list[dict[str, Any]] = field(default_factory=list)

    @property
    def answer(self) -> str:  # noqa: PLR0911 - one answer per cause, in the order they block the key
        """Why the key does not move, the most blocking cause first."""
        if self.relay_letters:
            letter = self.relay_letters[-1]
            behind = len(self.outbox)
            return (f"the relay dead-lettered its message {letter['message_id']} on {letter['topic']}: it holds back "
                    f"{behind} later row(s) of the key until it is replayed or discarded")  # fmt: skip
        if self.held:
            row = self.held[0]
            return (f"consumer group {row['consumer_group']} holds its message at {row['topic']}[{row['partition']}]"
                    f"@{row['offset']} in retry ({row['fault']}: {row['error_type']}, {row['attempts']} attempt(s)); "
                    f"the later messages of the key wait behind it")  # fmt: skip
        if self.poison:
            row = self.poison[0]
            return (f"worker {row['job']} fails on it as a poison item ({row['attempts']} attempt(s)): "
                    f"{row['last_error']}")  # fmt: skip
        backing_off = [row for row in self.outbox if row["next_attempt_at"] is not None]
        if backing_off:
            row = backing_off[0]
            return (f"the relay failed to publish its row {row['id']} {row['attempts']} time(s) and retries it "
                    f"at {row['next_attempt_at']:%Y-%m-%d %H:%M:%S} UTC ({row['last_error']})")  # fmt: skip
        if self.outbox:
            return f"{len(self.outbox)} row(s) wait in the outbox for the relay: no failure recorded, it is moving"
        open_letters = [row for row in self.group_letters if row["resolution"] is None]
        if open_letters:
            row = open_letters[0]
            return (f"consumer group {row['consumer_group']} dead-lettered its message {row['message_id']} "
                    f"({row['error_type']}); the key's later messages were handled without it")  # fmt: skip
        return "nothing holds it: no row waits, no dead letter is open, no consumer or worker holds it"


def key_view(conn: Conn, key: str) -> KeyView:
    """Everything about ``key``: outbox rows, dead letters of both kinds, held messages, poison items."""
    view = KeyView(key)
    view.outbox = list(conn.execute(_QUERIES["console_outbox_of_key"], {"key": key, "limit": PAGE_SIZE}).fetchall())
    view.relay_letters = relay_dead_letters(conn, RelayFilter(key=key), before=None).rows
    view.group_letters = group_dead_letters(conn, index.LetterFilter(key=key, resolved=True), before=None).rows
    view.held = held(conn, key=key.encode())
    try:
        view.poison = poison(conn, item=uuid.UUID(key))
    except ValueError:  # a worker's items are UUIDs: a key that is none is no poison item
        view.poison = []
    return view


def _bytes(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, bytes | memoryview) else None
