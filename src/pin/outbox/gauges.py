"""The outbox's backlog, lag and dead-letter gauges: read every few seconds, never once per scrape.

They describe the whole table, so every process that refreshes them reports the same values (the rules take the
``max``). The relay refreshes them on a thread of their own (:func:`refresh_in_background`); the workers refresh
them too, so that the backlog and lag alerts still see the outbox while no relay runs (exactly when they matter).
"""

from __future__ import annotations

import threading
from typing import Protocol

import structlog
from psycopg_pool import ConnectionPool

from pin.db import Conn, load_queries
from pin.messaging.topics import INTEGRATION_TOPICS
from pin.outbox import metrics
from pin.outbox.floors import FLOORS, PLAN_BY_INDEX

log = structlog.get_logger(__name__)

_QUERIES = load_queries(__package__, "gauges.sql")
OUTBOX_BACKLOG_BY_TOPIC = _QUERIES["outbox_backlog_by_topic"].format(**FLOORS)
DEAD_LETTER_COUNT = _QUERIES["dead_letter_count"]


class OutboxGauges:
    """Refreshes the outbox gauges of this process from the table."""

    def __init__(self, pool: ConnectionPool[Conn], dead_letter_count_cap: int) -> None:
        self._pool = pool
        self._cap = {"cap": dead_letter_count_cap}
        self._seen_topics: set[str] = set(INTEGRATION_TOPICS)

    def refresh(self) -> None:
        """Backlog and lag per topic, exact (every waiting row, past the floors), and dead letters (up to the cap)."""
        with self._pool.connection() as conn:
            conn.execute(PLAN_BY_INDEX)
            waiting = {str(r["topic"]): r for r in conn.execute(OUTBOX_BACKLOG_BY_TOPIC)}
            dead = conn.execute(DEAD_LETTER_COUNT, self._cap).fetchone()
        self._seen_topics |= set(waiting)
        for topic in self._seen_topics:  # a topic that emptied reports 0, not its last value
            row = waiting.get(topic)
            metrics.BACKLOG.labels(topic=topic).set(int(str(row["rows"])) if row else 0)
            metrics.LAG.labels(topic=topic).set(max(0.0, float(str(row["age"]))) if row else 0.0)
        metrics.DEAD_LETTERS.set(int(str(dead["rows"])) if dead else 0)


class Refreshing(Protocol):
    """Gauges that read their values when told to."""

    def refresh(self) -> None:
        """Read and set the values; raises when a source fails."""


def refresh_in_background(
    gauges: Refreshing, interval_seconds: float, stop: threading.Event, name: str = "outbox-gauges"
) -> threading.Thread:
    """Refresh ``gauges`` now and then every ``interval_seconds`` in a daemon thread, until ``stop`` is set; a
    failed refresh (the database or broker away) is logged and tried again at the next interval."""

    def _loop() -> None:
        while not stop.is_set():
            try:
                gauges.refresh()
            except Exception as exc:  # noqa: BLE001 - a database outage must not end the refreshes
                log.warning("gauges refresh failed", gauges=name, error_type=type(exc).__name__)
            stop.wait(interval_seconds)

    thread = threading.Thread(target=_loop, name=name, daemon=True)
    thread.start()
    return thread
