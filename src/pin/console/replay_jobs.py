"""Replays larger than a page: recorded in ``operations.replay_job`` when an operator starts one, carried out by
every running relay (:class:`ReplayJobs`, one turn a second) at most ``PIN_CONSOLE_REPLAY_RATE`` letters a second
in all, newest letters first, with their progress and a cancel. 100,000 letters never hold an HTTP request, and
never starve live traffic: a turn takes one job (``SKIP LOCKED``), so the rate is per job and relay instance."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pin.console import actions
from pin.db import Conn, load_queries
from pin.messaging.consumer.dead_letters import index
from pin.settings import Settings

_QUERIES = load_queries(__package__)


def filter_of(described: dict[str, Any]) -> index.LetterFilter:
    """The filter a job recorded (:meth:`LetterFilter.described`), as a filter again."""

    def time(name: str) -> datetime | None:
        return datetime.fromisoformat(described[name]) if name in described else None

    message_id = described.get("message_id")
    return index.LetterFilter(
        group=described.get("group"), topic=described.get("topic"), key=described.get("key"),
        error=described.get("error"), since=time("since"), until=time("until"),
        message_id=uuid.UUID(message_id) if message_id else None,
    )  # fmt: skip


def matching(conn: Conn, where: index.LetterFilter) -> int:
    """How many open letters ``where`` selects (the count stops at 1,000,001)."""
    row = conn.execute(_QUERIES["replay_job_count"], where.params()).fetchone()
    return int(str(row["letters"])) if row else 0


def start(conn: Conn, where: index.LetterFilter, said: actions.Said) -> int:
    """Record a replay job of the open letters ``where`` selects (and its audit record); its id."""
    total = matching(conn, where)
    if total == 0:
        raise actions.ActionError("no open dead letter matches")
    record = actions.record(conn, said, "dlq.replay-job", {"letters": total})
    params = {"audit_id": record.id, "filter": Jsonb(where.described()), "total": total}
    row = conn.execute(_QUERIES["replay_job_start"], params).fetchone()
    conn.commit()
    assert row is not None
    return int(str(row["id"]))


def cancel(conn: Conn, job_id: int, said: actions.Said) -> bool:
    """Cancel a running job (recorded); True when it was running."""
    actions.record(conn, said, "dlq.replay-job-cancel", {"job": job_id})
    cancelled = conn.execute(_QUERIES["replay_job_cancel"], {"id": job_id}).fetchone() is not None
    conn.commit()
    return cancelled


def recent(conn: Conn, limit: int = 20) -> list[dict[str, Any]]:
    """The latest jobs with their progress, newest first."""
    return list(conn.execute(_QUERIES["replay_job_recent"], {"limit": limit}).fetchall())


class ReplayJobs:
    """One relay's share of the replay jobs: each turn takes one running job and replays its next letters."""

    def __init__(self, settings: Settings, pool: ConnectionPool[Conn], *, per_turn: int) -> None:
        self._settings = settings
        self._pool = pool
        self._per_turn = max(1, per_turn)

    def refresh(self) -> None:
        """One turn (the name :func:`pin.outbox.gauges.refresh_in_background` calls)."""
        self.run_once()

    def run_once(self) -> dict[str, int]:
        """Replay the next letters of one running job (at most ``per_turn``); its counts (empty: no job)."""
        with self._pool.connection() as conn, conn.transaction():
            job = conn.execute(_QUERIES["replay_job_claim"]).fetchone()
            if job is None:
                return {}
            recorded = job["filter"]
            assert isinstance(recorded, dict)
            where = filter_of(recorded)
            rows = index.page(conn, where, before=None, limit=self._per_turn)
            letters = [full for row in rows if (full := index.one(conn, int(row["id"]))) is not None]
            preview = actions.preview_group(conn, letters)
            try:
                if letters:
                    actions.publish(self._settings, letters)
            except actions.ActionError as exc:
                conn.execute(_QUERIES["replay_job_fail"], {"id": job["id"], "error": str(exc)})
                return {"failed": len(letters)}
            ids = [int(letter["id"]) for letter in letters]
            index.resolve(conn, ids, resolution=index.REPLAYED, audit_id=int(str(job["audit_id"])))
            counts = {**preview.counts(), "replayed": len(letters)}
            progress = {"id": job["id"], "finished": not letters, **{k: counts[k] for k in ("apply", "skip", "refuse")}}
            conn.execute(_QUERIES["replay_job_progress"], {**progress, "replayed": len(letters)})
            return counts
