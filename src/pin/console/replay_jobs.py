"""Replays larger than a page (a consumer group's dead letters, or the relay's): recorded in
``operations.replay_job`` when an operator starts one, carried out by
every running relay (:class:`ReplayJobs`, one turn a second) at most ``PIN_CONSOLE_REPLAY_RATE`` letters a second
in all, newest letters first, with their progress and a cancel. 100,000 letters never hold an HTTP request, and
never starve live traffic: a turn takes one job (``SKIP LOCKED``), so the rate is per job and relay instance."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pin.console import actions, pages
from pin.db import Conn, load_queries
from pin.messaging.consumer.dead_letters import index
from pin.outbox import dead_letters as relay_letters
from pin.outbox.writer import OutboxMode
from pin.settings import Settings

_QUERIES = load_queries(__package__)
_RELAY_COUNT = _QUERIES["replay_job_count_relay"].format(letters=_QUERIES["console_relay_dead_letters"])


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


def matching(conn: Conn, where: index.LetterFilter, *, kind: str = actions.GROUP) -> int:
    """How many open letters ``where`` selects, a group's or (``kind`` relay) the relay's (stops at 1,000,001)."""
    if kind == actions.RELAY:
        params = {**pages.RelayFilter.of(where).params(), "before": None, "limit": 1_000_001}
        row = conn.execute(_RELAY_COUNT, params).fetchone()
    else:
        row = conn.execute(_QUERIES["replay_job_count"], where.params()).fetchone()
    return int(str(row["letters"])) if row else 0


def start(conn: Conn, where: index.LetterFilter, said: actions.Said, *, kind: str = actions.GROUP) -> int:
    """Record a replay job of the open letters ``where`` selects, a group's or (``kind`` relay) the relay's, and its
    audit record; its id."""
    total = matching(conn, where, kind=kind)
    if total == 0:
        raise actions.ActionError("no open dead letter matches")
    action = "outbox.replay-job" if kind == actions.RELAY else "dlq.replay-job"
    record = actions.record(conn, said, action, {"letters": total})
    described = where.described() | ({"kind": actions.RELAY} if kind == actions.RELAY else {})
    params = {"audit_id": record.id, "filter": Jsonb(described), "total": total}
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
            if recorded.get("kind") == actions.RELAY:
                return self._relay_turn(conn, int(str(job["id"])), where)
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

    def _relay_turn(self, conn: Conn, job_id: int, where: index.LetterFilter) -> dict[str, int]:
        """The relay's next letters of the job (newest first) back into the outbox, each at the head of its key, in
        the turn's transaction; a letter never reached a consumer, so each counts as applied."""
        mode = OutboxMode(self._settings.outbox_mode)  # in cdc mode the replayed rows are captured too
        letters = pages.relay_dead_letters(conn, pages.RelayFilter.of(where), before=None, limit=self._per_turn).rows
        for letter in letters:
            relay_letters.put_back(conn, letter["message_id"], str(letter["topic"]), mode=mode)
        progress = {"id": job_id, "finished": not letters, "apply": len(letters), "skip": 0, "refuse": 0}
        conn.execute(_QUERIES["replay_job_progress"], {**progress, "replayed": len(letters)})
        return {"letters": len(letters), "apply": len(letters), "skip": 0, "refuse": 0, "replayed": len(letters)}
