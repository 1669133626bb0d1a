"""A stop reaches the relay's statement in flight (seed 000, "Cancellation"): a real `pin relay` whose settle
waits on a row the test's own connection holds receives SIGTERM; it settles what the broker acknowledged and no
other transaction holds, releases its leases, and exits 0 within 3 s."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable

import pytest

from pin.db import connect
from pin.local.embedded.kafka import EmbeddedKafka
from pin.settings import Settings
from tests.outbox.support import (
    RELAY_TEST_ENV,
    TOPIC,
    broker_settings,
    event_row,
    insert_rows,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.contention import holding_connection
from tests.support.kafka import read_topic
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.deep(only=True)]


def _settle_waits(database_url: str) -> bool:
    """Whether a session of this database waits on a lock in the relay's delete of acknowledged rows."""
    count = scalar(
        database_url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
        " AND wait_event_type = 'Lock' AND query LIKE '%%DELETE FROM outbox.message%%'",
    )
    return bool(count)


def test_sigterm_cancels_the_settle_in_flight_settles_the_free_rows_and_releases_the_leases(
    database_url: str,
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    broker_settings(make_settings, kafka.bootstrap_servers)
    held, *_free = insert_rows(database_url, [event_row(f"key-{k}", 1) for k in range(4)])
    holder = holding_connection(database_url)
    try:
        holder.execute("SELECT 1 FROM outbox.message WHERE message_id = %s FOR UPDATE", (held.message_id,))
        relay = spawn_role("relay", env={"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, **RELAY_TEST_ENV})
        wait_for(lambda: _settle_waits(database_url), timeout=60, what="the settle to wait on the held row")

        started = time.monotonic()
        relay.process.send_signal(signal.SIGTERM)
        code = relay.wait(15)
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()

    assert code == 0, relay.output()
    assert took < 3.0
    lines = [json.loads(line) for line in relay.output().splitlines() if line.startswith("{")]
    (line,) = [entry for entry in lines if str(entry.get("event", "")).startswith("outbox relay stopping")]
    assert (line["acknowledged"], line["deleted"], line["held"]) == (4, 3, 1)
    assert not [entry for entry in lines if entry.get("event") == "outbox relay cycle failed"]
    # what the broker acknowledged is settled, but for the held row: that one is sent again (deduplicated downstream)
    assert len(read_topic(kafka.bootstrap_servers, TOPIC, expected=4)) == 4
    assert outbox_count(database_url) == 1
    assert scalar(database_url, "SELECT message_id FROM outbox.message") == held.message_id
    # the leases given back at once, and no lock left: a follow-up statement gets the row
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_lease WHERE owner IS NOT NULL") == 0
    with connect(database_url) as conn:
        conn.execute("SELECT 1 FROM outbox.message FOR UPDATE NOWAIT")
        conn.rollback()
