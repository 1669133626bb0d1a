"""A role's pool is back within seconds of its PostgreSQL, however long the server was away: a real server stopped
for longer than psycopg_pool's retries would otherwise wait between two tries, then started again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool, PoolTimeout

from pin.db import POOL_RECONNECT_TIMEOUT_SECONDS, Conn, create_pool, default_policy
from pin.local.embedded.postgres import EmbeddedPostgres

# Down for this long, psycopg_pool's own retries (1, 3, 7, 15, 31 s after the loss) would try next at about 31 s:
# some 15 s after the server is back. With the bound, tries are at most 4 s apart.
DOWN_SECONDS = 16.0
BACK_WITHIN_SECONDS = 6.0


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    """A server of this test's own: it is stopped and started again."""
    postgres = EmbeddedPostgres(tmp_path / "pg")
    postgres.start()
    yield postgres
    postgres.destroy()


def _connected(pool: ConnectionPool[Conn], timeout: float) -> bool:
    try:
        with pool.connection(timeout=timeout) as conn:
            conn.execute("SELECT 1")
        return True
    except (PoolTimeout, psycopg.OperationalError):
        return False


@pytest.mark.integration
@pytest.mark.slow
def test_a_pool_reconnects_within_seconds_of_a_long_outage(own_postgres: EmbeddedPostgres) -> None:
    assert POOL_RECONNECT_TIMEOUT_SECONDS <= 10.0  # the bound the gap between two tries follows from
    pool = create_pool(own_postgres.url, min_size=1, max_size=3, name="reconnect", policy=default_policy("worker"))
    try:
        assert _connected(pool, 10.0)
        own_postgres.stop("fast")
        went = time.monotonic()
        while time.monotonic() - went < DOWN_SECONDS:  # a role asking for its connection all along, as the loops do
            assert not _connected(pool, 1.0)
            time.sleep(0.5)
        own_postgres.restart("fast")
        back = time.monotonic()
        while not _connected(pool, 1.0):
            assert time.monotonic() - back < 60, "the pool never reconnected"
            time.sleep(0.2)
        waited = time.monotonic() - back
        assert waited < BACK_WITHIN_SECONDS, f"the pool reconnected {waited:.1f} s after the server was back"
    finally:
        pool.close()
