"""The bench's same-statements baseline sends what the runtime sends: replayed, its statements leave the same tables.

``bench.consume_proc same`` records each message's statements from the group's handler alone, then merges the
set-based ones over a batch. On a batch like the bench's (one partition, distinct keys), replaying that on a real
PostgreSQL must leave exactly the tables and inbox the runtime leaves: otherwise the baseline measures other work.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from bench.consume_proc import record_one, send_batch

from pin.consumer_groups import build_runtime, routes_of
from pin.messaging import topics
from pin.messaging.envelope import decode_message
from tests.consumers.support import cancelled, purchase, rows
from tests.consumers.test_batch_equivalence_random import INBOX, SNAPSHOTS, TABLES, _freeze, _received

pytestmark = pytest.mark.integration


def _bench_like(topic: str, n: int) -> list[dict[str, Any]]:
    """Messages like the bench's: an expired appointment each, or a purchase with 1 to 3 targets each."""
    tenant = uuid.uuid4()
    if topic == topics.APPOINTMENT_CANCELLED:
        return [cancelled(tenant=tenant, agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired") for _ in range(n)]
    kinds = ["Project", "PropertyObject", "Post"]
    return [
        purchase(tenant=tenant, purchase_id=uuid.uuid4(),
                 targets=[(kinds[(i + j) % 3], uuid.uuid4()) for j in range(1 + i % 3)])
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("group", "topic"),
    [("crm", topics.APPOINTMENT_CANCELLED), ("notifications", topics.APPOINTMENT_CANCELLED),
     ("catalog", topics.PURCHASE_CHANGED), ("news", topics.PURCHASE_CHANGED)],
)  # fmt: skip
def test_the_recorded_statements_leave_what_the_runtime_leaves(group, topic, make_settings, pool):
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: no broker is needed here
    batch = _received(topic, _bench_like(topic, 25), 0)
    endings = []
    for replayed in (False, True):
        with pool.connection() as conn:
            conn.execute(f"TRUNCATE {TABLES[group]}, messaging.inbox")
        if replayed:
            route = routes_of(group)[topic]
            decoded = [decode_message(message, route, 1 << 20) for message in batch]
            with pool.connection() as conn:
                recorded = [record_one(conn, route, d, group=group) for d in decoded]
                ids, occurred = [d.envelope.message_id for d in decoded], [d.envelope.occurred_at for d in decoded]
                send_batch(conn, group, batch, ids, recorded, occurred_at=occurred)
        else:
            build_runtime(group, settings, pool)._process(batch, attempts=1)
        endings.append(([_freeze(rows(pool, sql)) for sql in SNAPSHOTS[group]], _freeze(rows(pool, INBOX, group))))
    assert endings[0] == endings[1]
    assert all(endings[0][0])
    assert len(endings[0][1]) == len(batch)
