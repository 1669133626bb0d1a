"""The group's inbox, ``messaging.inbox``: one row per handled MessageId, written with the effect (exactly once)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.consumer.received import Received

# inbox_insert: one message's row; zero rows inserted means the message was handled before. Returns the row's
# processed_at: the transaction's time on the database clock, from which the event's age is measured.
INBOX_INSERT = """
INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset", occurred_at)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id, processed_at
"""

# inbox_insert_many: the rows of one partition's messages from one poll; returns the ids not there before (and
# the transaction's time, the same on every row).
INBOX_INSERT_MANY = """
INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset", occurred_at)
SELECT %s, m.message_id, %s, %s, m."offset", m.occurred_at
FROM unnest(%b::uuid[], %b::bigint[], %b::timestamptz[]) AS m(message_id, "offset", occurred_at)
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id, processed_at
"""

# inbox_prune: bounded, oldest first, so the prune never holds long locks or scans the whole table.
INBOX_PRUNE = """
WITH old AS (
    SELECT consumer_group, message_id FROM messaging.inbox
    WHERE consumer_group = %s AND processed_at < now() - make_interval(secs => %s)
    ORDER BY processed_at
    LIMIT %s
)
DELETE FROM messaging.inbox AS i USING old
WHERE i.consumer_group = old.consumer_group AND i.message_id = old.message_id
"""

# Rows one prune deletes at the most.
PRUNE_BATCH = 5_000


def inbox_insert(
    conn: Conn, group: str, message: Received, message_id: uuid.UUID, occurred_at: datetime | None
) -> datetime | None:
    """Record ``message`` as handled by ``group``: the transaction's database time, or None if it was handled before."""
    row = conn.execute(
        INBOX_INSERT, (group, message_id, message.topic, message.partition, message.offset, occurred_at)
    ).fetchone()
    return None if row is None else cast(datetime, row["processed_at"])


def inbox_insert_many(
    conn: Conn,
    group: str,
    *,
    topic: str,
    partition: int,
    message_ids: Sequence[uuid.UUID],
    offsets: Sequence[int],
    occurred_at: Sequence[datetime | None],
) -> tuple[set[uuid.UUID], datetime | None]:
    """Record the messages of one partition as handled by ``group``: the ids that were not there before, and the
    transaction's database time (None when every one was)."""
    params = (group, topic, partition, list(message_ids), list(offsets), list(occurred_at))
    cursor = conn.execute(INBOX_INSERT_MANY, params)
    if cursor.rowcount == len(message_ids):
        # all new (the usual case): one row gives the time, the ids need not be converted
        first = cursor.fetchone()
        return set(message_ids), None if first is None else cast(datetime, first["processed_at"])
    fetched = cursor.fetchall()
    at = cast(datetime, fetched[0]["processed_at"]) if fetched else None
    return {cast(uuid.UUID, row["message_id"]) for row in fetched}, at


def inbox_prune(conn: Conn, group: str, retention_seconds: float) -> int:
    """Delete at most :data:`PRUNE_BATCH` of ``group``'s rows older than the dedup window; how many went."""
    return conn.execute(INBOX_PRUNE, (group, retention_seconds, PRUNE_BATCH)).rowcount


def prune_inbox(
    pool: ConnectionPool[Conn], group: str, retention_seconds: float, *, db_timeout: float, log: Any
) -> None:
    """One bounded prune of ``group``'s inbox; a failure is logged (housekeeping never stops consumption)."""
    try:
        with pool.connection(timeout=db_timeout) as conn:
            deleted = inbox_prune(conn, group, retention_seconds)
        if deleted:
            log.info("inbox pruned", deleted=deleted)
    except Exception as exc:  # noqa: BLE001 - housekeeping never stops consumption
        log.warning("inbox prune failed", error_type=type(exc).__name__)
