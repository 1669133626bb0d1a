"""Retrying a failed message on its partition: which failures count as attempts (pin.faults), and the back-off."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pin.backoff import exponential_backoff
from pin.faults import Fault
from pin.faults import classify as classify_fault
from pin.messaging.consumer.dead_letters.send import error_line
from pin.messaging.consumer.metrics import RETRIES
from pin.messaging.consumer.received import Received


@dataclass
class Held:
    """A message kept in hand for a retry while its partition is paused, with the messages of its batch behind it."""

    message: Received
    attempts: int
    retry_at: float
    behind: list[Received] = field(default_factory=list)
    # of the attempts, those that failed for a reason about the message (the dead-letter limit counts only these)
    poison_attempts: int = 0


@dataclass(frozen=True)
class Failure:
    """A failed attempt at a message, and whether the message goes to the dead-letter topic now."""

    exc: BaseException
    dead_letter: bool
    # the message's failures about itself so far, this one included when it is one (pin.faults: poison)
    poison_attempts: int = 0


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is not the message's fault (pin.faults): the database unreachable or in trouble, a timeout,
    a deadlock or serialization failure. Retried without limit; never an attempt towards the dead-letter topic."""
    return classify_fault(exc).transient


def backoff_delay(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """The project's exponential back-off with jitter: between half and all of it, so retries spread out."""
    return float(exponential_backoff(attempt, base=base, cap=cap) * (0.5 + 0.5 * rng()))


def classify(
    exc: Exception, group: str, topic: str, *, attempts: int, poison_attempts: int, max_attempts: int, log: Any
) -> Failure:
    """A failed attempt logged and counted: retried (not the message's fault, or attempts left) or dead-lettered.

    ``attempts`` counts every try (the back-off grows with it); ``poison_attempts`` the earlier failures about the
    message, the only ones the limit counts: a deadlock or an outage before them does not use the limit up.
    """
    fault = classify_fault(exc)
    poison_attempts += 0 if fault.transient else 1
    give_up = not fault.transient and poison_attempts >= max_attempts
    log.warning(
        "message failed",
        error_type=type(exc).__name__,
        error=error_line(exc),
        attempts=attempts,
        fault=fault.value,
        database_unavailable=fault is Fault.INFRASTRUCTURE,
        dead_letter=give_up,
    )
    if not give_up:
        RETRIES.labels(group, topic).inc()
    return Failure(exc, dead_letter=give_up, poison_attempts=poison_attempts)
