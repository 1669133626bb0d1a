"""Real lock contention for tests: a row a test's session holds, a trigger that waits for it, and deadlocks.

``install_blocker`` creates ``public.test_blocker`` (one row) and a trigger function ``public.test_wait_for_blocker``
that locks that row; attach it to the table whose write should wait. ``provoke_deadlocks`` holds the row, waits
until another session is blocked on it, then asks for a lock that session holds: the two deadlock, and the other
session (its ``deadlock_timeout`` runs out first) is the one PostgreSQL aborts with 40P01.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import psycopg

from pin.db import connect

T = TypeVar("T")

# What the trigger does before the write goes on; %s is filled by install_blocker (a lock_timeout, or nothing).
_WAIT_FUNCTION = """
CREATE FUNCTION public.test_wait_for_blocker() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {lock_timeout}
    PERFORM 1 FROM public.test_blocker WHERE id = 1 FOR UPDATE;
    RETURN NEW;
END $$;
"""
# Our session's deadlock_timeout: far longer than the other session's (1 s by default), so the other one checks
# first and is the victim; were our session late to wait, it would be the victim itself after this long.
_OUR_DEADLOCK_TIMEOUT = "5s"


def install_blocker(database_url: str, *, table: str, when: str = "true", lock_timeout_ms: int | None = None) -> None:
    """The blocker row, and a BEFORE INSERT OR UPDATE trigger on ``table`` (rows matching ``when``) that locks it."""
    set_timeout = "" if lock_timeout_ms is None else f"PERFORM set_config('lock_timeout', '{lock_timeout_ms}ms', true);"
    with connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.test_blocker (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO public.test_blocker VALUES (1)")
        conn.execute(_WAIT_FUNCTION.format(lock_timeout=set_timeout))  # type: ignore[arg-type]
        conn.execute(
            f"CREATE TRIGGER test_wait_for_blocker BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW"  # type: ignore[arg-type]
            f" WHEN ({when}) EXECUTE FUNCTION public.test_wait_for_blocker()"
        )


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


def wait_for_waiter(holder: psycopg.Connection[dict[str, object]], *, timeout: float = 15.0) -> int:
    """The pid of a session blocked on a lock ``holder`` holds (polled; no fixed sleep)."""
    pid = holder.info.backend_pid
    deadline = time.monotonic() + timeout
    with connect(holder.info.dsn, autocommit=True) as probe:
        while time.monotonic() < deadline:
            row = probe.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid)) LIMIT 1", (pid,)
            ).fetchone()
            if row is not None:
                return int(row["pid"])  # type: ignore[call-overload]
            time.sleep(0.005)
    raise AssertionError(f"no session waited for the blocker within {timeout} s")


def provoke_deadlocks(
    database_url: str,
    close_cycle_sql: str,
    params: Sequence[object],
    *,
    times: int = 1,
    timeout: float = 15.0,
    held: psycopg.Connection[dict[str, object]] | None = None,
) -> list[int]:
    """``times`` deadlocks in a row with whichever session waits for the blocker; the victims' pids.

    Each round holds the blocker, waits for a session to block on it, then runs ``close_cycle_sql`` (a statement
    that waits for a lock that session holds). The other session is aborted (deadlock detected); ours then gets its
    lock and rolls back, releasing both. After the last round the blocker is free. ``held``: the first round's
    holder, taken by the caller before it set the other session going.
    """
    victims = []
    for round_ in range(times):
        holder = held if round_ == 0 and held is not None else hold_blocker(database_url)
        try:
            victims.append(wait_for_waiter(holder, timeout=timeout))
            holder.execute(close_cycle_sql, params)  # type: ignore[arg-type]  # returns once the victim rolled back
        finally:
            holder.rollback()
            holder.close()
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
