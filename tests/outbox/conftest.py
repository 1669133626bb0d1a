"""Fixtures of the relay tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.outbox.relay import OutboxRelay
from pin.settings import Settings
from tests.outbox.support import drop_producer, make_relay


@pytest.fixture
def new_relay(kafka: EmbeddedKafka, pool: ConnectionPool[Conn]) -> Iterator[Callable[..., OutboxRelay]]:
    """In-process relays on the test's pool; their producers are closed before the broker stops."""
    relays: list[OutboxRelay] = []

    def _new(settings: Settings, **kwargs: object) -> OutboxRelay:
        relay = make_relay(pool, settings, **kwargs)  # type: ignore[arg-type]
        relays.append(relay)
        return relay

    yield _new
    for relay in relays:
        drop_producer(relay)
