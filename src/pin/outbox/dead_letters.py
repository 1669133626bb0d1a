"""Operator actions on the outbox's dead letters (`pin outbox dead-letters list|replay|discard`).

A dead letter holds back the later rows of its key (per-key order). An operator either replays it (after
fixing the cause: the row goes back to the outbox under its original id, so it is again the first of its
key) or discards it (its key's later rows then flow; the letter is kept in ``outbox.dead_letter_discarded``).
Neither prints payloads. A letter is named by its
MessageId and topic (one event is two rows during a contract migration, docs/runbooks/contract-migration.md);
the topic may be left out when the MessageId has one letter.
"""

from __future__ import annotations

import uuid
from typing import Any

from pin.db import Conn, load_queries
from pin.outbox.writer import MOVED_COLUMNS, OutboxMode, outbox_put_back

_QUERIES = load_queries(__package__)
_DEAD_LETTER_LIST = _QUERIES["dead_letter_list"]
_DEAD_LETTER_TAKE = _QUERIES["dead_letter_take"].format(
    moved_columns=", ".join(c + "::text" if c == "payload" else c for c in MOVED_COLUMNS)
)
_DEAD_LETTER_DISCARD = _QUERIES["dead_letter_discard"]
_DEAD_LETTER_TOPICS = _QUERIES["dead_letter_topics"]


class AmbiguousMessageIdError(ValueError):
    """A MessageId has dead letters on several topics (a contract migration's v1 and v2) and no topic was given."""


def _named(conn: Conn, message_id: uuid.UUID | None, topic: str | None) -> dict[str, Any]:
    """The parameters naming one letter (or all, with no MessageId); refuses a MessageId of several letters."""
    if message_id is not None and topic is None:
        topics = [str(row["topic"]) for row in conn.execute(_DEAD_LETTER_TOPICS, {"message_id": message_id})]
        if len(topics) > 1:
            raise AmbiguousMessageIdError(
                f"MessageId {message_id} has dead letters on {len(topics)} topics ({', '.join(topics)}): give --topic"
            )
    return {"message_id": message_id, "topic": topic}


def dead_letters_list(conn: Conn, limit: int = 100) -> list[dict[str, Any]]:
    """The oldest dead letters with their error and how many rows of their key wait behind them."""
    return [dict(row) for row in conn.execute(_DEAD_LETTER_LIST, {"limit": limit}).fetchall()]


def dead_letter_replay(
    conn: Conn, message_id: uuid.UUID | None, topic: str | None = None, *, mode: OutboxMode
) -> list[uuid.UUID]:
    """Put one dead letter (or, with None, all of them, or all of ``topic``) back into the outbox in ``mode`` (in cdc
    mode captured at once), committed; returns the replayed ids. Raises AmbiguousMessageIdError for a MessageId with
    letters on several topics and no topic."""
    replayed = put_back(conn, message_id, topic, mode=mode)
    conn.commit()
    return replayed


def put_back(
    conn: Conn, message_id: uuid.UUID | None, topic: str | None = None, *, mode: OutboxMode
) -> list[uuid.UUID]:
    """:func:`dead_letter_replay` in the caller's transaction (which records it, then commits)."""
    rows = conn.execute(_DEAD_LETTER_TAKE, _named(conn, message_id, topic)).fetchall()
    outbox_put_back(conn, rows, mode)  # the writer: every row with its value, captured in cdc mode
    return [uuid.UUID(str(row["message_id"])) for row in rows]


def dead_letter_discard(conn: Conn, message_id: uuid.UUID, topic: str | None = None) -> bool:
    """Discard a dead letter (its key's later rows then flow; the letter is kept in ``outbox.dead_letter_discarded``),
    committed; False when there is no such letter. Raises as :func:`dead_letter_replay` does."""
    discarded = set_aside(conn, message_id, topic)
    conn.commit()
    return discarded


def set_aside(conn: Conn, message_id: uuid.UUID, topic: str | None = None) -> bool:
    """:func:`dead_letter_discard` in the caller's transaction (which records it, then commits)."""
    return conn.execute(_DEAD_LETTER_DISCARD, _named(conn, message_id, topic)).fetchone() is not None
