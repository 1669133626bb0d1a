"""`pin status`'s reads from the database: bounded queries (every count stops at a cap, every "oldest" is an
index-ordered ``LIMIT 1``), each part in a transaction of its own, so that a missing table spoils only that part."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import LiteralString, TypeVar

import psycopg
from psycopg.rows import class_row

from pin.calendar.expiry import APPOINTMENT_IS_DUE
from pin.calendar.expiry import JOB_NAME as APPOINTMENT_TIMEOUT
from pin.db import Conn, ConnectionPolicy, connect, load_queries
from pin.messaging import topics
from pin.messaging.groups import SLA_SECONDS, SLA_WINDOW_SECONDS
from pin.observability import database_health
from pin.outbox.floors import FLOORS, PLAN_BY_INDEX
from pin.outbox.writer import VPARTS
from pin.promotion.expiry import JOB_NAME as EXPIRE_PROMOTIONS
from pin.promotion.expiry import PURCHASE_IS_DUE
from pin.settings import Settings
from pin.status.snapshot import (
    Backlog,
    CdcSlot,
    Cycle,
    Cycles,
    DeadLetters,
    GroupMembers,
    Horizon,
    HorizonHolderView,
    InboxActivity,
    Leases,
    OutboxBacklog,
    Poison,
    PoisonItem,
    RelayLease,
    TopicBacklog,
    TopicDeadLetters,
    Unavailable,
)

T = TypeVar("T")

# Counts stop here: a backlog of 10 001 reads as "10000+" and costs no more than that many index entries.
COUNT_CAP = 10_001
# The outbox is a queue that is normally near empty; its per-topic count reads at most this many rows.
OUTBOX_COUNT_CAP = 100_001
# Worker instances listed per job (most recent last cycle first); older ones are only counted.
SHOWN_INSTANCES = 10
# Poison items listed per job (the longest failing first); the rest are only counted.
SHOWN_POISON_ITEMS = 5

_TEMPLATES = load_queries(__package__)


def _query(name: str, **fields: object) -> LiteralString:
    """The statement ``name`` of queries.sql with its caps (the constants above) and ``fields`` filled in."""
    caps = {"count_cap": COUNT_CAP, "shown_poison_items": SHOWN_POISON_ITEMS}
    return _TEMPLATES[name].format(**caps, **fields)


@dataclass(frozen=True)
class DueItems:
    """A polling job and where its due items are: the claim's own condition over the job's partial index."""

    job: str
    description: str  # which items are due, in the seeds' words
    table: LiteralString
    alias: LiteralString  # the table's alias in ``condition``
    due_at: LiteralString  # the column the claim orders by, then by id
    condition: LiteralString  # binds %(as_of)s

    def oldest_first(self) -> LiteralString:
        """The due items, oldest first (as the claim takes them), with their id and due time."""
        return _query("due_oldest_first", a=self.alias, due_at=self.due_at, table=self.table, condition=self.condition)


JOBS = (
    DueItems(
        job=APPOINTMENT_TIMEOUT,
        description="Pending appointments past PendingExpiresAt",
        table="calendar.appointment",
        alias="a",
        due_at="pending_expires_at",
        condition=APPOINTMENT_IS_DUE,
    ),
    DueItems(
        job=EXPIRE_PROMOTIONS,
        description="Active purchases past EndsAt",
        table="promotion.purchase",
        alias="p",
        due_at="ends_at",
        condition=PURCHASE_IS_DUE,
    ),
)


@contextmanager
def connection(settings: Settings) -> Iterator[Conn | Unavailable]:
    """A short-lived connection for one snapshot, or why there is none."""
    if not settings.database.url:
        yield Unavailable("PIN_DATABASE_URL is not set")
        return
    try:
        # a status view never waits on a busy database for long: its own 5 s statement_timeout
        policy = ConnectionPolicy.from_settings(settings, "command")
        policy = replace(policy, session={**policy.session, "statement_timeout": "5000"})
        conn = connect(settings.database.url, autocommit=True, policy=policy, application_name="pin-status")
    except psycopg.Error as exc:
        yield Unavailable(f"database unreachable ({type(exc).__name__})")
        return
    try:
        yield conn
    finally:
        conn.close()


def read(conn: Conn | Unavailable, query: Callable[[Conn], T]) -> T | Unavailable:
    """Run one part's queries in a transaction of their own; a database error makes that part unavailable."""
    if isinstance(conn, Unavailable):
        return conn
    try:
        with conn.transaction():
            return query(conn)
    except psycopg.Error as exc:
        return Unavailable(_reason(exc))


def _reason(exc: psycopg.Error) -> str:
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
        return f"not deployed yet ({first_line or 'missing table'})"
    if isinstance(exc, psycopg.errors.UndefinedColumn):
        return f"schema differs ({first_line})"
    return f"{type(exc).__name__}: {first_line}"[:200]


def _rows(conn: Conn, shape: type[T], query: LiteralString, params: Mapping[str, object] | None = None) -> list[T]:
    with conn.cursor(row_factory=class_row(shape)) as cursor:
        return cursor.execute(query, params).fetchall()


def _one(conn: Conn, shape: type[T], query: LiteralString, params: Mapping[str, object] | None = None) -> T:
    (row,) = _rows(conn, shape, query, params)
    return row


# --- queries ---------------------------------------------------------------------------------------------


_CLOCK = _query("clock")


@dataclass(frozen=True)
class _Clock:
    now: datetime


def clock(conn: Conn) -> datetime:
    """The database's now(): the moment the snapshot describes."""
    return _one(conn, _Clock, _CLOCK).now


def backlog(items: DueItems) -> Callable[[Conn], Backlog]:
    """The query of one job's backlog: its due items up to the cap, and the oldest of them."""
    due = items.oldest_first()
    # the claim's condition binds its AsOf: here the transaction's now(), as every other part of the report
    query = _query("due_backlog", due=due)

    def read_backlog(conn: Conn) -> Backlog:
        return _one(conn, Backlog, query, {"as_of": clock(conn)})

    return read_backlog


_CYCLES = _query("job_cycles")


def cycles(conn: Conn) -> dict[str, Cycles]:
    """The last cycle of every instance of every job, the most recent first; the oldest only counted."""
    latest: dict[str, list[Cycle]] = {}
    older: dict[str, int] = {}
    for cycle in _rows(conn, Cycle, _CYCLES):
        # an instance is host:pid, so every restart adds a row: show the most recent ones, count the rest
        shown = latest.setdefault(cycle.job, [])
        if len(shown) < SHOWN_INSTANCES:
            shown.append(cycle)
        else:
            older[cycle.job] = older.get(cycle.job, 0) + 1
    return {job: Cycles(tuple(shown), older.get(job, 0)) for job, shown in latest.items()}


_POISON_PER_JOB = _query("poison_per_job")
_POISON_LONGEST_FAILING = _query("poison_longest_failing")


def poison(conn: Conn) -> dict[str, Poison]:
    """Every job's poison items: how many, and the longest failing few."""
    per_job = _rows(conn, Poison, _POISON_PER_JOB)
    listed: dict[str, list[PoisonItem]] = {}
    for item in _rows(conn, PoisonItem, _POISON_LONGEST_FAILING):
        listed.setdefault(item.job, []).append(item)
    return {p.job: dataclasses.replace(p, oldest=tuple(listed.get(p.job, ()))) for p in per_job}


_OUTBOX_PER_TOPIC = _query("outbox_per_topic")
_OUTBOX_LAG = _query("outbox_lag", **FLOORS)


@dataclass(frozen=True)
class _Seconds:
    seconds: float | None


def outbox_backlog(conn: Conn, cap: int = OUTBOX_COUNT_CAP) -> OutboxBacklog:
    """The outbox rows waiting per topic (up to ``cap`` rows read), and the age of the oldest: past the floors,
    along their indexes (docs/design/outbox-storage.md)."""
    conn.execute(PLAN_BY_INDEX)
    per_topic = tuple(_rows(conn, TopicBacklog, _OUTBOX_PER_TOPIC, {"cap": cap}))
    lag = _one(conn, _Seconds, _OUTBOX_LAG).seconds
    return OutboxBacklog(lag, per_topic, capped=sum(t.rows for t in per_topic) >= cap)


_DEAD_LETTERS_PER_TOPIC = _query("outbox_dead_letters_per_topic")


def dead_letters(conn: Conn) -> DeadLetters:
    """The dead letters per topic (up to the cap)."""
    return DeadLetters(tuple(_rows(conn, TopicDeadLetters, _DEAD_LETTERS_PER_TOPIC)))


_LEASES_PER_OWNER = _query("relay_leases_per_owner")


def leases(conn: Conn) -> Leases:
    """The relay instances holding live leases, and how many vparts have no publisher."""
    relays = tuple(_rows(conn, RelayLease, _LEASES_PER_OWNER))
    return Leases(relays, unowned_vparts=VPARTS - sum(r.vparts for r in relays))


_CDC_SLOT = _query("cdc_slot")


def cdc_slot(slot: str) -> Callable[[Conn], CdcSlot]:
    """The replication slot ``slot``: whether it exists, whether a reader streams from it, the WAL it keeps."""

    def read_slot(conn: Conn) -> CdcSlot:
        return _one(conn, CdcSlot, _CDC_SLOT, {"slot": slot})

    return read_slot


_INBOX_OF_GROUP = _query("inbox_of_group")


def inbox(conn: Conn) -> dict[str, InboxActivity]:
    """What each consumer group processed lately, its recent p99 event age against its SLA, and its parked dead
    letters (the topic never took them)."""
    return {
        group: _one(
            conn,
            InboxActivity,
            _INBOX_OF_GROUP,
            {"group": group, "window": SLA_WINDOW_SECONDS, "sla": SLA_SECONDS[group]},
        )
        for group in topics.CONSUMER_GROUPS
    }


def members(wedged_after_seconds: float) -> Callable[[Conn], dict[str, GroupMembers]]:
    """The query of every group's live members, and whether each is wedged (``wedged_after_seconds``)."""

    def read_members(conn: Conn) -> dict[str, GroupMembers]:
        params = {"groups": list(topics.CONSUMER_GROUPS), "wedged_after": wedged_after_seconds}
        return {m.group_name: m for m in _rows(conn, GroupMembers, _query("group_members"), params)}

    return read_members


# the holders of the xmin horizon `pin status` names, the oldest first
SHOWN_HORIZON_HOLDERS = 5


def horizon(conn: Conn) -> Horizon:
    """What holds the xmin horizon back (the gauges' own statement), the oldest few; a slot's or a standby's age is
    its hold as the workers' refreshes recorded it (None before one did)."""
    holders = database_health.held_for(conn, database_health.horizon_holders(conn)[:SHOWN_HORIZON_HOLDERS])
    return Horizon(tuple(HorizonHolderView(h.holder, h.pid, h.application, h.name, h.seconds, h.xids) for h in holders))
