"""One snapshot for `pin status`, from the database and the broker; a part that cannot be read is unavailable,
with its reason, and never stops the rest."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from pin.db import Conn
from pin.messaging import topics
from pin.messaging.migrations import migration_states
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
)


def collect_status(settings: Settings, *, kafka: bool = True, kafka_timeout: float = 3.0) -> Snapshot:
    """One snapshot of everything `pin status` shows (as a mapping, the `--json` document)."""
    with database.connection(settings) as conn:
        clock = database.read(conn, database.clock)
        jobs = _jobs(conn)
        outbox = OutboxView(
            backlog=database.read(conn, database.outbox_backlog),
            dead_letters=database.read(conn, database.dead_letters),
            leases=database.read(conn, database.leases),
            cdc=database.read(conn, database.cdc_slot(settings.outbox_cdc_slot))
            if settings.outbox_mode == "cdc"
            else None,
        )
        inbox = database.read(conn, database.inbox)
        members = database.read(conn, database.members(settings.wedged_after_seconds()))
        horizon = database.read(conn, database.horizon)
    offsets = consumer_offsets(settings, kafka_timeout) if kafka else BrokerUnavailable("not asked (--no-kafka)")
    consumers = tuple(
        ConsumerView(
            group=group,
            inbox=inbox if isinstance(inbox, Unavailable) else inbox[group],
            broker=offsets if isinstance(offsets, Unavailable) else offsets[group],
            members=members if isinstance(members, Unavailable) else members[group],
        )
        for group in topics.CONSUMER_GROUPS
    )
    return Snapshot(
        clock=clock,
        jobs=jobs,
        outbox=outbox,
        consumers=consumers,
        migrations=_migrations(settings, clock),
        horizon=horizon,
    )


def _migrations(settings: Settings, clock: datetime | Unavailable) -> tuple[snapshot.MigrationView, ...] | Unavailable:
    """The event types in migration, with the groups still reading v1 (the routing table) and the deadline."""
    now = datetime.now(UTC) if isinstance(clock, Unavailable) else clock
    try:
        states = migration_states(settings.contract_migrations)
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
