"""What handling a partition's messages decides, for the runtime's Kafka side to carry out (River's job executor
reports, its producer acts): commit up to (:class:`Handled`), hold this key until (:class:`HoldUntil`), pause this
partition (:class:`PausePartition`). The handling side never touches the consumer; these are its whole output.

The decisions about one failed message (held or dead-lettered: :func:`pin.messaging.consumer.retry.failure_of`)
and what it holds back (:func:`hold`) are pure, so that they are tested without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pin.messaging.consumer.received import Received
from pin.messaging.consumer.retry import Failure

# What a held message holds back: the later messages of its partition with this scope (its key, or every key).
WHOLE_PARTITION = "whole partition"
Scope = bytes | str | None
HoldKey = tuple[str, int, Scope]


@dataclass
class Held:
    """A message kept in hand for a retry, with the later messages of its scope behind it."""

    message: Received
    attempts: int
    retry_at: float
    behind: list[Received] = field(default_factory=list)
    # of the attempts, those that failed because the message could not be read (the dead-letter limit counts these)
    unreadable_attempts: int = 0


@dataclass(frozen=True)
class Handled:
    """Commit up to: these offsets of ``partition`` are handled (applied, duplicates, of no route, dead-lettered);
    the partition may commit past them once every message before them is."""

    partition: tuple[str, int]
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class HoldUntil:
    """Hold this key until ``held.retry_at`` (monotonic): the later messages of its scope wait behind it."""

    key: HoldKey
    held: Held
    retry_in: float


@dataclass(frozen=True)
class PausePartition:
    """Pause this partition until its held message is retried (one lane: a held message holds every key)."""

    partition: tuple[str, int]
    retry_in: float


Decision = Handled | HoldUntil | PausePartition


def scope_of(message: Received, *, threaded: bool) -> Scope:
    """What a held message holds back: the later messages of its key (several lanes), else of its partition."""
    return message.key if threaded else WHOLE_PARTITION


def hold(
    message: Received, attempts: int, failure: Failure, later: list[Received], *, threaded: bool, now: float
) -> tuple[list[Decision], list[Received]]:
    """``message`` failed its ``attempts``-th attempt and is not dead-lettered: hold it until its back-off has passed
    (``now``: monotonic) with the later messages of its scope behind it, pausing its partition when the scope is
    the whole partition. The decisions, and the later messages of other scopes (to go on)."""
    scope = scope_of(message, threaded=threaded)
    behind = [m for m in later if scope_of(m, threaded=threaded) == scope]
    others = [m for m in later if scope_of(m, threaded=threaded) != scope]
    held = Held(message, attempts, now + failure.retry_in, behind, failure.unreadable_attempts)
    decisions: list[Decision] = [HoldUntil((message.topic, message.partition, scope), held, failure.retry_in)]
    if scope == WHOLE_PARTITION:
        decisions.append(PausePartition(message.partition_key, failure.retry_in))
    return decisions, others
