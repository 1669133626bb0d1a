"""The backlog, lag and dead-letter gauges: bounded queries every few seconds, never one per scrape."""

from __future__ import annotations

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.topics import INTEGRATION_TOPICS
from pin.outbox import metrics
from pin.outbox.relay import queries


class Gauges:
    """Refreshes the outbox gauges (they describe the whole table, the same from every instance)."""

    def __init__(self, pool: ConnectionPool[Conn], backlog_count_cap: int) -> None:
        self._pool = pool
        self._cap = {"cap": backlog_count_cap}
        self._seen_topics: set[str] = set(INTEGRATION_TOPICS)

    def refresh(self) -> None:
        """Backlog per topic, lag and dead letters, one bounded query each."""
        with self._pool.connection() as conn:
            backlog = {
                str(r["topic"]): int(str(r["rows"])) for r in conn.execute(queries.OUTBOX_COUNT_BACKLOG, self._cap)
            }
            oldest = conn.execute(queries.OUTBOX_OLDEST_AGE).fetchone()
            dead = conn.execute(queries.DEAD_LETTER_COUNT, self._cap).fetchone()
        self._seen_topics |= set(backlog)
        for topic in self._seen_topics:  # a topic that emptied reports 0, not its last value
            metrics.BACKLOG.labels(topic=topic).set(backlog.get(topic, 0))
        metrics.LAG.set(max(0.0, float(str(oldest["age"]))) if oldest else 0.0)
        metrics.DEAD_LETTERS.set(int(str(dead["rows"])) if dead else 0)
