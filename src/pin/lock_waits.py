"""The one rule for row-lock waits of the API: a bounded wait, then a 409.

Every session of the API's pool starts with ``lock_timeout`` = PIN_API_LOCK_TIMEOUT_SECONDS (one of the API
role's session settings in :class:`pin.db.ConnectionPolicy`, SET when the pool opens the connection), so every
statement of every route waits at most that long for a row or table lock another transaction holds; PostgreSQL
then raises ``LockNotAvailable`` (55P03), which the API's one error mapping answers with a 409 problem document.
A transaction that needs another bound overrides it for itself only (:func:`transaction_lock_timeout`,
``SET LOCAL``): the pooled session keeps the rule.
"""

from __future__ import annotations

from typing import LiteralString

from pin.db import Conn, lock_timeout_value

_TRANSACTION: LiteralString = "SELECT set_config('lock_timeout', %s, true)"


def transaction_lock_timeout(conn: Conn, seconds: float) -> None:
    """Override the lock wait for the rest of ``conn``'s current transaction only."""
    conn.execute(_TRANSACTION, (lock_timeout_value(seconds),))
