"""Real lock contention for tests: a row a test's session holds, a trigger that waits for it, and deadlocks.

``install_blocker`` creates ``public.test_blocker`` (one row) and a trigger function that locks that row, on the
table whose write should wait. ``hold_blocker`` holds it (a lock timeout, or a wait). ``arm_deadlocks`` then
``provoke_deadlocks`` make real deadlocks, in an order that leaves PostgreSQL one choice of victim: the trigger
first waits (polling) until the test's session is blocked on a lock the writer's transaction holds, and only then
asks for the blocker, which the test's session holds. The writer closes the cycle, its ``deadlock_timeout`` (1 s
by default) runs out long before the test session's (5 s), so the writer is the one aborted with 40P01.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import psycopg

from pin.db import connect

T = TypeVar("T")

# What the trigger does before the write goes on; {lock_timeout} is a set_config of lock_timeout, or nothing.
_WAIT_FUNCTION = """
CREATE FUNCTION public.test_wait_for_blocker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {lock_timeout}
    -- armed: wait until a session waits for a lock this transaction holds, so that this one closes the cycle
    -- (pg_locks is read afresh on every call; pg_stat_activity would be a snapshot kept for the transaction)
    WHILE (SELECT armed FROM public.test_deadlock_armed)
          AND NOT EXISTS (SELECT 1 FROM pg_locks AS l
                           WHERE NOT l.granted AND pg_backend_pid() = ANY (pg_blocking_pids(l.pid))) LOOP
        PERFORM pg_sleep(0.005);
    END LOOP;
    PERFORM 1 FROM public.test_blocker WHERE id = 1 FOR UPDATE;
    RETURN NEW;
END $$;
"""
# The test session's deadlock_timeout: far longer than the writer's, so the writer is always the victim.
_OUR_DEADLOCK_TIMEOUT = "5s"


def holding_connection(database_url: str) -> psycopg.Connection[dict[str, object]]:
    """A connection of the test's own that may hold a lock or a snapshot in an open transaction for as long as the
    test runs: without the policy's idle-in-transaction timeout (10 s), which a loaded machine outlasts while the
    role under test starts."""
    conn = connect(database_url)
    conn.execute("SET idle_in_transaction_session_timeout = 0")
    conn.commit()
    return conn


def install_blocker(database_url: str, *, table: str, when: str = "true", lock_timeout_ms: int | None = None) -> None:
    """The blocker row, and a BEFORE INSERT OR UPDATE trigger on ``table`` (rows matching ``when``) that locks it."""
    set_timeout = "" if lock_timeout_ms is None else f"PERFORM set_config('lock_timeout', '{lock_timeout_ms}ms', true);"
    with connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.test_blocker (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO public.test_blocker VALUES (1)")
        conn.execute("CREATE TABLE public.test_deadlock_armed (armed boolean NOT NULL)")
        conn.execute("INSERT INTO public.test_deadlock_armed VALUES (false)")
        conn.execute(_WAIT_FUNCTION.format(lock_timeout=set_timeout))  # type: ignore[arg-type]
        conn.execute(
            f"CREATE TRIGGER test_wait_for_blocker BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW"  # type: ignore[arg-type]
            f" WHEN ({when}) EXECUTE FUNCTION public.test_wait_for_blocker()"
        )


def _set_armed(database_url: str, armed: bool) -> None:
    with connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE public.test_deadlock_armed SET armed = %s", (armed,))


def arm_deadlocks(database_url: str) -> None:
    """From now on every write the trigger sees waits for the test session (see provoke_deadlocks)."""
    _set_armed(database_url, True)


def hold_blocker(database_url: str) -> psycopg.Connection[dict[str, object]]:
    """A session holding the blocker row until it rolls back (the caller closes it)."""
    conn = connect(database_url)
    try:
        conn.execute("SELECT set_config('deadlock_timeout', %s, false)", (_OUR_DEADLOCK_TIMEOUT,))
        conn.execute("SELECT 1 FROM public.test_blocker WHERE id = 1 FOR UPDATE")
    except BaseException:
        conn.close()
        raise
    return conn


def _wait_for_writer(holder: psycopg.Connection[dict[str, object]], *, timeout: float) -> int:
    """The pid of a session polling in the armed trigger (polled; no fixed sleep)."""
    deadline = time.monotonic() + timeout
    with connect(holder.info.dsn, autocommit=True) as probe:
        while time.monotonic() < deadline:
            row = probe.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"
                " AND query NOT ILIKE '%%pg_stat_activity%%' AND pid <> %s LIMIT 1",
                (holder.info.backend_pid,),
            ).fetchone()
            if row is not None:
                return int(row["pid"])  # type: ignore[call-overload]
            time.sleep(0.005)
    raise AssertionError(f"no session reached the armed trigger within {timeout} s")


def provoke_deadlocks(
    database_url: str, close_cycle_sql: str, params: Sequence[object], *, times: int = 1, timeout: float = 15.0
) -> list[int]:
    """``times`` deadlocks in a row with the writer the armed trigger holds back (arm_deadlocks first); the victims'
    pids. Disarmed at the end: the writer's next try goes through.

    Each round holds the blocker, waits for a writer to poll in the trigger, then runs ``close_cycle_sql`` (a
    statement that waits for a lock the writer's transaction holds): the writer stops polling, asks for the
    blocker and closes the cycle; it is aborted (deadlock detected), ours then gets its lock and rolls back.
    """
    victims = []
    try:
        for _ in range(times):
            holder = hold_blocker(database_url)
            try:
                victims.append(_wait_for_writer(holder, timeout=timeout))
                holder.execute(close_cycle_sql, params)  # type: ignore[arg-type]  # returns once the writer aborted
                if len(victims) == times:
                    _set_armed(database_url, False)  # before the blocker is free: the next try must not wait
            finally:
                holder.rollback()
                holder.close()
    finally:
        _set_armed(database_url, False)
    return victims


class Background(Generic[T]):
    """``function`` in a thread; ``result()`` waits for it and re-raises what it raised."""

    def __init__(self, function: Callable[[], T]) -> None:
        self._function = function
        self._outcome: list[T] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome.append(self._function())
        except BaseException as exc:
            self._error.append(exc)

    def result(self, timeout: float = 30.0) -> T:
        """The function's return value, once it returned (its exception, if it raised)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"the background function did not finish within {timeout} s")
        if self._error:
            raise self._error[0]
        return self._outcome[0]
