"""Whose fault a failure is: the item's (poison), a race lost (contended), the database's (infrastructure), or a
consumed message's that cannot be read or does not satisfy its contract (unreadable); and what each role does.

The one classification both workers and the consumer runtime use, and the one table of their treatment
(:data:`TREATMENTS`, shown in docs/design/poison-items.md), so they cannot drift: appointment-timeout skips a
contended item and ends the cycle on an infrastructure failure; expire-promotions rolls its whole batch back on
either; a consumer retries every failure of a message that passed its contract without limit, and dead-letters
only an unreadable message, after ``PIN_CONSUMER_UNREADABLE_ATTEMPTS`` attempts. A driver error is classified by
its SQLSTATE class, whatever psycopg class it arrives as.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

import psycopg
from psycopg_pool import PoolTimeout

from pin.domain_errors import Contended
from pin.settings import ConsumerSettings


class Fault(Enum):
    """The three outcomes of a failure."""

    # about the item or message itself: a domain guard, a check violation, bad data, a bug in its handling
    POISON = "poison"
    # another transaction held or changed what it needed (deadlock, serialization failure, lock timeout)
    CONTENDED = "contended"
    # about the server's or the connection's state: says nothing of the item (timeouts, resources, shutdown)
    INFRASTRUCTURE = "infrastructure"
    # a consumed message that cannot be read or does not satisfy its contract (consumers only: see :class:`Unreadable`)
    UNREADABLE = "unreadable"

    @property
    def transient(self) -> bool:
        """Whether trying again later, unchanged, can succeed (the workers' rule): contended and infrastructure."""
        return self in (Fault.CONTENDED, Fault.INFRASTRUCTURE)

    @property
    def dead_letters(self) -> bool:
        """Whether a consumer sends a message failing so to its dead-letter topic (after a few attempts): only an
        unreadable one. Every other failure of a message that passed its contract is retried without limit, the
        committed offset staying at it, until its cause is fixed or an operator parks it (`pin dlq park`)."""
        return self is Fault.UNREADABLE


class Unreadable(Exception):  # noqa: N818 - a marker, like Contended: the fault's name, not an error of its own
    """Marks an error meaning a consumed message cannot be read or does not satisfy its contract:
    :attr:`Fault.UNREADABLE`, whatever else it is."""


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


def _first_on_chain(exc: BaseException, kinds: tuple[type, ...], *, context: bool = False) -> Any:
    """The first exception on ``exc``'s chain of causes (with ``context``, of implicit contexts too) that is one of
    ``kinds``, if any: the one walk of a chain."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kinds):
            return seen
        seen = seen.__cause__ or (seen.__context__ if context else None)
    return None


def driver_error(exc: BaseException, *, context: bool = False) -> psycopg.Error | None:
    """The first driver error on ``exc``'s chain of causes (with ``context``, of implicit contexts too), if any: a
    pool timeout is one (psycopg_pool.PoolTimeout is a psycopg.OperationalError)."""
    error: psycopg.Error | None = _first_on_chain(exc, (psycopg.Error,), context=context)
    return error


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says no connection could be had or kept (a pool timeout, or a driver error without an
    SQLSTATE): the database did not answer, as opposed to an infrastructure fault it reported itself (a statement
    timeout, a disk full, a shutdown)."""
    error = driver_error(exc)
    return isinstance(error, PoolTimeout) or (error is not None and error.sqlstate is None)


def fault_of(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> Fault:
    """Whose fault ``exc`` is; with ``conn``, a connection found broken or closed makes it infrastructure.

    The first driver error or marker on the chain of causes decides (a domain error raised from a deadlock is
    contended; one marked :class:`Contended` or :class:`Unreadable` is that); a failure with neither behind it is
    poison.
    """
    if conn is not None and (conn.broken or conn.closed):
        return Fault.INFRASTRUCTURE
    first = _first_on_chain(exc, (psycopg.Error, Contended, Unreadable))
    if isinstance(first, PoolTimeout | psycopg.InterfaceError):
        return Fault.INFRASTRUCTURE  # no connection to be had, or it is closed
    if isinstance(first, psycopg.Error):
        return sqlstate_fault(first.sqlstate)
    if isinstance(first, Contended):
        return Fault.CONTENDED
    if isinstance(first, Unreadable):
        return Fault.UNREADABLE
    return Fault.POISON


# -- What each role does with each fault: the one table (docs/design/poison-items.md shows it) --------------------

UNREADABLE_ATTEMPTS_DEFAULT: Final[int] = ConsumerSettings().unreadable_attempts


def _sqlstates(classes: frozenset[str], codes: frozenset[str]) -> str:
    parts = [f"class{'es' if len(classes) > 1 else ''} {', '.join(sorted(classes))}"] if classes else []
    return "; ".join(parts + ([f"{', '.join(sorted(codes))}"] if codes else []))


@dataclass(frozen=True)
class Treatment:
    """One fault: which failures it is, and what each worker and a consumer do with it."""

    fault: Fault
    failures: str
    appointment_timeout: str
    expire_promotions: str
    consumer: str


_RETRIED = (
    "retried with back-off without limit, the committed offset staying at it (with lanes only its key waits); "
    "applied once when its cause is fixed; `pin dlq park` moves it to the dead letters"
)

TREATMENTS: Final[tuple[Treatment, ...]] = (
    Treatment(
        Fault.CONTENDED,
        f"SQLSTATE {_sqlstates(_CONTENDED_CLASSES, _CONTENDED_CODES)} (serialization, deadlock, lock timeout); a "
        "guarded write that matched no row (`ConflictError`)",
        "item rolled back, skipped",
        "batch rolled back",
        _RETRIED,
    ),
    Treatment(
        Fault.INFRASTRUCTURE,
        f"SQLSTATE {_sqlstates(_INFRASTRUCTURE_CLASSES, _INFRASTRUCTURE_CODES)} (connection, resources, statement "
        "timeout or cancel, shutdown, I/O, a standby, session timeouts); no SQLSTATE (the client lost the "
        "connection), a pool timeout, a broken connection",
        "item rolled back, cycle ends",
        "batch rolled back",
        _RETRIED,
    ),
    Treatment(
        Fault.POISON,
        "every other SQLSTATE: class 22 (bad data), 23 (a check or NOT NULL violation: the state machines' "
        "triggers raise 23514), 42 (an undefined table or column, a privilege), P0, XX; a domain guard; any other "
        "exception (a bug)",
        "recorded, retried next cycle after the others",
        "excluded from the batch, recorded",
        _RETRIED,
    ),
    Treatment(
        Fault.UNREADABLE,
        "a consumed message that cannot be read or does not satisfy its contract: too large, not JSON, no "
        "MessageId, a payload its route's model refuses",
        "-",
        "-",
        f"dead-lettered after `PIN_CONSUMER_UNREADABLE_ATTEMPTS` attempts ({UNREADABLE_ATTEMPTS_DEFAULT} by default, "
        "short back-off), with its alert; the partition goes on",
    ),
)
assert {t.fault for t in TREATMENTS} == set(Fault)


def treatment_table() -> str:
    """:data:`TREATMENTS` as the Markdown table docs/design/poison-items.md shows (a test holds them equal)."""
    lines = [
        "| fault | failures | appointment-timeout | expire-promotions | a consumer |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {t.fault.value} | {t.failures} | {t.appointment_timeout} | {t.expire_promotions} | {t.consumer} |"
        for t in TREATMENTS
    ]
    return "\n".join(lines)
