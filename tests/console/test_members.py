"""Consumer members with their partitions and lanes on the console, from a real consumer group of two members over a
real broker and PostgreSQL: each member's partitions on the overview and the group's page are those confluent-kafka
assigned it (its Consumer's own ``assignment()``), a key one member's lane holds in retry is shown under that member,
and once one member stops the other is shown with every partition."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from psycopg_pool import ConnectionPool

from pin.consumer_groups import build_runtime
from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.consumer.runtime import ConsumerRuntime
from pin.settings import Settings
from tests.console.conftest import TestClient
from tests.consumers.conftest import settings  # noqa: F401 - the fixture
from tests.consumers.support import expired_cancellation, key_of, refuse_feed_entries, wait_for
from tests.consumers.test_lanes import _produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEARTBEAT = 0.3  # each member's PIN_CONSUMER_MEMBERSHIP_HEARTBEAT_SECONDS here
_TOPIC_PARTITIONS = re.compile(r'<span class="topic">([^<]*)</span> \[<span class="partitions">([^<]*)</span>\]')
_HELD = re.compile(
    r'<div class="lane-held">lane (\d+): ([^<\[]*)\[(\d+)\]@(\d+) holds key <a [^>]*><code>([^<]*)</code>'
)


@contextmanager
def _member(runtime: ConsumerRuntime) -> Iterator[threading.Event]:
    """Run ``runtime`` in a thread until the block ends or the event it yields is set; a crash fails the test."""
    stop, crashed = threading.Event(), []

    def _run() -> None:
        try:
            runtime.run(stop)
        except BaseException as exc:
            crashed.append(exc)

    thread = threading.Thread(target=_run, name=f"member-{runtime.group}", daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), "a consumer did not stop within 30 s"
        if crashed:
            raise crashed[0]


def _assigned(runtime: ConsumerRuntime) -> frozenset[tuple[str, int]]:
    """What confluent-kafka assigned the member: its Consumer's own assignment (empty once it stopped)."""
    consumer = runtime._consumer
    return frozenset((tp.topic, tp.partition) for tp in consumer.assignment()) if consumer is not None else frozenset()


def _shown(client: TestClient, path: str) -> dict[str, dict[str, object]]:
    """Per member on ``path``'s members table: the partitions shown and the keys shown held in its lanes."""
    page = client.get(path)
    assert page.status_code == 200, page.text
    table = page.text.split('<table id="members">', 1)[1].split("</table>", 1)[0]
    members: dict[str, dict[str, object]] = {}
    for row in table.split("<tr>")[2:]:
        member = html.unescape(row.split("<code>", 1)[1].split("</code>", 1)[0])
        partitions = {
            (html.unescape(topic), int(number))
            for topic, numbers in _TOPIC_PARTITIONS.findall(row)
            for number in numbers.split(", ")
        }
        held = {(html.unescape(t.strip()), int(p), html.unescape(k)) for _, t, p, _, k in _HELD.findall(row)}
        lanes = int(row.split('<span class="lane-count">', 1)[1].split("</span>", 1)[0])
        members[member] = {"partitions": frozenset(partitions), "held": held, "lanes": lanes}
    return members


def test_each_members_partitions_and_lanes_are_shown_as_assigned_and_the_last_member_shows_them_all(
    settings: Settings,  # noqa: F811
    kafka: EmbeddedKafka,
    pool: ConnectionPool[Conn],
    operator: TestClient,
) -> None:
    bad = expired_cancellation()
    refuse_feed_entries(pool, bad["AppointmentId"])  # its effect fails on every attempt: a lane holds its key
    _produce(kafka.bootstrap_servers, topics.APPOINTMENT_CANCELLED, [bad], partition=0)
    options = {"lanes": 2, "membership_interval": HEARTBEAT, "backoff_cap": 0.2, "statistics_interval_ms": 500}
    first, second = (build_runtime("crm", settings, pool, **options) for _ in range(2))
    every = frozenset((topic, p) for topic in first.topics for p in range(topics.PARTITIONS))
    with _member(first) as stop_first, _member(second):
        wait_for(lambda: _assigned(first) and _assigned(second) and _assigned(first) | _assigned(second) == every,
                 timeout=60, what="the partitions split between the two members")  # fmt: skip
        assert not _assigned(first) & _assigned(second)
        ids = {first: first._membership.member, second: second._membership.member}
        assert len(set(ids.values())) == 2  # two instances in one process: a row each

        def as_assigned(path: str) -> dict[str, dict[str, object]] | None:
            shown = _shown(operator, path)
            ok = set(shown) == set(ids.values()) and all(
                shown[ids[r]]["partitions"] == _assigned(r) for r in (first, second)
            )
            return shown if ok else None

        for path in ("/console", "/console/groups/crm"):
            shown = wait_for(lambda p=path: as_assigned(p), timeout=20, what=f"{path} to show the assignment")
            for runtime in (first, second):
                assert shown[ids[runtime]]["partitions"] == _assigned(runtime)
                assert shown[ids[runtime]]["lanes"] == 2
        # the key in retry, under the member that holds its partition (shown at that member's next heartbeat)
        holder = first if (topics.APPOINTMENT_CANCELLED, 0) in _assigned(first) else second
        other = second if holder is first else first
        key = key_of(topics.APPOINTMENT_CANCELLED, bad)
        shown = wait_for(
            lambda: (s := _shown(operator, "/console/groups/crm")) and s.get(ids[holder], {}).get("held") and s,
            timeout=20, what="the held key on the group's page",
        )  # fmt: skip
        assert shown[ids[holder]]["held"] == {(topics.APPOINTMENT_CANCELLED, 0, key)}
        assert shown[ids[other]]["held"] == set()

        stop_first.set()  # the first member leaves: its row goes, and the second is assigned every partition
        wait_for(lambda: _assigned(second) == every, timeout=60, what="every partition assigned to the second member")
        last = wait_for(
            lambda: (s := _shown(operator, "/console/groups/crm")) and set(s) == {ids[second]} and s, timeout=20,
            what="the first member's row gone",
        )  # fmt: skip
        shown_all = wait_for(
            lambda: (s := _shown(operator, "/console")) and s.get(ids[second], {}).get("partitions") == every and s,
            timeout=20, what="the second member shown with every partition",
        )  # fmt: skip
        assert set(shown_all) == {ids[second]}
        assert shown_all[ids[second]]["partitions"] == _assigned(second) == every
        assert set(last) == {ids[second]}
