"""One snapshot for `pin status`, from the database and the broker; a part that cannot be read is unavailable,
with its reason, and never stops the rest."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from pin.consumer_groups import group_reads, migration_readers
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.kafka import client_config, silent_client_logger
from pin.messaging.migrations import migration_states
from pin.observability.logging import error_text
from pin.outbox import waiting
from pin.settings import ConfigurationError, Settings
from pin.status import database, snapshot
from pin.status.broker import consumer_offsets
from pin.status.snapshot import (
    BrokerUnavailable,
    ConsumerView,
    Cycles,
    JobView,
    OutboxView,
    Poison,
    Snapshot,
    Unavailable,
    Waiting,
)


def collect_status(
    settings: Settings, *, kafka: bool = True, kafka_timeout: float = 3.0, outbox: bool = True
) -> Snapshot:
    """One snapshot of everything `pin status` shows (as a mapping, the `--json` document); ``outbox`` False leaves
    the outbox's part unread (its count reads up to OUTBOX_COUNT_CAP rows: a console page that does not show it)."""
    offsets = consumer_offsets(settings, kafka_timeout) if kafka else BrokerUnavailable("not asked (--no-kafka)")
    with database.connection(settings) as conn:
        clock = database.read(conn, database.clock)
        jobs = _jobs(conn)
        unread = Unavailable("not read")
        outbox_view = (
            OutboxView(
                backlog=database.read(conn, database.outbox_backlog),
                dead_letters=database.read(conn, database.dead_letters),
                leases=database.read(conn, database.leases),
                cdc=database.read(conn, database.cdc_slot(settings.outbox_cdc_slot))
                if settings.outbox_mode == "cdc"
                else None,
            )
            if outbox
            else OutboxView(unread, unread, unread)
        )
        inbox = database.read(conn, database.inbox)
        members = database.read(conn, database.members(settings.wedged_after_seconds()))
        # a broker that did not answer is not asked again (the reason is the same, shown once)
        waits = offsets if isinstance(offsets, BrokerUnavailable) else _waits(settings, conn, kafka_timeout)
        horizon = database.read(conn, database.horizon)
    consumers = tuple(
        ConsumerView(
            group=group,
            inbox=inbox if isinstance(inbox, Unavailable) else inbox[group],
            broker=offsets if isinstance(offsets, Unavailable) else offsets[group],
            members=members if isinstance(members, Unavailable) else members[group],
            waiting=waits if isinstance(waits, Unavailable) else waits[group],
        )
        for group in topics.CONSUMER_GROUPS
    )
    return Snapshot(
        clock=clock,
        jobs=jobs,
        outbox=outbox_view,
        consumers=consumers,
        migrations=_migrations(settings, clock),
        horizon=horizon,
    )


def _waits(settings: Settings, conn: Conn | Unavailable, timeout: float) -> dict[str, Waiting] | Unavailable:
    """What waits for each group: its committed offsets (the broker) against the relay's acknowledged positions."""
    if isinstance(conn, Unavailable):
        return conn
    quiet = silent_client_logger("pin.status.kafka")  # the report says "n/a" instead of librdkafka's lines
    overrides = {"socket.timeout.ms": max(1000, int(timeout * 1000)), "logger": quiet}
    admin = AdminClient(client_config(settings, **overrides))
    try:
        found = database.read(conn, lambda c: waiting.read_consumer_waits(group_reads(settings), c, admin, timeout))
    except KafkaException as exc:
        return Unavailable(f"broker: {error_text(exc)}")
    return found if isinstance(found, Unavailable) else {wait.group: Waiting.of(wait) for wait in found}


def _migrations(settings: Settings, clock: datetime | Unavailable) -> tuple[snapshot.MigrationView, ...] | Unavailable:
    """The event types in migration, with the groups still reading v1 (the routing table) and the deadline."""
    now = datetime.now(UTC) if isinstance(clock, Unavailable) else clock
    try:
        states = migration_states(settings.contract_migrations, migration_readers())
    except ConfigurationError as exc:
        return Unavailable(str(exc))
    shown = [f.name for f in fields(snapshot.MigrationView) if f.name != "overdue"]  # the state's, by name
    return tuple(
        snapshot.MigrationView(overdue=state.overdue(now), **{name: getattr(state, name) for name in shown})
        for state in states
    )


def _jobs(conn: Conn | Unavailable) -> tuple[JobView, ...]:
    """Every polling job's backlog, last cycles and poison items."""
    cycles = database.read(conn, database.cycles)
    poison = database.read(conn, database.poison)
    return tuple(
        JobView(
            job=items.job,
            due=items.description,
            backlog=database.read(conn, database.backlog(items)),
            cycles=cycles if isinstance(cycles, Unavailable) else cycles.get(items.job, Cycles()),
            poison=poison if isinstance(poison, Unavailable) else poison.get(items.job, Poison(items.job)),
        )
        for items in database.JOBS
    )
