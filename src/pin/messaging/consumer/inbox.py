"""The group's inbox, ``messaging.inbox``: one row per handled MessageId, written with the effect (exactly once).

The statements are named in this package's ``queries.sql``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from psycopg_pool import ConnectionPool

from pin.db import Conn, load_queries

_QUERIES = load_queries(__package__)
INBOX_INSERT = _QUERIES["inbox_insert"]
INBOX_PRUNE = _QUERIES["inbox_prune"]

# Rows one prune deletes at the most.
PRUNE_BATCH = 5_000


def inbox_insert(
    conn: Conn,
    group: str,
    *,
    topic: str,
    partition: int,
    message_ids: Sequence[uuid.UUID],
    offsets: Sequence[int],
    occurred_at: Sequence[datetime | None],
) -> tuple[set[uuid.UUID] | None, datetime | None]:
    """Record messages of one partition (a lone message is a batch of one) as handled by ``group``: the ids that
    were not there before, and the transaction's database time (None when every one was).

    The ids are None when every one was new (the usual case): as many rows went in as ids were sent, so each id was
    new and none was sent twice (a repeat within the statement is a conflict, not a row), and the caller applies
    them all without looking them up.
    """
    params = (group, topic, partition, list(message_ids), list(offsets), list(occurred_at))
    cursor = conn.execute(INBOX_INSERT, params)
    if cursor.rowcount == len(message_ids):
        # all new: one row gives the time, the ids need not be converted
        first = cursor.fetchone()
        return None, None if first is None else cast(datetime, first["processed_at"])
    fetched = cursor.fetchall()
    at = cast(datetime, fetched[0]["processed_at"]) if fetched else None
    return {cast(uuid.UUID, row["message_id"]) for row in fetched}, at


def inbox_prune(conn: Conn, group: str, retention_seconds: float) -> int:
    """Delete at most :data:`PRUNE_BATCH` of ``group``'s rows older than the dedup window; how many went."""
    return conn.execute(INBOX_PRUNE, (group, retention_seconds, PRUNE_BATCH)).rowcount


def prune_inbox(
    pool: ConnectionPool[Conn],
    group: str,
    retention_seconds: float,
    *,
    db_timeout: float,
    log: Any,
    also: Callable[[Conn], int] | None = None,
) -> None:
    """One bounded prune of ``group``'s inbox, and ``also`` (the held messages' rows of messages applied since) on
    the same connection; a failure is logged (housekeeping never stops consumption)."""
    try:
        with pool.connection(timeout=db_timeout) as conn:
            deleted = inbox_prune(conn, group, retention_seconds)
            stale = also(conn) if also is not None else 0
        if deleted:
            log.info("inbox pruned", deleted=deleted)
        if stale:
            log.info("records of held messages applied since removed", deleted=stale)
    except Exception as exc:  # noqa: BLE001 - housekeeping never stops consumption
        log.warning("inbox prune failed", error_type=type(exc).__name__)
