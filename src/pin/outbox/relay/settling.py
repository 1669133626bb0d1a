"""Settles a produced batch in one transaction: deletes the acknowledged rows, backs off or dead-letters the failed."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence

import structlog
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from pin.backoff import exponential_backoff
from pin.db import Conn
from pin.outbox.relay import metrics, queries
from pin.outbox.relay.batch import Batch, PendingRow, RelayCounts
from pin.outbox.relay.config import RelayConfig
from pin.outbox.relay.errors import SendError

log = structlog.get_logger(__name__)


class Settler:
    """Writes a batch's outcomes: acknowledged rows deleted (never fenced: the broker has them), failed rows
    marked or dead-lettered (fenced: only while the lease they were read under is still ours)."""

    def __init__(self, pool: ConnectionPool[Conn], owner: str, config: RelayConfig) -> None:
        self._pool = pool
        self._owner = owner
        self._config = config

    def settle(self, batch: Batch) -> RelayCounts:
        """Delete the batch's acknowledged rows, mark or dead-letter its failed ones; its counters."""
        published, dead_lettered = self._write(batch.acked, batch.failures)
        cycle = RelayCounts(
            published=published,
            failed=len(batch.failures),
            dead_lettered=dead_lettered,
            held_back=batch.unsent,
            settled=len(batch.rows),
        )
        log.info(
            "outbox batch published",
            count=published,
            vparts=sorted({row.vpart for row in batch.rows}),
            failed=cycle.failed,
            dead_lettered=dead_lettered,
            held_back=batch.unsent,
            duration_ms=round((time.monotonic() - batch.started) * 1000),
        )
        return cycle

    def _write(self, acked: Sequence[PendingRow], failures: Sequence[tuple[PendingRow, SendError]]) -> tuple[int, int]:
        """One transaction: delete the acknowledged rows (one statement), mark or dead-letter the failed ones."""
        dead_lettered = 0
        published = 0
        with self._pool.connection() as conn:
            if acked:
                with conn.cursor(row_factory=tuple_row) as cur:
                    ids = queries.id_array([row.id for row in acked])
                    records = cur.execute(queries.OUTBOX_DELETE_PUBLISHED, {"ids": ids}).fetchall()
                per_topic = Counter(topic for topic, _latency in records)
                for topic, count in per_topic.items():
                    metrics.PUBLISHED.labels(topic=topic).inc(count)
                metrics.observe_publish_latencies([latency if latency > 0.0 else 0.0 for _topic, latency in records])
                published = len(records)
            for row, error in failures:
                dead_lettered += self._record_failure(conn, row, error)
        return published, dead_lettered

    def _record_failure(self, conn: Conn, row: PendingRow, error: SendError) -> int:
        """Back off a failed row, or dead-letter it; returns 1 when it was dead-lettered."""
        metrics.PUBLISH_ERRORS.labels(topic=row.topic).inc()
        attempts = row.attempts + 1
        log.warning(
            "outbox send failed",
            message_id=str(row.message_id),
            topic=row.topic,
            error=error.text(),
            attempts=attempts,
        )
        fence = {"id": row.id, "owner": self._owner, "epoch": row.epoch, "error": error.text()}
        exhausted = not error.retriable and attempts >= self._config.max_attempts
        if error.permanent or exhausted:
            moved = conn.execute(queries.OUTBOX_DEAD_LETTER, {**fence, "permanent": error.permanent}).fetchone()
            if moved is None:
                return 0  # the lease moved on: its new owner decides
            metrics.DEAD_LETTERED.labels(topic=row.topic).inc()
            log.error(
                "outbox message dead-lettered",
                message_id=str(row.message_id),
                topic=row.topic,
                vpart=row.vpart,
                error=error.text(),
                permanent=error.permanent,
                attempts=attempts,
            )
            return 1
        conn.execute(queries.OUTBOX_MARK_FAILED, {**fence, "delay": self._backoff_seconds(attempts)})
        return 0

    def _backoff_seconds(self, attempts: int) -> float:
        config = self._config
        delay = exponential_backoff(attempts, base=config.backoff_base_seconds, cap=config.backoff_max_seconds)
        return delay * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not cryptography
