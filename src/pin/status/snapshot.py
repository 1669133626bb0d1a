"""What `pin status` shows, as typed, frozen values; each part also knows its place in the `--json` document."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar

from pin.outbox.waiting import GroupWait, PartitionWait

Document = dict[str, Any]


def _camel(name: str) -> str:
    """A field's key in the JSON document: its name in camelCase (``processed_last_5_min`` -> ``processedLast5Min``)."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _json_value(value: object) -> object:
    """A field's value in the JSON document: a part as its document, a tuple of parts as a list, the rest as is."""
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, Part | Cycles):
        return value.document()
    if is_dataclass(value) and not isinstance(value, type):  # a lower layer's value shown as it is (PartitionWait)
        return {_camel(f.name): _json_value(getattr(value, f.name)) for f in fields(value)}
    return value


class Part:
    """A dataclass of the snapshot whose JSON document is its fields under camelCase keys, in their order."""

    # fields the document leaves out: what the enclosing part already says (a job's name on each of its cycles)
    LEAVE_OUT: ClassVar[tuple[str, ...]] = ()
    # keys the `--json` document has always used where they are not the field's name in camelCase
    KEYS: ClassVar[Mapping[str, str]] = {}

    def document(self) -> Document:
        """The part in the JSON document."""
        names = (f.name for f in fields(self) if f.name not in self.LEAVE_OUT)  # type: ignore[arg-type]
        return {self.KEYS.get(name) or _camel(name): _json_value(getattr(self, name)) for name in names}


@dataclass(frozen=True)
class Unavailable(Part):
    """A part that could not be read; ``reason`` is what the operator sees after "n/a"."""

    KEYS: ClassVar[Mapping[str, str]] = {"reason": "na"}  # the key `pin status --json` has always used

    reason: str


@dataclass(frozen=True)
class BrokerUnavailable(Unavailable):
    """The broker could not be asked at all: one reason for every consumer group, shown once."""

    def document(self) -> Document:
        """The reason, marked as the same for every group."""
        return {**super().document(), "scope": "all"}


# --- workers ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backlog(Part):
    """A job's due items (poison ones included): how many, up to a cap, and the oldest of them."""

    KEYS: ClassVar[Mapping[str, str]] = {"count": "backlog", "capped": "backlogCapped"}

    count: int
    capped: bool  # count stopped at the cap: there are more
    oldest_due_at: datetime | None
    oldest_overdue_seconds: float | None
    oldest_id: str | None


@dataclass(frozen=True)
class Cycle(Part):
    """The last cycle of one worker instance (``jobs.cycle``)."""

    LEAVE_OUT: ClassVar[tuple[str, ...]] = ("job",)

    job: str
    instance: str
    run_id: str
    as_of: datetime
    finished_at: datetime
    seconds_ago: float | None
    duration_ms: int
    succeeded: bool
    counters: Mapping[str, object] | None


@dataclass(frozen=True)
class Cycles:
    """A job's instances, the most recent last cycle first, and how many older ones are only counted."""

    latest: tuple[Cycle, ...] = ()
    older: int = 0

    def document(self) -> list[Document]:
        """The instances shown, in the JSON document (the older ones are a count of the job's)."""
        return [cycle.document() for cycle in self.latest]


@dataclass(frozen=True)
class PoisonItem(Part):
    """One item whose processing keeps failing (``jobs.item_failure``)."""

    LEAVE_OUT: ClassVar[tuple[str, ...]] = ("job",)

    job: str
    id: str
    attempts: int
    last_error: str  # exception type and first line: ids only, never PII
    failing_since: datetime
    last_failed_at: datetime


@dataclass(frozen=True)
class Poison(Part):
    """A job's poison items: how many, and the longest failing few."""

    LEAVE_OUT: ClassVar[tuple[str, ...]] = ("job",)

    job: str
    items: int = 0
    max_attempts: int | None = None
    failing_since: datetime | None = None
    last_failed_at: datetime | None = None
    oldest: tuple[PoisonItem, ...] = ()

    def document(self) -> Document:
        """The poison items in the JSON document (only their count, 0, when there are none)."""
        if not self.items:
            return {"items": 0}
        return super().document()


@dataclass(frozen=True)
class JobView(Part):
    """One polling job: its backlog, the last cycles of its instances and its poison items."""

    KEYS: ClassVar[Mapping[str, str]] = {"cycles": "instances"}

    job: str
    due: str  # which items are due, in the seeds' words
    backlog: Backlog | Unavailable
    cycles: Cycles | Unavailable
    poison: Poison | Unavailable

    def document(self) -> Document:
        """The job in the JSON document."""
        older = self.cycles.older if isinstance(self.cycles, Cycles) else 0
        return {**super().document(), "olderInstances": older}


# --- outbox ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicBacklog(Part):
    """The outbox rows waiting for one topic."""

    topic: str
    rows: int
    oldest_seconds: float | None
    backing_off: int  # rows whose next attempt is in the future
    max_attempts: int


@dataclass(frozen=True)
class OutboxBacklog(Part):
    """The rows waiting for the relay, per topic, and the age of the oldest."""

    lag_seconds: float | None
    topics: tuple[TopicBacklog, ...]
    capped: bool  # the per-topic counts stopped at the cap


@dataclass(frozen=True)
class TopicDeadLetters(Part):
    """The dead letters of one topic (``outbox.dead_letter``)."""

    topic: str
    rows: int
    first_at: datetime
    last_at: datetime

    def document(self) -> Document:
        """The topic's dead letters in the JSON document (the column names, as they always were)."""
        return {"topic": self.topic, "rows": self.rows, "first_at": self.first_at, "last_at": self.last_at}


@dataclass(frozen=True)
class DeadLetters(Part):
    """Rows the relay moved aside, per topic."""

    topics: tuple[TopicDeadLetters, ...]

    @property
    def total(self) -> int:
        """Dead letters of every topic."""
        return sum(t.rows for t in self.topics)

    def by_topic(self) -> dict[str, int]:
        """Dead letters per topic."""
        return {t.topic: t.rows for t in self.topics}

    def document(self) -> Document:
        """The dead letters in the JSON document."""
        return {**super().document(), "total": self.total}


@dataclass(frozen=True)
class RelayLease(Part):
    """One relay instance and the virtual partitions it leases."""

    owner: str
    vparts: int
    expires_in_seconds: float | None  # its earliest lease


@dataclass(frozen=True)
class Leases(Part):
    """Who publishes which share of the outbox, and how many vparts nobody does."""

    relays: tuple[RelayLease, ...]
    unowned_vparts: int


@dataclass(frozen=True)
class CdcSlot(Part):
    """cdc mode: the logical replication slot Debezium reads, and the WAL it keeps on the database's disk."""

    slot: str
    exists: bool
    active: bool | None  # a reader streams from it now
    retained_wal_bytes: float | None  # current LSN minus the slot's restart LSN
    wal_status: str | None  # reserved, extended, unreserved (close to max_slot_wal_keep_size) or lost


@dataclass(frozen=True)
class OutboxView(Part):
    """The outbox: rows waiting, dead letters, relay leases; in cdc mode, the slot Debezium reads."""

    backlog: OutboxBacklog | Unavailable
    dead_letters: DeadLetters | Unavailable
    leases: Leases | Unavailable
    cdc: CdcSlot | Unavailable | None = None  # None: relay mode (PIN_OUTBOX_MODE)


# --- consumers -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboxActivity(Part):
    """What a consumer group processed lately, from its inbox, and its dead letters parked in the database."""

    last_processed_at: datetime | None
    last_processed_seconds_ago: float | None
    processed_last_5_min: int
    # letters the dead-letter topic never took: only in messaging.dead_letter (`pin dlq list` shows them)
    parked_letters: int
    # p99 of OccurredAt -> effect over the SLA window (pin.messaging.groups.SLA_WINDOW_SECONDS); None: no event in it
    recent_p99_age_seconds: float | None
    sla_seconds: float  # the group's SLA (pin.messaging.groups.SLA_SECONDS)

    @property
    def sla_breached(self) -> bool:
        """The recent p99 age is over the SLA (ConsumerSlaBreached's condition, read from the inbox)."""
        return self.recent_p99_age_seconds is not None and self.recent_p99_age_seconds > self.sla_seconds


@dataclass(frozen=True)
class PartitionLag(Part):
    """A group's committed offset against the end offset of one partition."""

    topic: str
    partition: int
    committed: int | None  # None: nothing committed yet
    end: int
    lag: int


@dataclass(frozen=True)
class GroupOffsets(Part):
    """A group's lag on every partition it reads, and its dead-letter topic."""

    partitions: tuple[PartitionLag, ...]
    missing_topics: tuple[str, ...]
    dead_lettered: int | None  # None: the dead-letter topic does not exist
    dead_letter_topic: str


@dataclass(frozen=True)
class GroupMembers(Part):
    """A group's live members as its instances record them (``messaging.consumer_member``; the embedded broker
    names no members), and whether the group is wedged: live members, none of which has held a partition for
    longer than the bound (PIN_CONSUMER_WEDGED_AFTER_SECONDS)."""

    LEAVE_OUT: ClassVar[tuple[str, ...]] = ("group_name",)

    group_name: str
    live_members: int
    partitions: int  # held by the live members together
    unassigned_seconds: float | None  # since a live member last held a partition or joined; None: some hold one
    wedged_after_seconds: float
    wedged: bool


@dataclass(frozen=True)
class Waiting(Part):
    """What waits for a group (pin.outbox.waiting, the signal ConsumerWaitingPastSla reads): the messages the relay
    was acknowledged at past the group's committed offsets, and the oldest one's age against the group's SLA."""

    messages: int
    oldest_seconds: float  # 0: none waits
    sla_seconds: float
    past_sla: bool
    partitions: tuple[PartitionWait, ...]  # those where something waits

    @classmethod
    def of(cls, wait: GroupWait) -> Waiting:
        """The status part of one group's wait."""
        waiting = tuple(p for p in wait.partitions if p.waiting)
        return cls(wait.waiting, wait.oldest_seconds, wait.sla_seconds, wait.past_sla, waiting)


@dataclass(frozen=True)
class ConsumerView(Part):
    """One consumer group: its inbox, its offsets on the broker, its members as they record themselves, and what
    waits for it."""

    group: str
    inbox: InboxActivity | Unavailable
    broker: GroupOffsets | Unavailable
    members: GroupMembers | Unavailable | None = None  # None: not read
    waiting: Waiting | Unavailable | None = None  # None: not read


# --- contract migrations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigrationView(Part):
    """One event type in migration to its successor contract (PIN_CONTRACT_MIGRATIONS): who still reads v1, by when."""

    event_type: str
    v1_topic: str
    v2_topic: str
    publish: str  # "dual" (v1 and v2 rows) or "v2" (sunset)
    deadline: datetime
    overdue: bool  # past the deadline and v1 still published
    v1_groups: tuple[str, ...]  # the groups still reading v1 (from the routing table and the setting)
    v2_groups: tuple[str, ...]


# --- the database ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HorizonHolderView(Part):
    """One holder of the xmin horizon: a transaction (a session or a prepared one), a replication slot, or a standby's
    feedback (docs/runbooks/database-health.md, "The xmin horizon")."""

    holder: str  # transaction, slot or standby
    pid: int | None  # the session's, the slot reader's or the standby's walsender's
    application: str | None
    name: str | None  # the slot's name, or a prepared transaction's gid
    # a transaction's since it began; a slot's or a standby's since its xmin was first seen there (None: not yet)
    age_seconds: float | None
    age_transactions: float  # age(xmin)


@dataclass(frozen=True)
class Horizon(Part):
    """What holds the xmin horizon back, the oldest xmin first (at most a few): vacuum removes nothing younger."""

    holders: tuple[HorizonHolderView, ...]


# --- the whole -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot(Mapping[str, Any]):
    """Everything `pin status` shows at one moment; read as a mapping, it is the `--json` document."""

    clock: datetime | Unavailable  # the database's now()
    jobs: tuple[JobView, ...]
    outbox: OutboxView
    consumers: tuple[ConsumerView, ...]
    # the event types in migration (none: the key is left out of the document), or why they could not be read
    migrations: tuple[MigrationView, ...] | Unavailable = ()
    horizon: Horizon | Unavailable | None = None  # None: not read

    @cached_property
    def _document(self) -> Document:
        clock = self.clock
        document: Document = {
            "database": clock.document() if isinstance(clock, Unavailable) else {"now": clock},
            "workers": [job.document() for job in self.jobs],
            "outbox": self.outbox.document(),
            "consumers": [consumer.document() for consumer in self.consumers],
        }
        if self.migrations:
            document["contractMigrations"] = _json_value(self.migrations)
        if self.horizon is not None:
            document["xminHorizon"] = self.horizon.document()
        return document

    def document(self) -> Document:
        """The snapshot as plain data: what `pin status --json` prints."""
        return self._document

    def __getitem__(self, key: str) -> Any:
        return self._document[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._document)

    def __len__(self) -> int:
        return len(self._document)
