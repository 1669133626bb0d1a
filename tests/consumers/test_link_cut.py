"""A consumer across a network that drops packets: a crm consumer in a network namespace is cut off from
PostgreSQL in the middle of a batch (the broker still reachable, over a second pair). The server ends its batch
transaction within the stated bound, a second instance started after the cut gets partitions within seconds
(the group is not held back), the cut-off one applies the rest once the link returns: every effect once
(tests/support/netns.py)."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable

import pytest

from pin.db import create_pool, server_release_bound_seconds
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from tests.calendar.worker.test_timeout_link_cut import held_by
from tests.consumers.support import Producing, cancelled, feed_entries, wait_for
from tests.support.netns import DEAD_PEER_ENV, CutOffLab, Link, settings_of
from tests.support.processes import RoleProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("netns")]

# The consumers' settings: the production settings, shortened so that the test takes seconds.
CUT_OFF_ENV = {
    **DEAD_PEER_ENV,
    "PIN_CONSUMER_STATEMENT_TIMEOUT_MS": "2000",
    "PIN_KAFKA_SESSION_TIMEOUT_MS": "6000",
    "PIN_KAFKA_MAX_POLL_INTERVAL_MS": "15000",
    "PIN_STOP_TIMEOUT_SECONDS": "4",
}
SETTINGS = settings_of(CUT_OFF_ENV)
RELEASE_BOUND = server_release_bound_seconds(SETTINGS, "consumer")
EVENTS = 40


def assigned(process: RoleProcess) -> bool:
    """Whether the process logged a non-empty assignment."""
    for line in process.output().splitlines():
        if line.startswith("{") and '"partitions assigned"' in line and json.loads(line).get("partitions"):
            return True
    return False


def test_a_consumer_cut_off_mid_batch_holds_nobody_back_and_applies_every_effect_once(
    netns_lab: CutOffLab,
    cut_database_url: str,
    broker_link: tuple[Link, EmbeddedKafka],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    namespace = netns_lab.namespace
    _link, broker = broker_link
    bootstrap = broker.bootstrap_servers
    env = {**CUT_OFF_ENV, "PIN_DATABASE_URL": cut_database_url, "PIN_KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    ensure_topics(Settings.model_validate({"kafka_bootstrap_servers": bootstrap}))
    pool = create_pool(cut_database_url, min_size=1, max_size=2, name="test-consumer-cut")
    producer = Producing(bootstrap)
    try:
        with pool.connection() as conn:  # each feed entry holds its batch's transaction 300 ms
            conn.execute("CREATE FUNCTION public.test_slow_feed() RETURNS trigger LANGUAGE plpgsql AS $$"
                         " BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$")  # fmt: skip
            conn.execute("CREATE TRIGGER test_slow_feed BEFORE INSERT ON crm.lead_feed_entry"
                         " FOR EACH ROW EXECUTE FUNCTION public.test_slow_feed()")  # fmt: skip
        cut_off = spawn_role("consume", "crm", env=env, prefix=tuple(namespace.command([])))
        wait_for(lambda: assigned(cut_off) or None, timeout=40, what="the cut-off consumer's partitions")
        events = [cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
                  for _ in range(EVENTS)]  # fmt: skip
        for event in events:
            producer.send(topics.APPOINTMENT_CANCELLED, event)
        wait_for(lambda: held_by(pool, namespace.role_address) > 0 or None, timeout=30, what="a batch under way")
        namespace.cut()
        cut_at = time.monotonic()
        survivor = spawn_role("consume", "crm", env=env)
        wait_for(lambda: held_by(pool, namespace.role_address) == 0 or None, timeout=RELEASE_BOUND + 5,
                 what="the server to end the cut-off batch")  # fmt: skip
        released_after = time.monotonic() - cut_at
        with pool.connection() as conn:  # the rest at full speed: what follows measures the resumption
            conn.execute("DROP TRIGGER test_slow_feed ON crm.lead_feed_entry")
        wait_for(lambda: assigned(survivor) or None, timeout=40, what="the second instance's partitions")
        assigned_after = time.monotonic() - cut_at
        namespace.restore()
        restored_at = time.monotonic()
        wait_for(lambda: all(feed_entries(pool, e["AppointmentId"]) for e in events) or None, timeout=60,
                 what="every event applied")  # fmt: skip
        applied_after = time.monotonic() - restored_at
        counts = [len(feed_entries(pool, event["AppointmentId"])) for event in events]
        survivor.terminate()
        # a stop reaches the consumer while its batch waits on the dead connection
        late = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
        producer.send(topics.APPOINTMENT_CANCELLED, late)
        namespace.cut()
        time.sleep(1.0)
        stopped_at = time.monotonic()
        cut_off.process.send_signal(signal.SIGTERM)
        cut_off.wait(SETTINGS.stop_timeout_seconds + 10)
        stopped_after = time.monotonic() - stopped_at
        namespace.restore()
    finally:
        producer.close()
        pool.close()

    print(f"consumer: locks released {released_after:.1f} s after the cut, a new instance assigned after "
          f"{assigned_after:.1f} s; every effect applied {applied_after:.1f} s after the return")  # fmt: skip
    assert released_after <= RELEASE_BOUND + 1.0
    # a member stuck on the database holds a rebalance at most max.poll.interval.ms (+ the new process's start)
    assert assigned_after <= SETTINGS.kafka.max_poll_interval_ms / 1000 + 10
    assert counts == [1] * EVENTS  # every effect once
    print(f"consumer: stopped {stopped_after:.1f} s after SIGTERM while cut off")
    assert stopped_after <= SETTINGS.stop_timeout_seconds + 1.0
