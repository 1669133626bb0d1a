"""The four consumer groups' handlers (SPEC section 7), part of the composition root: which topics each group reads
(its handler module's route table, imported here), and a runtime built for one.

The plumbing that needs a group's topics is handed them from here, never imports a context: the ACLs
(:func:`pin.messaging.groups.topic_table`), the contract migrations' start checks
(:func:`pin.messaging.migrations.readers_by_event_type`) and what waits for each group (:mod:`pin.outbox.waiting`).
A group's handler module is imported when its routes are asked for, so that one group's process does not load the
others'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pin.messaging.groups import SLA_SECONDS, select_routes
from pin.messaging.migrations import readers_by_event_type
from pin.messaging.topics import CONSUMER_GROUPS
from pin.settings import ConfigurationError, Settings

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from pin.db import Conn
    from pin.messaging.consumer import ConsumerRuntime, Route

    Routes = dict[str, Route[Any]]


def _crm() -> Routes:
    from pin.crm import handler

    return handler.routes()


def _notifications() -> Routes:
    from pin.notifications import handler

    return handler.routes()


def _catalog() -> Routes:
    from pin.catalog import handler

    return handler.routes()


def _news() -> Routes:
    from pin.news import handler

    return handler.routes()


# group -> its handler module's routes(): what the group reads
_HANDLERS: dict[str, Callable[[], Routes]] = {
    "crm": _crm,
    "notifications": _notifications,
    "catalog": _catalog,
    "news": _news,
}
assert set(_HANDLERS) == set(CONSUMER_GROUPS)


def routes_of(group: str, settings: Settings | None = None) -> Routes:
    """The topics ``group``'s code reads and its handler for each; with ``settings``, those it reads now (of an
    event type it reads in both versions, the one PIN_CONTRACT_MIGRATIONS gives it:
    :func:`~pin.messaging.groups.select_routes`)."""
    if group not in _HANDLERS:
        raise ConfigurationError(f"unknown consumer group {group!r} (one of {', '.join(CONSUMER_GROUPS)})")
    routes = _HANDLERS[group]()
    return routes if settings is None else select_routes(group, routes, settings.outbox.contract_migrations)


def topics_of(group: str) -> tuple[str, ...]:
    """The topics ``group`` subscribes to: its route table's, the one source for status, docs and runbooks."""
    return tuple(routes_of(group))


def group_topics() -> dict[str, tuple[str, ...]]:
    """group -> the topics its code reads (either version of a migrating event type): the ACLs' reads."""
    return {group: topics_of(group) for group in CONSUMER_GROUPS}


def group_reads(settings: Settings) -> dict[str, tuple[str, ...]]:
    """group -> the topics it reads now (its route table, of a migrating event type the version it is on)."""
    return {group: tuple(routes_of(group, settings)) for group in CONSUMER_GROUPS}


def migration_readers() -> dict[str, tuple[str, ...]]:
    """The groups that read each event type with a successor, from their route tables (imported only when there is
    such an event type)."""
    return readers_by_event_type(topics_of)


def build_runtime(group: str, settings: Settings, pool: ConnectionPool[Conn], **options: Any) -> ConsumerRuntime:
    """A consumer instance of ``group`` on ``pool``; ``options``: :class:`ConsumerConfig` fields over the settings'
    (retry, batches, lanes), and the runtime's hooks (``after_effect``, ``paused``; a test's own ``routes``)."""
    # imported here: every role asks this module which groups read what, only a consumer builds one
    from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime
    from pin.messaging.consumer.metrics import SLA
    from pin.messaging.kafka import consumer_config, producer_config
    from pin.operations.pauses import GROUP, PauseFlag

    names = ConsumerConfig.field_names()
    config = ConsumerConfig.from_settings(settings, **{k: v for k, v in options.items() if k in names})
    hooks = {k: v for k, v in options.items() if k not in names}
    runtime = ConsumerRuntime(
        group=group,
        routes=hooks.pop("routes", None) or routes_of(group, settings),
        pool=pool,
        consumer_config=consumer_config(settings, group, **{"client.id": f"pin-consume-{group}"}),
        producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
        config=config,
        **{"paused": PauseFlag(pool, kind=GROUP, name=group), **hooks},
    )
    SLA.labels(group).set(SLA_SECONDS[group])
    return runtime
