"""The one rule for row-lock waits of the API: a bounded wait, then a 409.

Every session of the API's pool starts with ``lock_timeout`` = PIN_API_LOCK_TIMEOUT_SECONDS (set when the pool
opens the connection), so every statement of every route waits at most that long for a row or table lock another
transaction holds; PostgreSQL then raises ``LockNotAvailable`` (55P03), which the API's one error mapping answers
with a 409 problem document. A transaction that needs another bound overrides it for itself only
(:func:`transaction_lock_timeout`, ``SET LOCAL``): the pooled session keeps the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import LiteralString

from pin.db import Conn

_SESSION: LiteralString = "SELECT set_config('lock_timeout', %s, false)"
_TRANSACTION: LiteralString = "SELECT set_config('lock_timeout', %s, true)"


def lock_timeout_value(seconds: float) -> str:
    """``seconds`` as a lock_timeout value; at least 1 ms (0 would mean no limit)."""
    return f"{max(1, round(seconds * 1000))}ms"


def session_lock_timeout(seconds: float) -> Callable[[Conn], None]:
    """A pool's ``configure`` callback that sets the session's lock_timeout once per connection."""

    def configure(conn: Conn) -> None:
        conn.execute(_SESSION, (lock_timeout_value(seconds),))
        conn.commit()  # the pool wants the connection idle; the session setting outlives the commit

    return configure


def transaction_lock_timeout(conn: Conn, seconds: float) -> None:
    """Override the lock wait for the rest of ``conn``'s current transaction only."""
    conn.execute(_TRANSACTION, (lock_timeout_value(seconds),))
