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

from pin.calendar.claims import JOB_NAME as APPOINTMENT_TIMEOUT
from pin.calendar.repository import APPOINTMENT_IS_DUE
from pin.db import Conn, ConnectionPolicy, connect, load_queries
from pin.messaging import topics
from pin.messaging.groups import SLA_SECONDS, SLA_WINDOW_SECONDS
from pin.outbox.writer import VPARTS
from pin.promotion.repository import PURCHASE_IS_DUE
from pin.promotion.worker import JOB_NAME as EXPIRE_PROMOTIONS
from pin.settings import Settings
from pin.status.snapshot import (
    Backlog,
    CdcSlot,
    Cycle,
    Cycles,
    DeadLetters,
    GroupMembers,
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

_QUERIES = load_queries(__package__ or "pin.status")

# Counts stop here: a backlog of 10 001 reads as "10000+" and costs no more than that many index entries.
COUNT_CAP = 10_001
# The outbox is a queue that is normally near empty; its per-topic count reads at most this many rows.
OUTBOX_COUNT_CAP = 100_001
# Worker instances listed per job (most recent last cycle first); older ones are only counted.
SHOWN_INSTANCES = 10
# Poison items listed per job (the longest failing first); the rest are only counted.
SHOWN_POISON_ITEMS = 5


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
        a = self.alias
        return (
            f"SELECT {a}.id, {a}.{self.due_at} AS due_at FROM {self.table} AS {a}"
            f" WHERE {self.condition} ORDER BY {a}.{self.due_at}, {a}.id"
        )


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
    if not settings.database_url:
        yield Unavailable("PIN_DATABASE_URL is not set")
        return
    try:
        # a status view never waits on a busy database for long: its own 5 s statement_timeout
        policy = ConnectionPolicy.from_settings(settings, "command")
        policy = replace(policy, session={**policy.session, "statement_timeout": "5000"})
        conn = connect(settings.database_url, autocommit=True, policy=policy, application_name="pin-status")
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


@dataclass(frozen=True)
class _Clock:
    now: datetime


def clock(conn: Conn) -> datetime:
    """The database's now(): the moment the snapshot describes."""
    return _one(conn, _Clock, "SELECT now() AS now").now


def backlog(items: DueItems) -> Callable[[Conn], Backlog]:
    """The query of one job's backlog: its due items up to the cap, and the oldest of them."""
    due = items.oldest_first()
    # the claim's condition binds its AsOf: here the transaction's now(), as every other part of the report
    query: LiteralString = f"""
        SELECT count(*) AS count, count(*) = {COUNT_CAP} AS capped, min(due_at) AS oldest_due_at,
               EXTRACT(EPOCH FROM now() - min(due_at))::float8 AS oldest_overdue_seconds,
               (SELECT oldest.id::text FROM ({due} LIMIT 1) AS oldest) AS oldest_id
        FROM ({due} LIMIT {COUNT_CAP}) AS due
    """

    def read_backlog(conn: Conn) -> Backlog:
        return _one(conn, Backlog, query, {"as_of": clock(conn)})

    return read_backlog


_CYCLES: LiteralString = """
    SELECT job, instance, run_id::text AS run_id, as_of, finished_at, duration_ms, counters, succeeded,
           EXTRACT(EPOCH FROM now() - finished_at)::float8 AS seconds_ago
    FROM jobs.cycle ORDER BY job, finished_at DESC
"""


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


_POISON_PER_JOB: LiteralString = """
    SELECT job, count(*) AS items, max(attempts) AS max_attempts, min(first_failed_at) AS failing_since,
           max(last_failed_at) AS last_failed_at
    FROM jobs.item_failure GROUP BY job
"""
_POISON_LONGEST_FAILING: LiteralString = f"""
    SELECT job, item_id::text AS id, attempts, last_error, first_failed_at AS failing_since, last_failed_at
    FROM (SELECT f.*, row_number() OVER (PARTITION BY job ORDER BY first_failed_at, item_id) AS n
          FROM jobs.item_failure AS f) AS ranked
    WHERE n <= {SHOWN_POISON_ITEMS} ORDER BY job, n
"""


def poison(conn: Conn) -> dict[str, Poison]:
    """Every job's poison items: how many, and the longest failing few."""
    per_job = _rows(conn, Poison, _POISON_PER_JOB)
    listed: dict[str, list[PoisonItem]] = {}
    for item in _rows(conn, PoisonItem, _POISON_LONGEST_FAILING):
        listed.setdefault(item.job, []).append(item)
    return {p.job: dataclasses.replace(p, oldest=tuple(listed.get(p.job, ()))) for p in per_job}


_OUTBOX_PER_TOPIC: LiteralString = f"""
    SELECT topic, count(*) AS rows, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_seconds,
           count(*) FILTER (WHERE next_attempt_at > now()) AS backing_off, max(attempts) AS max_attempts
    FROM (SELECT topic, created_at, next_attempt_at, attempts FROM outbox.message ORDER BY id
          LIMIT {OUTBOX_COUNT_CAP}) AS m
    GROUP BY topic ORDER BY topic
"""
_OUTBOX_LAG: LiteralString = """
    SELECT coalesce((SELECT EXTRACT(EPOCH FROM now() - created_at)::float8 FROM outbox.message ORDER BY id LIMIT 1),
                    0.0) AS seconds
"""


@dataclass(frozen=True)
class _Seconds:
    seconds: float | None


def outbox_backlog(conn: Conn) -> OutboxBacklog:
    """The outbox rows waiting per topic (up to the cap), and the age of the oldest."""
    per_topic = tuple(_rows(conn, TopicBacklog, _OUTBOX_PER_TOPIC))
    lag = _one(conn, _Seconds, _OUTBOX_LAG).seconds
    return OutboxBacklog(lag, per_topic, capped=sum(t.rows for t in per_topic) >= OUTBOX_COUNT_CAP)


_DEAD_LETTERS_PER_TOPIC: LiteralString = f"""
    SELECT topic, count(*) AS rows, min(dead_lettered_at) AS first_at, max(dead_lettered_at) AS last_at
    FROM (SELECT topic, dead_lettered_at FROM outbox.dead_letter LIMIT {COUNT_CAP}) AS d
    GROUP BY topic ORDER BY topic
"""


def dead_letters(conn: Conn) -> DeadLetters:
    """The dead letters per topic (up to the cap)."""
    return DeadLetters(tuple(_rows(conn, TopicDeadLetters, _DEAD_LETTERS_PER_TOPIC)))


_LEASES_PER_OWNER: LiteralString = """
    SELECT owner, count(*) AS vparts, EXTRACT(EPOCH FROM min(expires_at) - now())::float8 AS expires_in_seconds
    FROM outbox.relay_lease WHERE owner IS NOT NULL AND expires_at > now()
    GROUP BY owner ORDER BY owner
"""


def leases(conn: Conn) -> Leases:
    """The relay instances holding live leases, and how many vparts have no publisher."""
    relays = tuple(_rows(conn, RelayLease, _LEASES_PER_OWNER))
    return Leases(relays, unowned_vparts=VPARTS - sum(r.vparts for r in relays))


_CDC_SLOT: LiteralString = """
    SELECT %(slot)s AS slot, count(s.slot_name) > 0 AS exists, bool_or(s.active) AS active,
           max(pg_current_wal_lsn() - s.restart_lsn)::float8 AS retained_wal_bytes, max(s.wal_status) AS wal_status
    FROM (SELECT 1) AS one LEFT JOIN pg_replication_slots s ON s.slot_name = %(slot)s
"""


def cdc_slot(slot: str) -> Callable[[Conn], CdcSlot]:
    """The replication slot ``slot``: whether it exists, whether a reader streams from it, the WAL it keeps."""

    def read_slot(conn: Conn) -> CdcSlot:
        return _one(conn, CdcSlot, _CDC_SLOT, {"slot": slot})

    return read_slot


# per group: an index range over (consumer_group, processed_at), never a scan of the inbox
_INBOX_OF_GROUP: LiteralString = f"""
    SELECT max(processed_at) AS last_processed_at,
           EXTRACT(EPOCH FROM now() - max(processed_at))::float8 AS last_processed_seconds_ago,
           (SELECT count(*) FROM (SELECT 1 FROM messaging.inbox i
             WHERE i.consumer_group = %(group)s AND i.processed_at > now() - interval '5 minutes'
             LIMIT {COUNT_CAP}) s) AS processed_last_5_min,
           (SELECT count(*) FROM (SELECT 1 FROM messaging.dead_letter d
             WHERE d.consumer_group = %(group)s AND d.disposition = 'parked'
             LIMIT {COUNT_CAP}) p) AS parked_letters,
           -- the SLA's measure over the latest events of the window (at most COUNT_CAP of them): OccurredAt to the
           -- effect's transaction, both on the database clock, as pin_consumer_event_age_seconds observes it
           (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY r.age) FROM (
              SELECT EXTRACT(EPOCH FROM i.processed_at - i.occurred_at)::float8 AS age FROM messaging.inbox i
              WHERE i.consumer_group = %(group)s AND i.processed_at > now() - make_interval(secs => %(window)s)
                AND i.occurred_at IS NOT NULL
              ORDER BY i.processed_at DESC LIMIT {COUNT_CAP}) r) AS recent_p99_age_seconds,
           %(sla)s::float8 AS sla_seconds
    FROM messaging.inbox WHERE consumer_group = %(group)s
"""


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
        return {m.group_name: m for m in _rows(conn, GroupMembers, _QUERIES["group_members"], params)}

    return read_members
