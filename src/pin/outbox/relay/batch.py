"""A batch on its way to the broker: the rows read together, their waves, their outcomes, and its counters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from confluent_kafka import Producer

from pin.outbox.relay.errors import SendError


class PendingRow(NamedTuple):
    """An outbox row read by its vpart's lease owner, with the lease epoch it was read under.

    ``value`` is the Kafka value the writer stored (sent as is, never parsed); ``payload`` is read only when it is
    missing (a row replayed from the dead letters), as PostgreSQL prints the jsonb, and so is ``headers``. The
    fields are in the order of the read's columns (one tuple per row, no per-column conversion in Python).
    """

    id: int
    message_id: str
    vpart: int
    epoch: int
    topic: str
    key: str
    event_type: str
    contract_version: int
    value: str | None
    payload: str | None
    headers: str
    attempts: int


def pending_rows(_cursor: object) -> Callable[[Sequence[Any]], PendingRow]:
    """psycopg row factory: one PendingRow (a tuple) per record, the columns in the read's order."""
    return PendingRow._make


@dataclass(frozen=True)
class RelayCounts:
    """The counters of one batch (or of several, added with ``+``)."""

    read: int = 0
    published: int = 0
    failed: int = 0
    dead_lettered: int = 0
    held_back: int = 0
    # some vpart gave as many rows as it was asked for: more are probably waiting
    more_waiting: bool = False
    # rows of the batch finished in this step (the pipeline reads one batch and settles another)
    settled: int = 0

    @property
    def is_full(self) -> bool:
        """The batch limit was hit: the next batch should start at once."""
        return self.more_waiting

    def __add__(self, other: RelayCounts) -> RelayCounts:
        """The counters added up (``more_waiting`` of either)."""
        return RelayCounts(
            read=self.read + other.read,
            published=self.published + other.published,
            failed=self.failed + other.failed,
            dead_lettered=self.dead_lettered + other.dead_lettered,
            held_back=self.held_back + other.held_back,
            more_waiting=self.more_waiting or other.more_waiting,
            settled=self.settled + other.settled,
        )

    def as_dict(self) -> dict[str, int]:
        """The counters an operator reads, as JSON-ready values."""
        return {name: getattr(self, name) for name in REPORTED_COUNTERS}


# What `pin relay --once` prints (with the number of cycles), in this order.
REPORTED_COUNTERS = tuple(f.name for f in fields(RelayCounts) if f.name not in ("more_waiting", "settled"))


def waves(rows: Sequence[PendingRow]) -> Iterator[list[PendingRow]]:
    """Wave n holds the n-th row (in id order) of every key in the batch."""
    per_key: dict[str, list[PendingRow]] = {}
    for row in rows:
        per_key.setdefault(row.key, []).append(row)
    depth = max((len(key_rows) for key_rows in per_key.values()), default=0)
    for n in range(depth):
        yield [key_rows[n] for key_rows in per_key.values() if len(key_rows) > n]


class Batch:
    """Rows read together: sent wave by wave (a key's n-th row only once its (n-1)-th is acknowledged; nothing
    more of a key after one of its rows failed), settled once every row has an outcome."""

    def __init__(self, number: int, rows: list[PendingRow], producer: Producer) -> None:
        self.number = number
        self.rows = rows
        self.ids = [row.id for row in rows]
        self.keys = {row.key for row in rows}
        self.producer = producer
        # every key once (the usual batch): one wave, the rows as read
        self.waves = [rows] if len(self.keys) == len(rows) else list(waves(rows))
        self.next_wave = 0
        self.wave: list[PendingRow] = []  # the rows handed to the producer last, awaiting their outcomes
        self.outcomes: dict[int, SendError | None] = {}  # row id -> None when acknowledged
        self.positions: dict[int, tuple[int, int]] = {}  # row id -> (partition, offset) the broker acknowledged at
        self.expected = 0  # rows handed over so far (each gets exactly one outcome)
        self.acked: list[PendingRow] = []
        self.failures: list[tuple[PendingRow, SendError]] = []
        self.blocked: set[str] = set()  # keys with a failed row: nothing more of them in this batch
        self.unsent = 0
        self.started = time.monotonic()
