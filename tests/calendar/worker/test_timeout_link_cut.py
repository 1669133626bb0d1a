"""appointment-timeout across a network that drops packets: a worker in a network namespace is cut off from
PostgreSQL in the middle of an item (tests/support/netns.py). The server releases the item's locks within the
stated bound, a second worker expires it, the first resumes once the link is back, every appointment is expired
exactly once, and a SIGTERM reaches the worker while it is blocked on the dead connection."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn, create_pool, server_release_bound_seconds
from tests.calendar.worker.factory import db_now, outbox_rows, rows_by_id, seed_appointments, slow_expiry
from tests.calendar.worker.test_timeout_processes import count_status, events_of, wait_for
from tests.support.netns import DEAD_PEER_ENV, CutOffLab, settings_of
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("netns")]

WORKER = ("worker", "appointment-timeout")
CANCELLED = "pin.calendar.appointment-cancelled"

# The cut-off worker's dead-peer settings: the production settings, shortened so that the test takes seconds.
CUT_OFF_ENV = {
    **DEAD_PEER_ENV,
    "PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": "1",
    "PIN_WORKER_STATEMENT_TIMEOUT_MS": "2000",
    "PIN_STOP_TIMEOUT_SECONDS": "4",
}
SETTINGS = settings_of(CUT_OFF_ENV)
# what docs/operations.md states: the server ends a cut-off session's transaction within this
RELEASE_BOUND = server_release_bound_seconds(SETTINGS, "worker")


@pytest.fixture
def cut_pool(cut_database_url: str) -> Iterator[ConnectionPool[Conn]]:
    """The test's own pool on the namespace's server (local to the host: never cut)."""
    pool = create_pool(cut_database_url, min_size=1, max_size=4, name="test-cut")
    yield pool
    pool.close()


def held_by(pool: ConnectionPool[Conn], address: str) -> int:
    """How many locks (other than their own transaction ids) the sessions from ``address`` hold."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE a.client_addr = %s::inet AND l.locktype NOT IN ('virtualxid', 'transactionid')",
            (address,),
        ).fetchone()
    assert row is not None
    return int(row["n"])  # type: ignore[call-overload]


def cut_while_holding_locks(netns_lab: CutOffLab, pool: ConnectionPool[Conn]) -> float:
    """Cut the link at a moment the worker's session holds an item's locks; returns the time of the cut."""
    namespace = netns_lab.namespace
    for _ in range(50):
        wait_for(lambda: held_by(pool, namespace.role_address) > 0, 10, "the worker to hold an item's locks")
        namespace.cut()
        cut_at = time.monotonic()
        if held_by(pool, namespace.role_address) > 0:
            return cut_at
        namespace.restore()  # between two items: try again
    raise AssertionError("never cut the link while the worker held locks")


def test_a_worker_cut_off_mid_item_loses_its_locks_within_the_bound_and_resumes(
    netns_lab: CutOffLab,
    cut_database_url: str,
    cut_pool: ConnectionPool[Conn],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    namespace = netns_lab.namespace
    env = {**CUT_OFF_ENV, "PIN_DATABASE_URL": cut_database_url}
    clusters = seed_appointments(cut_pool, 40)
    slow_expiry(cut_pool, 0.3)  # each item holds its locks 300 ms: the cut lands inside one
    cut_off = spawn_role(*WORKER, env=env, prefix=tuple(namespace.command([])))
    wait_for(lambda: count_status(cut_pool, "Expired") >= 3, 30, "the cut-off worker to be under way")

    cut_at = cut_while_holding_locks(netns_lab, cut_pool)
    survivor = spawn_role(*WORKER, env=env)  # on the host: its link is never cut
    wait_for(lambda: held_by(cut_pool, namespace.role_address) == 0, RELEASE_BOUND + 5, "the server to end it")
    released_after = time.monotonic() - cut_at
    wait_for(lambda: count_status(cut_pool, "Expired") == 40, 30, "the survivor to expire the rest")
    namespace.restore()
    restored_at = time.monotonic()

    assert survivor.terminate() == 0
    late = seed_appointments(cut_pool, 3, pending_expires_at=db_now(cut_pool) + timedelta(seconds=1))
    wait_for(lambda: count_status(cut_pool, "Expired") == 43, 40, "the cut-off worker to resume")
    resumed_after = time.monotonic() - restored_at
    print(f"worker: locks released {released_after:.1f} s after the cut; work resumed {resumed_after:.1f} s after")
    assert released_after <= RELEASE_BOUND + 1.0  # + the sampling and the server's timer granularity

    ids = [c.appointment_id for c in [*clusters, *late]]
    assert {row["version"] for row in rows_by_id(cut_pool, "appointment", ids).values()} == {2}  # expired once
    cancelled = Counter(row["message_key"] for row in outbox_rows(cut_pool, CANCELLED))
    assert cancelled == Counter({str(i): 1 for i in ids})
    assert events_of(cut_off, "database unreachable; waiting")  # it noticed, said so in one line, and carried on

    # a stop reaches the worker while it is blocked on the dead connection
    namespace.cut()
    time.sleep(1.5)  # its next poll is in flight and unanswered
    stopped_at = time.monotonic()
    cut_off.process.send_signal(signal.SIGTERM)
    cut_off.wait(SETTINGS.stop_timeout_seconds + 10)
    stopped_after = time.monotonic() - stopped_at
    namespace.restore()
    print(f"worker: stopped {stopped_after:.1f} s after SIGTERM while cut off")
    assert stopped_after <= SETTINGS.stop_timeout_seconds + 1.0
