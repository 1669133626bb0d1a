"""The outbox gauges every relay and worker serves (pin/outbox/gauges.py), read from a real PostgreSQL: backlog
and lag per topic (seed 000: the outbox lag of appointment-cancelled; seed 002: the publication lag of a topic),
back to 0 once a topic empties."""

from __future__ import annotations

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging import topics
from pin.outbox import metrics
from pin.outbox.gauges import OutboxGauges
from tests.outbox.support import TOPIC, event_row, insert_rows

pytestmark = pytest.mark.integration

CANCELLED = topics.APPOINTMENT_CANCELLED


def _gauge(gauge: object, **labels: str) -> float:
    value: float = gauge.labels(**labels)._value.get()  # type: ignore[attr-defined]
    return value


def test_backlog_and_lag_are_per_topic_and_fall_to_zero_when_a_topic_empties(
    database_url: str, pool: ConnectionPool[Conn]
) -> None:
    insert_rows(database_url, [event_row(f"k-{n}", 1) for n in range(5)])
    insert_rows(database_url, [event_row(f"c-{n}", 1) for n in range(3)])
    with pool.connection() as conn:  # the second rows as appointment-cancelled rows written 2 minutes ago
        conn.execute(
            "UPDATE outbox.message SET topic = %s, created_at = now() - interval '120 seconds'"
            " WHERE message_key LIKE 'c-%%'",
            (CANCELLED,),
        )
    gauges = OutboxGauges(pool, dead_letter_count_cap=100_000)

    gauges.refresh()
    assert _gauge(metrics.BACKLOG, topic=TOPIC) == 5
    assert _gauge(metrics.BACKLOG, topic=CANCELLED) == 3
    assert 120 <= _gauge(metrics.LAG, topic=CANCELLED) < 150  # the topic's own oldest row
    assert 0 <= _gauge(metrics.LAG, topic=TOPIC) < 30  # not the other topic's
    assert _gauge(metrics.LAG, topic=topics.PURCHASE_CHANGED) == 0  # nothing waits there

    with pool.connection() as conn:
        conn.execute("DELETE FROM outbox.message WHERE topic = %s", (CANCELLED,))
    gauges.refresh()
    assert _gauge(metrics.BACKLOG, topic=CANCELLED) == 0
    assert _gauge(metrics.LAG, topic=CANCELLED) == 0
    assert _gauge(metrics.BACKLOG, topic=TOPIC) == 5


def test_a_topic_behind_more_than_a_hundred_thousand_rows_of_others_is_counted(
    database_url: str, pool: ConnectionPool[Conn]
) -> None:
    """Exact at any backlog (issue 35, 3b): the gauges read every waiting row past the floors, so a topic whose rows
    are all younger than 100,001 rows of another still reads its count and its lag (it read 0 when the gauges
    counted over the oldest 100,000 rows)."""
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version,"
            " payload, value, occurred_at)"
            " SELECT gen_random_uuid(), g %% 64, %s, 'k-' || g, 'e', 1, '{}', '{}', now()"
            " FROM generate_series(1, 100001) g",
            (TOPIC,),
        )
    insert_rows(database_url, [event_row(f"c-{n}", 1) for n in range(3)])
    with pool.connection() as conn:
        conn.execute(
            "UPDATE outbox.message SET topic = %s, created_at = now() - interval '60 seconds'"
            " WHERE message_key LIKE 'c-%%'",
            (CANCELLED,),
        )
    OutboxGauges(pool, dead_letter_count_cap=100_000).refresh()
    assert _gauge(metrics.BACKLOG, topic=TOPIC) == 100_001
    assert _gauge(metrics.BACKLOG, topic=CANCELLED) == 3
    assert 60 <= _gauge(metrics.LAG, topic=CANCELLED) < 90
