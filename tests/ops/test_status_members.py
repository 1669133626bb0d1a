"""`pin status` tells a wedged consumer group from the members' own rows (``messaging.consumer_member``): the
embedded broker answers DescribeGroups with no members, so a real consumer process records its assignment and
heartbeat, and `pin status` flags a group whose live members have held no partition for longer than the bound.

No broker here wedges a group on demand, so the wedged case is made of rows the test writes into the real database
(the same columns a consumer writes); the healthy case and the stale row are a real `pin consume` process's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from psycopg_pool import ConnectionPool
from rich.console import Console

from pin.db import Conn
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging.consumer.membership import Membership
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from pin.status import collect_status, render
from tests.consumers.support import rows, wait_for
from tests.support.processes import RoleProcess

HEARTBEAT = 0.3  # the consumer process's PIN_CONSUMER_MEMBERSHIP_HEARTBEAT_SECONDS here: stale after 0.9 s


def _members(report: Any) -> dict[str, dict[str, Any]]:
    return {c["group"]: c["members"] for c in report["consumers"]}


def _member_rows(pool: ConnectionPool[Conn], group: str) -> list[dict[str, Any]]:
    return rows(pool, "SELECT * FROM messaging.consumer_member WHERE consumer_group = %s", group)


def _text(report: Any) -> str:
    console = Console(record=True, width=260, color_system=None)
    console.print(render(report))
    return console.export_text()


@pytest.mark.integration
@pytest.mark.slow
def test_a_real_consumer_records_its_assignment_and_heartbeat_and_its_row_goes_stale_when_killed(
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    pool: ConnectionPool[Conn],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    ensure_topics(settings)
    env = {
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_CONSUMER_MEMBERSHIP_HEARTBEAT_SECONDS": str(HEARTBEAT),
    }
    consumer = spawn_role("consume", "crm", env=env)
    first = wait_for(
        lambda: [r for r in _member_rows(pool, "crm") if r["partitions"] > 0], timeout=40, what="crm's assignment row"
    )[0]
    assert first["member"].endswith(f":{consumer.pid}")  # host:pid, nothing else
    # the heartbeat moves on its interval; the assignment's time stays (the count did not change)
    later = wait_for(
        lambda: [r for r in _member_rows(pool, "crm") if r["heartbeat_at"] > first["heartbeat_at"]],
        timeout=10,
        what="a later heartbeat",
    )[0]
    assert later["assignment_changed_at"] == first["assignment_changed_at"]
    assert later["stale_after_seconds"] == pytest.approx(3 * HEARTBEAT)

    report = collect_status(settings, kafka=False)
    crm = _members(report)["crm"]
    assert crm["liveMembers"] == 1
    assert crm["partitions"] == first["partitions"] > 0
    assert crm["wedged"] is False
    assert crm["unassignedSeconds"] is None
    assert f"1 ({first['partitions']} partitions)" in _text(report)
    assert _members(report)["news"] == {
        "liveMembers": 0, "partitions": 0, "unassignedSeconds": None,
        "wedgedAfterSeconds": settings.wedged_after_seconds(), "wedged": False,
    }  # fmt: skip

    consumer.kill9()  # no leave: the row stays, and stops counting once its heartbeat is 3 intervals old
    wait_for(lambda: _members(collect_status(settings, kafka=False))["crm"]["liveMembers"] == 0, timeout=10,
             what="the killed consumer's row to go stale")  # fmt: skip
    assert len(_member_rows(pool, "crm")) == 1
    assert _members(collect_status(settings, kafka=False))["crm"]["wedged"] is False


@pytest.mark.integration
@pytest.mark.slow
def test_a_consumer_stopped_cleanly_removes_its_row(
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
    pool: ConnectionPool[Conn],
    spawn_role: Callable[..., RoleProcess],
) -> None:
    ensure_topics(make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers))
    env = {"PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "PIN_CONSUMER_MEMBERSHIP_HEARTBEAT_SECONDS": "0.3"}
    consumer = spawn_role("consume", "news", env=env)
    wait_for(lambda: [r for r in _member_rows(pool, "news") if r["partitions"] > 0], timeout=40, what="news's row")
    assert consumer.terminate() == 0
    assert _member_rows(pool, "news") == []


def _member(
    pool: ConnectionPool[Conn], group: str, member: str, *, partitions: int, changed_ago: float, beat_ago: float
) -> None:
    """A member's row as a consumer writes it, with times on the database clock ``changed_ago``/``beat_ago`` s back."""
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO messaging.consumer_member"
            " (consumer_group, member, partitions, assignment_changed_at, heartbeat_at, stale_after_seconds)"
            " VALUES (%s, %s, %s, now() - make_interval(secs => %s), now() - make_interval(secs => %s), 15)",
            (group, member, partitions, changed_ago, beat_ago),
        )


@pytest.mark.integration
def test_status_flags_a_group_whose_live_members_held_no_partition_past_the_bound(
    make_settings: Callable[..., Settings], pool: ConnectionPool[Conn]
) -> None:
    # rows written by the test (no broker here wedges a group on demand): the columns a consumer writes
    _member(pool, "crm", "host-a:1", partitions=0, changed_ago=45, beat_ago=1)  # wedged: 45 s > 30 s
    _member(pool, "crm", "host-b:2", partitions=0, changed_ago=40, beat_ago=2)
    _member(pool, "crm", "host-c:3", partitions=5, changed_ago=900, beat_ago=60)  # stale: not a member
    _member(pool, "notifications", "host-a:4", partitions=0, changed_ago=5, beat_ago=1)  # rebalancing, in the bound
    _member(pool, "catalog", "host-a:5", partitions=0, changed_ago=900, beat_ago=1)  # one idle, the other holds all
    _member(pool, "catalog", "host-b:6", partitions=15, changed_ago=900, beat_ago=1)
    _member(pool, "news", "host-a:7", partitions=0, changed_ago=900, beat_ago=60)  # only a stale row: no members
    settings = make_settings(consumer_wedged_after_seconds=30)

    report = collect_status(settings, kafka=False)
    members = _members(report)
    assert members["crm"]["wedged"] is True
    assert members["crm"]["liveMembers"] == 2
    assert members["crm"]["partitions"] == 0
    assert 40 <= members["crm"]["unassignedSeconds"] < 60  # since the latest change of a live member
    assert members["crm"]["wedgedAfterSeconds"] == 30
    assert members["notifications"]["wedged"] is False
    assert 5 <= members["notifications"]["unassignedSeconds"] < 30
    assert members["catalog"] == {**members["catalog"], "liveMembers": 2, "partitions": 15, "wedged": False}
    assert members["catalog"]["unassignedSeconds"] is None
    assert members["news"] == {**members["news"], "liveMembers": 0, "wedged": False}
    text = _text(report)
    assert text.count("WEDGED") == 1
    assert "2, no partition for 40s: WEDGED" in text
    assert "1, no partition for 5s" in text


@pytest.mark.integration
def test_status_derives_the_bound_from_the_session_timeout_and_max_poll_interval(
    make_settings: Callable[..., Settings], pool: ConnectionPool[Conn]
) -> None:
    settings = make_settings(kafka_session_timeout_ms=6000, kafka_max_poll_interval_ms=20_000)
    assert settings.wedged_after_seconds() == 32.0  # 2 x 6 s + 20 s
    _member(pool, "crm", "host-a:1", partitions=0, changed_ago=31, beat_ago=1)
    _member(pool, "news", "host-a:2", partitions=0, changed_ago=33, beat_ago=1)
    members = _members(collect_status(settings, kafka=False))
    assert (members["crm"]["wedged"], members["news"]["wedged"]) == (False, True)


@pytest.mark.integration
def test_the_heartbeat_writes_once_per_interval_and_at_once_when_the_assignment_changes(
    pool: ConnectionPool[Conn],
) -> None:
    now = [0.0]
    membership = Membership(
        group="crm", pool=pool, interval=5.0, db_timeout=5.0, log=_NoLog(), member="host:1", clock=lambda: now[0]
    )

    def row() -> dict[str, Any]:
        (only,) = _member_rows(pool, "crm")
        return only

    membership.beat(frozenset())
    joined = row()
    now[0] = 1.0
    for _ in range(100):  # a hundred polls within the interval: no statement
        membership.beat(frozenset())
    assert row() == joined
    assigned_set = frozenset({("t", 0), ("t", 2), ("u", 1)})
    membership.beat(assigned_set)  # the rebalance callback changed the assignment: written at once
    assigned = row()
    assert assigned["partitions"] == 3
    assert assigned["assignment"] == {"t": [0, 2], "u": [1]}
    assert assigned["assignment_changed_at"] > joined["assignment_changed_at"]
    now[0] = 2.0
    membership.beat(frozenset({("t", 0), ("t", 1), ("u", 1)}))  # as many partitions, others: written at once
    moved = row()
    assert moved["assignment"] == {"t": [0, 1], "u": [1]}
    assert moved["assignment_changed_at"] > assigned["assignment_changed_at"]
    now[0] = 7.5
    membership.beat(frozenset({("t", 0), ("t", 1), ("u", 1)}))  # the interval passed: a heartbeat, same assignment
    beat = row()
    assert beat["heartbeat_at"] > moved["heartbeat_at"]
    assert beat["assignment_changed_at"] == moved["assignment_changed_at"]
    membership.leave()
    assert _member_rows(pool, "crm") == []


class _NoLog:
    """A logger that must not be called (every write here succeeds)."""

    def warning(self, event: str, **fields: object) -> None:
        raise AssertionError(f"unexpected warning {event} {fields}")
