"""The relay across a network that drops packets: a relay in a network namespace whose path to the broker is cut
(PostgreSQL still reachable) gives its leases up within the stated bound, a relay on the host takes its keys and
publishes them, the cut-off relay takes its share back once the path returns; nothing lost, per-key order kept
(tests/support/netns.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from tests.outbox.support import (
    TOPIC,
    duplicates,
    event_row,
    first_seqs_by_key,
    insert_rows,
    outbox_count,
    scalar,
    wait_for,
)
from tests.support.kafka import read_topic
from tests.support.netns import CutOffLab, Link, settings_of
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("netns")]

# The relays' settings: the production settings, shortened so that the test takes seconds.
RELAY_ENV = {
    "PIN_RELAY_HEARTBEAT_SECONDS": "0.5",
    "PIN_RELAY_LEASE_TTL_SECONDS": "2",
    "PIN_RELAY_MESSAGE_TIMEOUT_MS": "3000",
    "PIN_RELAY_UNDELIVERED_GIVE_UP_SECONDS": "4",
    "PIN_RELAY_BATCH_SIZE": "50",
    "PIN_KAFKA_SOCKET_TIMEOUT_MS": "3000",
    "PIN_KAFKA_REQUEST_TIMEOUT_MS": "2000",
}
SETTINGS = settings_of(RELAY_ENV)
# what docs/operations.md states: a relay that cannot reach the broker has given its leases up after at most
# the give-up bound (its first unacknowledged send counts from the cut) plus the settling of what it has out
# (message.timeout.ms), and the other relays take them at their next heartbeat
MOVE_BOUND = (
    SETTINGS.relay.undelivered_give_up_seconds
    + SETTINGS.relay.message_timeout_ms / 1000
    + SETTINGS.relay.heartbeat_seconds
    + SETTINGS.relay.poll_interval_seconds
)
OWNED_BY = "SELECT count(*) FROM outbox.relay_lease_state WHERE owner = %s AND live"
OWNERS = "SELECT array_agg(DISTINCT owner) FROM outbox.relay_lease_state WHERE live"


def owners(database_url: str) -> list[str]:
    """The relays holding a live lease."""
    return sorted(scalar(database_url, OWNERS) or [])  # type: ignore[call-overload]


def test_a_relay_cut_off_from_the_broker_gives_its_keys_up_within_the_bound_and_takes_them_back(
    netns_lab: CutOffLab,
    cut_database_url: str,
    broker_link: tuple[Link, EmbeddedKafka],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    link, broker = broker_link
    database_url = cut_database_url
    env = {**RELAY_ENV, "PIN_DATABASE_URL": database_url, "PIN_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers}
    ensure_topics(Settings.model_validate({"kafka_bootstrap_servers": broker.bootstrap_servers}), [TOPIC])
    cut_off = spawn_role("relay", env=env,
                         prefix=tuple(netns_lab.namespace.command([])))  # fmt: skip
    wait_for(lambda: len(owners(database_url)) == 1, timeout=30, what="the cut-off relay to own the vparts")
    (cut_owner,) = owners(database_url)
    survivor = spawn_role("relay", env=env)
    wait_for(lambda: len(owners(database_url)) == 2, timeout=30, what="the two relays to share the vparts")

    keys = [f"thing-{n}" for n in range(64)]
    written = insert_rows(database_url, [event_row(key, 1) for key in keys])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=20, what="the first rows published by both")
    link.cut()
    cut_at = time.monotonic()
    written += insert_rows(database_url, [event_row(key, seq) for seq in (2, 3) for key in keys])
    wait_for(lambda: scalar(database_url, OWNED_BY, [cut_owner]) == 0, timeout=MOVE_BOUND + 10,
             what="the cut-off relay to give its leases up")  # fmt: skip
    moved_after = time.monotonic() - cut_at
    wait_for(lambda: outbox_count(database_url) == 0, timeout=20, what="the survivor to publish the cut-off share")
    link.restore()
    restored_at = time.monotonic()
    wait_for(lambda: scalar(database_url, OWNED_BY, [cut_owner]) > 0, timeout=30, what="the share taken back")  # type: ignore[operator]
    written += insert_rows(database_url, [event_row(key, 4) for key in keys])
    wait_for(lambda: outbox_count(database_url) == 0, timeout=20, what="both relays to publish again")
    resumed_after = time.monotonic() - restored_at
    survivor.terminate()
    cut_off.terminate()

    print(
        f"relay: leases moved {moved_after:.1f} s after the cut; share back and published {resumed_after:.1f} s after"
    )
    assert moved_after <= MOVE_BOUND + 1.0, (moved_after, MOVE_BOUND)
    records = read_topic(broker.bootstrap_servers, TOPIC, timeout=30, idle=3.0)  # duplicates included
    assert {r.headers["message-id"] for r in records} == {str(row.message_id) for row in written}  # none lost
    assert first_seqs_by_key(records) == {key: [1, 2, 3, 4] for key in keys}  # per-key order kept
    print(f"relay: {duplicates(records)} records sent twice")
    assert duplicates(records) <= 2 * SETTINGS.relay.batch_size * (SETTINGS.relay.batches_in_flight + 1)
    assert "giving its leases up" in cut_off.output()
