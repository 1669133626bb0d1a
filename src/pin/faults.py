"""Whose fault a failure is: the item's (poison), a race lost (contended), or the database's (infrastructure).

The one classification both workers and the consumer runtime use (docs/design/poison-items.md), so they cannot
drift: appointment-timeout skips a contended item and ends the cycle on an infrastructure failure;
expire-promotions rolls its whole batch back on either; a consumer retries both without limit, and counts attempts
(towards the dead-letter topic) only for poison. A driver error is classified by its SQLSTATE class, whatever
psycopg class it arrives as.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Final

import psycopg
from psycopg_pool import PoolTimeout

from pin.domain_errors import Contended


class Fault(Enum):
    """The three outcomes of a failure."""

    # about the item or message itself: a domain guard, a check violation, bad data, a bug in its handling
    POISON = "poison"
    # another transaction held or changed what it needed (deadlock, serialization failure, lock timeout)
    CONTENDED = "contended"
    # about the server's or the connection's state: says nothing of the item (timeouts, resources, shutdown)
    INFRASTRUCTURE = "infrastructure"

    @property
    def transient(self) -> bool:
        """Whether trying again later, unchanged, can succeed: everything but poison."""
        return self is not Fault.POISON


# SQLSTATE classes (two first characters) and codes that are never about the item.
_CONTENDED_CLASSES: Final = frozenset({"40"})  # transaction rollback: 40001 serialization, 40P01 deadlock, ...
_CONTENDED_CODES: Final = frozenset({"55P03"})  # lock_not_available: a lock_timeout or NOWAIT
_INFRASTRUCTURE_CLASSES: Final = frozenset(
    {
        "08",  # connection exception
        "53",  # insufficient resources: disk full, out of memory, too many connections
        "57",  # operator intervention: 57014 query_canceled (statement timeout, pg_cancel_backend), 57P0x shutdown
        "58",  # system error: I/O error, a file missing
    }
)
_INFRASTRUCTURE_CODES: Final = frozenset(
    {
        "25006",  # read_only_sql_transaction: a standby after a failover
        "25P03",  # idle_in_transaction_session_timeout
        "25P04",  # transaction_timeout
        "55000",  # object_not_in_prerequisite_state: on connect, the database is not accepting connections
    }
)


def sqlstate_fault(sqlstate: str | None) -> Fault:
    """The fault an SQLSTATE means; None (the client lost or could not open the connection) is infrastructure."""
    if sqlstate is None:
        return Fault.INFRASTRUCTURE
    if sqlstate[:2] in _CONTENDED_CLASSES or sqlstate in _CONTENDED_CODES:
        return Fault.CONTENDED
    if sqlstate[:2] in _INFRASTRUCTURE_CLASSES or sqlstate in _INFRASTRUCTURE_CODES:
        return Fault.INFRASTRUCTURE
    return Fault.POISON  # 22 data exception, 23 integrity (a trigger's domain guard is 23514), 42, P0, XX ...


def classify(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> Fault:
    """Whose fault ``exc`` is; with ``conn``, a connection found broken or closed makes it infrastructure.

    The first driver error on the chain of causes decides (a domain error raised from a deadlock is contended);
    a failure with no driver error behind it is poison, unless it is marked :class:`Contended`.
    """
    if conn is not None and (conn.broken or conn.closed):
        return Fault.INFRASTRUCTURE
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PoolTimeout | psycopg.InterfaceError):
            return Fault.INFRASTRUCTURE  # no connection to be had, or it is closed
        if isinstance(seen, psycopg.Error):
            return sqlstate_fault(seen.sqlstate)
        if isinstance(seen, Contended):
            return Fault.CONTENDED
        seen = seen.__cause__
    return Fault.POISON
