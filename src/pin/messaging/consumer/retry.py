"""Retrying a failed message on its partition: which failures count towards the dead letters (pin.faults: only an
unreadable message's), and the back-off."""

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
    # of the attempts, those that failed because the message could not be read (the dead-letter limit counts these)
    unreadable_attempts: int = 0


@dataclass(frozen=True)
class Failure:
    """A failed attempt at a message, and whether the message goes to the dead-letter topic now."""

    exc: BaseException
    dead_letter: bool
    fault: Fault = Fault.POISON
    # the attempts that found the message unreadable so far, this one included when it did (pin.faults)
    unreadable_attempts: int = 0
    # seconds until the next attempt, when it is held
    retry_in: float = 0.0


def backoff_delay(attempt: int, *, base: float, cap: float, rng: Callable[[], float] = random.random) -> float:
    """The project's exponential back-off with jitter: between half and all of it, so retries spread out."""
    return float(exponential_backoff(attempt, base=base, cap=cap) * (0.5 + 0.5 * rng()))


def classify(
    exc: Exception,
    group: str,
    topic: str,
    *,
    attempts: int,
    unreadable_attempts: int,
    max_unreadable_attempts: int,
    log: Any,
) -> Failure:
    """A failed attempt logged and counted: retried, or (unreadable, its attempts used up) dead-lettered.

    ``attempts`` counts every try (the back-off grows with it); ``unreadable_attempts`` the earlier ones that found
    the message unreadable, the only ones the limit counts (pin.faults.Fault.dead_letters): a message that passed
    its contract is retried without limit, whatever fails it.
    """
    fault = classify_fault(exc)
    unreadable_attempts += 1 if fault.dead_letters else 0
    give_up = fault.dead_letters and unreadable_attempts >= max_unreadable_attempts
    log.warning(
        "unreadable message" if fault.dead_letters else "message failed",
        error_type=type(exc).__name__,
        error=error_line(exc),
        attempts=attempts,
        fault=fault.value,
        database_unavailable=fault is Fault.INFRASTRUCTURE,
        dead_letter=give_up,
    )
    if not give_up:
        RETRIES.labels(group, topic).inc()
    return Failure(exc, dead_letter=give_up, fault=fault, unreadable_attempts=unreadable_attempts)
