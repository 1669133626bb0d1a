"""Settles a produced batch in one transaction: deletes the acknowledged rows, backs off or dead-letters the failed."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

import structlog
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from pin.backoff import exponential_backoff
from pin.cancellation import Canceller, Cause, Watch
from pin.db import Conn
from pin.outbox.relay import metrics, queries
from pin.outbox.relay.batch import Batch, PendingRow, RelayCounts
from pin.outbox.relay.config import RelayConfig
from pin.outbox.relay.errors import SendError

log = structlog.get_logger(__name__)


class Settler:
    """Writes a batch's outcomes: acknowledged rows deleted (never fenced: the broker has them), failed rows
    marked or dead-lettered (fenced: only while the lease they were read under is still ours)."""

    def __init__(
        self, pool: ConnectionPool[Conn], owner: str, config: RelayConfig, canceller: Canceller | None = None
    ) -> None:
        self._pool = pool
        self._owner = owner
        self._config = config
        self._canceller = canceller if canceller is not None else Canceller()  # a stop cancels the settle in flight

    def settle(self, batch: Batch) -> RelayCounts:
        """Delete the batch's acknowledged rows, mark or dead-letter its failed ones; its counters."""
        published, dead_lettered = self._write(batch.acked, batch.failures, batch.positions)
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

    def _write(
        self,
        acked: Sequence[PendingRow],
        failures: Sequence[tuple[PendingRow, SendError]],
        positions: Mapping[int, tuple[int, int]],
    ) -> tuple[int, int]:
        """One transaction: delete the acknowledged rows and record where the broker acknowledged them (one
        statement), mark or dead-letter the failed ones.

        A stop cancels it where it waits (a row another transaction holds): it rolls back whole, and then the
        acknowledged rows no other transaction holds are deleted without waiting; the held ones, and the failed
        rows' attempts, are left as they were (those rows are sent again, and deduplicated downstream).
        """
        watch: Watch | None = None
        with self._pool.connection() as conn:
            try:
                with self._canceller.watch(conn) as watch:
                    return self._write_on(conn, acked, failures, positions)
            except Exception as exc:
                if watch is None or watch.cancelled(exc) is not Cause.STOP:
                    raise
                conn.rollback()
                published = self._delete_published(conn, acked, positions, queries.OUTBOX_DELETE_PUBLISHED_FREE)
                log.warning(
                    "outbox relay stopping: the settle in flight was cancelled and rolled back; the acknowledged rows"
                    " no other transaction holds are deleted, the others are sent again",
                    acknowledged=len(acked), deleted=published, held=len(acked) - published,
                    failures_not_recorded=len(failures),
                )  # fmt: skip
                return published, 0

    def _write_on(
        self,
        conn: Conn,
        acked: Sequence[PendingRow],
        failures: Sequence[tuple[PendingRow, SendError]],
        positions: Mapping[int, tuple[int, int]],
    ) -> tuple[int, int]:
        dead_lettered = 0
        published = self._delete_published(conn, acked, positions, queries.OUTBOX_DELETE_PUBLISHED) if acked else 0
        for row, error in failures:
            dead_lettered += self._record_failure(conn, row, error)
        return published, dead_lettered

    def _delete_published(
        self, conn: Conn, acked: Sequence[PendingRow], positions: Mapping[int, tuple[int, int]], query: LiteralString
    ) -> int:
        """Delete acknowledged rows with ``query``, marking where the broker acknowledged them; count them per topic,
        with their commit -> delete latencies."""
        params = {"ids": queries.id_array([row.id for row in acked]), **_acked_positions(acked, positions)}
        with conn.cursor(row_factory=tuple_row) as cur:
            records = cur.execute(query, params).fetchall()
        per_topic = Counter(topic for topic, _latency in records)
        for topic, count in per_topic.items():
            metrics.PUBLISHED.labels(topic=topic).inc(count)
        metrics.observe_publish_latencies([latency if latency > 0.0 else 0.0 for _topic, latency in records])
        return len(records)

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


def _acked_positions(acked: Sequence[PendingRow], positions: Mapping[int, tuple[int, int]]) -> dict[str, list[Any]]:
    """Per topic and partition, the highest offset the broker acknowledged in this batch, as the delete's arrays
    (outbox.acked_position: what waits for each consumer group is read against it, docs/design/consumer-waits.md)."""
    highest: dict[tuple[str, int], int] = {}
    for row in acked:
        partition, offset = positions.get(row.id, (0, -1))
        if offset >= 0:  # a report without an offset (none seen, but librdkafka allows it) marks nothing
            place = (row.topic, partition)
            highest[place] = max(offset, highest.get(place, -1))
    return {
        "topics": [topic for topic, _ in highest],
        "partitions": [partition for _, partition in highest],
        "offsets": list(highest.values()),
    }
