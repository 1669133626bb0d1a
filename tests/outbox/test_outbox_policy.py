"""The outbox policy reaches the unit of work from the composition root: a real `pin worker` process writes as its
PIN_OUTBOX_MODE says (no global of the writer decides it any more; docs/architecture.md, "Layers inside a context")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from tests.calendar.worker.factory import outbox_rows, seed_appointments, statuses
from tests.support.processes import RoleProcess

pytestmark = pytest.mark.integration

CANCELLED = "pin.calendar.appointment-cancelled"  # the event type every expiry writes, keyed by the appointment


@pytest.mark.parametrize("mode", ["relay", "cdc"])
def test_a_worker_process_writes_its_rows_as_its_outbox_mode_says(
    spawn_role: Callable[..., RoleProcess], pool: ConnectionPool[Conn], mode: str
) -> None:
    clusters = seed_appointments(pool, 3)  # due now
    worker = spawn_role("worker", "appointment-timeout", "--once", env={"PIN_OUTBOX_MODE": mode})
    assert worker.wait(60) == 0, worker.output()

    ids = [c.appointment_id for c in clusters]
    assert statuses(pool, "appointment", ids) == ["Expired"] * 3
    # relay mode: every expiry's rows wait for the relay; cdc mode: each transaction deleted what it inserted (the
    # WAL keeps the inserts for Debezium), so nothing is left
    assert sorted(row["message_key"] for row in outbox_rows(pool, CANCELLED)) == (
        sorted(str(i) for i in ids) if mode == "relay" else []
    )
    assert (outbox_rows(pool) == []) is (mode == "cdc")
