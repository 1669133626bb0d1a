"""Retrying a failed message on its partition: which failures count towards the dead letters (pin.faults: only an
unreadable message's), and the back-off."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from pin.backoff import exponential_backoff
from pin.faults import Fault, fault_of


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


def failure_of(exc: BaseException, *, unreadable_attempts: int, max_unreadable_attempts: int) -> Failure:
    """The failure ``exc`` makes of an attempt: retried, or (unreadable, its attempts used up) dead-lettered.

    ``unreadable_attempts`` counts the earlier attempts that found the message unreadable, the only ones the limit
    counts (pin.faults.Fault.dead_letters): a message that passed its contract is retried without limit, whatever
    fails it.
    """
    fault = fault_of(exc)
    unreadable_attempts += 1 if fault.dead_letters else 0
    give_up = fault.dead_letters and unreadable_attempts >= max_unreadable_attempts
    return Failure(exc, dead_letter=give_up, fault=fault, unreadable_attempts=unreadable_attempts)
