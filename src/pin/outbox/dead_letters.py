"""Operator actions on the outbox's dead letters (`pin outbox dead-letters list|replay|discard`).

A dead letter holds back the later rows of its key (per-key order). An operator either replays it (after
fixing the cause: the row goes back to the outbox under its original id, so it is again the first of its
key) or discards it (its key's later rows then flow). Neither prints payloads. A letter is named by its
MessageId and topic (one event is two rows during a contract migration, docs/runbooks/contract-migration.md);
the topic may be left out when the MessageId has one letter.
"""

from __future__ import annotations

import uuid
from typing import Any

from pin.db import Conn
from pin.outbox.writer import MOVED_COLUMNS, outbox_put_back

# dead_letter_list: the oldest dead letters, each with how many rows of its key wait behind it.
_DEAD_LETTER_LIST = """
SELECT d.id, d.message_id, d.topic, d.message_key, d.event_type, d.attempts, d.permanent, d.error,
       d.created_at, d.dead_lettered_at,
       (SELECT count(*) FROM outbox.message m WHERE m.message_key = d.message_key) AS held_back
FROM outbox.dead_letter d
ORDER BY d.id
LIMIT %(limit)s
"""

# dead_letter_replay: take one dead letter (or all) out, oldest first, with what the outbox row needs back; the
# writer puts each back under its original id, which (smaller than every later row of its key) puts it back at the
# head of its key.
_DEAD_LETTER_TAKE = f"""
WITH moved AS (
    DELETE FROM outbox.dead_letter
     WHERE (%(message_id)s::uuid IS NULL OR message_id = %(message_id)s)
       AND (%(topic)s::text IS NULL OR topic = %(topic)s)
    RETURNING *
)
SELECT {", ".join(c + "::text" if c == "payload" else c for c in MOVED_COLUMNS)}
FROM moved
ORDER BY id
"""

# dead_letter_discard: drop one dead letter for good.
_DEAD_LETTER_DISCARD = """
DELETE FROM outbox.dead_letter WHERE message_id = %(message_id)s AND (%(topic)s::text IS NULL OR topic = %(topic)s)
RETURNING message_id
"""

# dead_letter_topics: the topics of a MessageId's dead letters.
_DEAD_LETTER_TOPICS = "SELECT topic FROM outbox.dead_letter WHERE message_id = %(message_id)s ORDER BY topic"


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


def dead_letter_replay(conn: Conn, message_id: uuid.UUID | None, topic: str | None = None) -> list[uuid.UUID]:
    """Put one dead letter (or, with None, all of them, or all of ``topic``) back into the outbox; returns the
    replayed ids. Raises AmbiguousMessageIdError for a MessageId with letters on several topics and no topic."""
    rows = conn.execute(_DEAD_LETTER_TAKE, _named(conn, message_id, topic)).fetchall()
    outbox_put_back(conn, rows)  # the writer: every row with its value, captured in cdc mode
    conn.commit()
    return [uuid.UUID(str(row["message_id"])) for row in rows]


def dead_letter_discard(conn: Conn, message_id: uuid.UUID, topic: str | None = None) -> bool:
    """Drop a dead letter for good (its key's later rows then flow); False when there is no such letter. Raises as
    :func:`dead_letter_replay` does."""
    row = conn.execute(_DEAD_LETTER_DISCARD, _named(conn, message_id, topic)).fetchone()
    conn.commit()
    return row is not None
