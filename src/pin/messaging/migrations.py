"""Contract migrations at run time (docs/runbooks/contract-migration.md): what each event type in migration
publishes, which groups still read its v1, its deadline; checked at every role's start.

PIN_CONTRACT_MIGRATIONS (:class:`pin.settings.ContractMigration`) names, per event type, the window (``since`` ..
``deadline``), what the producers write (``dual``: both rows, ``v2``: the sunset) and the groups moved to v2. The
outbox's one row builder writes the rows (:func:`pin.outbox.writer.build_rows`, as the role's
:class:`~pin.outbox.writer.OutboxPolicy` built at start says); a
group's routes follow the setting (:func:`pin.messaging.groups.select_routes`). Which groups read an event type
is given by the composition root (:func:`pin.consumer_groups.migration_readers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from prometheus_client import Gauge

from pin.messaging.contracts import Contract, successions
from pin.messaging.topics import CONSUMER_GROUPS
from pin.settings import ConfigurationError, ContractMigration, Settings

log = structlog.get_logger(__name__)

DEADLINE = Gauge(
    "pin_contract_migration_deadline_timestamp_seconds",
    "The migration deadline of an event type still dual-published (its v1 rows not sunset yet), as a Unix time.",
    ["event_type"],
)
V1_GROUPS = Gauge(
    "pin_contract_migration_v1_groups",
    "Consumer groups that still read v1 of an event type in migration.",
    ["event_type"],
)


@dataclass(frozen=True)
class MigrationState:
    """One event type in migration: its two contracts' topics, what is published, who still reads v1, when."""

    event_type: str
    v1_topic: str
    v2_topic: str
    publish: str  # "dual" (both rows) or "v2" (sunset: v2 rows only)
    since: datetime
    deadline: datetime
    v1_groups: tuple[str, ...]  # the groups that read this event type and are not moved to v2
    v2_groups: tuple[str, ...]

    def overdue(self, now: datetime) -> bool:
        """The deadline has passed and v1 is still published (no sunset yet)."""
        return self.publish == "dual" and now >= self.deadline


def readers_by_event_type(topics_of: Callable[[str], Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The groups that read each event type with a successor (either version), from their route tables
    (``topics_of``: :func:`pin.consumer_groups.topics_of`, asked only when there is such an event type)."""
    pairs = successions()
    routed = {group: set(topics_of(group)) for group in CONSUMER_GROUPS} if pairs else {}
    return {
        event_type: tuple(g for g in CONSUMER_GROUPS if {old.TOPIC, new.TOPIC} & routed[g])
        for event_type, (old, new) in pairs.items()
    }


def migration_states(
    migrations: Mapping[str, ContractMigration], readers: Mapping[str, tuple[str, ...]]
) -> tuple[MigrationState, ...]:
    """Each configured migration's state; an event type without a successor contract is a configuration error.

    ``readers``: event type -> the groups reading it (:func:`readers_by_event_type`).
    """
    if not migrations:
        return ()
    pairs = successions()
    states = []
    for event_type, migration in sorted(migrations.items()):
        pair: tuple[type[Contract], type[Contract]] | None = pairs.get(event_type)
        if pair is None:
            raise ConfigurationError(
                f"PIN_CONTRACT_MIGRATIONS: {event_type!r} has no successor contract (a v2 naming its PREDECESSOR)"
            )
        old, new = pair
        reading = readers.get(event_type, ())
        on_v1 = tuple(g for g in reading if g not in migration.v2_groups)
        on_v2 = tuple(g for g in reading if g in migration.v2_groups)
        window = (migration.publish, migration.since, migration.deadline)
        states.append(MigrationState(event_type, old.TOPIC, new.TOPIC, *window, on_v1, on_v2))
    return tuple(states)


def check_migrations(settings: Settings, readers: Mapping[str, tuple[str, ...]]) -> tuple[MigrationState, ...]:
    """The states of PIN_CONTRACT_MIGRATIONS; a sunset while a group still reads v1 is refused unless forced."""
    states = migration_states(settings.contract_migrations, readers)
    for state in states:
        forced = settings.contract_migrations[state.event_type].force_sunset
        if state.publish == "v2" and state.v1_groups and not forced:
            raise ConfigurationError(
                f"PIN_CONTRACT_MIGRATIONS: sunset of {state.event_type} refused: {', '.join(state.v1_groups)} still"
                f" read {state.v1_topic} (move them to v2 first, or set force_sunset)"
            )
    return states


def start_migrations(
    settings: Settings, readers: Mapping[str, tuple[str, ...]], *, now: datetime | None = None
) -> tuple[MigrationState, ...]:
    """At a role's start: check the migrations, export the gauges the ContractMigrationOverdue alert reads, and warn
    of an overdue one; the caller gives the outbox writer what to publish (:func:`publishing`)."""
    states = check_migrations(settings, readers)
    now = now or datetime.now(UTC)
    for state in states:
        V1_GROUPS.labels(state.event_type).set(len(state.v1_groups))
        if state.publish == "dual":
            DEADLINE.labels(state.event_type).set(state.deadline.timestamp())
        else:  # sunset: nothing left to be late for
            with contextlib.suppress(KeyError):
                DEADLINE.remove(state.event_type)
        if state.overdue(now):
            log.warning(
                "contract migration overdue",
                event_type=state.event_type,
                deadline=state.deadline.isoformat(),
                v1_groups=list(state.v1_groups),
            )
    return states


def publishing(states: tuple[MigrationState, ...]) -> dict[str, str]:
    """What the outbox writer publishes per event type in migration (``dual`` or ``v2``), for
    :attr:`pin.outbox.writer.OutboxPolicy.publish`."""
    return {state.event_type: state.publish for state in states}
