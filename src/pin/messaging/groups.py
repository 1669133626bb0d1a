"""The four consumer groups (SPEC section 7): which topics each reads, and a runtime built for one.

Part of the composition root (called by :func:`pin.bootstrap.run_consumer` and by tests); the contexts' handler
modules are imported lazily so that one group's process does not load the others.
"""

from __future__ import annotations

import importlib
from typing import Any

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.consumer import ConsumerRuntime, Route
from pin.messaging.kafka import consumer_config, producer_config
from pin.messaging.topics import CONSUMER_GROUPS
from pin.settings import ConfigurationError, Settings

# group -> the module whose routes() says what the group reads
_HANDLERS = {
    "crm": "pin.crm.handler",
    "notifications": "pin.notifications.handler",
    "catalog": "pin.catalog.handler",
    "news": "pin.news.handler",
}
assert set(_HANDLERS) == set(CONSUMER_GROUPS)


def routes_of(group: str) -> dict[str, Route[Any]]:
    """The topics ``group`` reads and its handler for each."""
    if group not in _HANDLERS:
        raise ConfigurationError(f"unknown consumer group {group!r} (one of {', '.join(CONSUMER_GROUPS)})")
    routes: dict[str, Route[Any]] = importlib.import_module(_HANDLERS[group]).routes()
    return routes


def topics_of(group: str) -> tuple[str, ...]:
    """The topics ``group`` subscribes to: its route table's, the one source for status, docs and runbooks."""
    return tuple(routes_of(group))


def build_runtime(group: str, settings: Settings, pool: ConnectionPool[Conn], **options: Any) -> ConsumerRuntime:
    """A consumer instance of ``group`` on ``pool``; ``options`` go to :class:`ConsumerRuntime` (retry, hooks)."""
    return ConsumerRuntime(
        group=group,
        routes=routes_of(group),
        pool=pool,
        consumer_config=consumer_config(settings, group, **{"client.id": f"pin-consume-{group}"}),
        producer_config=producer_config(settings, **{"client.id": f"pin-consume-{group}-dlq", "linger.ms": 0}),
        **{"max_message_bytes": settings.kafka_max_message_bytes, **options},
    )
