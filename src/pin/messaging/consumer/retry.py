"""Retrying a failed message on its partition: which failures are the database's, and the back-off between tries."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from pin.backoff import exponential_backoff
from pin.messaging.consumer.dead_letter import error_line
from pin.messaging.consumer.metrics import RETRIES
from pin.messaging.consumer.received import Received


@dataclass
class Held:
    """A message kept in hand for a retry while its partition is paused, with the messages of its batch behind it."""

    message: Received
    attempts: int
    retry_at: float
    behind: list[Received] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    """A failed attempt at a message, and whether the message goes to the dead-letter topic now."""

    exc: BaseException
    dead_letter: bool


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (not the message's fault)."""
    if isinstance(exc, PoolTimeout | psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.errors.TransactionRollback):
        return False  # deadlock, serialization failure: about this transaction, counted as attempts
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # no SQLSTATE: the client lost or could not open the connection; 08: connection exception;
        # 57P01..57P03: the server is shutting down or restarting; 55000 on connect: database not accepting.
        return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03", "55000"}
    return False


def backoff_delay(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """The project's exponential back-off with jitter: between half and all of it, so retries spread out."""
    return float(exponential_backoff(attempt, base=base, cap=cap) * (0.5 + 0.5 * rng()))


def classify(exc: Exception, group: str, topic: str, *, attempts: int, max_attempts: int, log: Any) -> Failure:
    """A failed attempt logged and counted: retried (the database's fault, or attempts left) or dead-lettered."""
    unavailable = is_database_unavailable(exc)
    give_up = not unavailable and attempts >= max_attempts
    log.warning(
        "message failed",
        error_type=type(exc).__name__,
        error=error_line(exc),
        attempts=attempts,
        database_unavailable=unavailable,
        dead_letter=give_up,
    )
    if not give_up:
        RETRIES.labels(group, topic).inc()
    return Failure(exc, dead_letter=give_up)
