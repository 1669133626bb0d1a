"""`pin status` draws a snapshot of typed values: what cannot be read says so, with its reason, once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from rich.console import Console

from pin.messaging import topics
from pin.messaging.groups import SLA_SECONDS
from pin.status import Snapshot, Unavailable, render
from pin.status.snapshot import (
    Backlog,
    BrokerUnavailable,
    CdcSlot,
    ConsumerView,
    Cycles,
    DeadLetters,
    InboxActivity,
    JobView,
    Leases,
    OutboxBacklog,
    OutboxView,
    Poison,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _text(snapshot: Snapshot) -> str:
    console = Console(record=True, width=220, color_system=None)
    console.print(render(snapshot))
    return console.export_text()


# the recent p99 age of each group's events: 90 s everywhere but news, which had no event in the window
_P99 = {"crm": 90.0, "notifications": 90.0, "catalog": 30.0, "news": None}


def _inbox(group: str) -> InboxActivity:
    return InboxActivity(
        last_processed_at=None, last_processed_seconds_ago=None, processed_last_5_min=0, parked_letters=0,
        recent_p99_age_seconds=_P99[group], sla_seconds=SLA_SECONDS[group],
    )  # fmt: skip


def _snapshot() -> Snapshot:
    backlog = Backlog(count=10_001, capped=True, oldest_due_at=NOW, oldest_overdue_seconds=3725.0, oldest_id="a-1")
    job = JobView("expire-promotions", "Active purchases past EndsAt", backlog, Cycles(), Poison("expire-promotions"))
    missing = Unavailable('not deployed yet (relation "outbox.message" does not exist)')
    broker = BrokerUnavailable("not asked (--no-kafka)")
    consumers = tuple(ConsumerView(group, _inbox(group), broker) for group in topics.CONSUMER_GROUPS)
    return Snapshot(clock=NOW, jobs=(job,), outbox=OutboxView(missing, missing, missing), consumers=consumers)


@pytest.mark.unit
def test_a_snapshot_built_by_hand_renders_its_unavailable_parts_with_their_reasons() -> None:
    text = _text(_snapshot())
    assert "database clock 2026-03-01 12:00:00Z" in text
    assert "10000+" in text  # the count stopped at its cap
    assert "1h02m (a-1)" in text  # the oldest overdue item, by id
    assert "no cycle yet" in text
    assert 'n/a: not deployed yet (relation "outbox.message" does not exist)' in text
    assert text.count("not asked (--no-kafka)") == 1  # one reason for every group: said once, in the caption


@pytest.mark.unit
def test_a_snapshot_reads_as_its_json_document() -> None:
    snapshot = _snapshot()
    document = json.loads(json.dumps(snapshot.document(), default=str))
    assert document == json.loads(json.dumps(dict(snapshot), default=str))
    (job,) = document["workers"]
    assert job["backlog"]["backlogCapped"] is True
    assert job["poison"] == {"items": 0}
    assert job["instances"] == []
    assert document["outbox"]["leases"] == {"na": 'not deployed yet (relation "outbox.message" does not exist)'}
    assert document["consumers"][0]["broker"] == {"na": "not asked (--no-kafka)", "scope": "all"}


@pytest.mark.unit
def test_cdc_mode_shows_the_slot_and_its_retained_wal_instead_of_the_relays() -> None:
    empty = OutboxBacklog(lag_seconds=0.0, topics=(), capped=False)
    slot = CdcSlot("pin_outbox", exists=True, active=False, retained_wal_bytes=3 * 2**30, wal_status="extended")
    base = _snapshot()
    snapshot = Snapshot(
        clock=NOW,
        jobs=base.jobs,
        outbox=OutboxView(empty, DeadLetters(()), Leases((), unowned_vparts=64), cdc=slot),
        consumers=base.consumers,
    )
    text = _text(snapshot)
    assert "cdc mode: slot pin_outbox not streaming, keeps 3072.0 MiB of WAL" in text
    assert "vparts unowned" not in text  # no relay runs in cdc mode: that is not a fault
    assert snapshot["outbox"]["cdc"]["retainedWalBytes"] == 3 * 2**30
    missing = Snapshot(
        clock=NOW,
        jobs=base.jobs,
        outbox=OutboxView(empty, DeadLetters(()), Leases((), 64), cdc=CdcSlot("pin_outbox", False, None, None, None)),
        consumers=base.consumers,
    )
    assert "replication slot pin_outbox does not exist" in _text(missing)


@pytest.mark.unit
def test_each_groups_recent_p99_age_is_shown_against_its_own_sla() -> None:
    snapshot = _snapshot()
    rows = {
        line.split()[1]: line
        for line in _text(snapshot).splitlines()
        if line.split()[1:2] in (["crm"], ["notifications"], ["catalog"], ["news"])
    }
    assert "1m30s / 1m00s over SLA" in rows["crm"]  # 90 s against crm's 1 min
    assert "1m30s / 5m00s" in rows["notifications"]  # within its 5 min
    assert "over SLA" not in rows["notifications"]
    assert "30s / 1m00s" in rows["catalog"]
    assert "over SLA" not in rows["catalog"]
    assert "- / 1m00s" in rows["news"]  # nothing in the window: nothing to compare
    groups = {c["group"]: c["inbox"] for c in snapshot["consumers"]}
    assert groups["crm"]["recentP99AgeSeconds"] == 90.0
    assert {group: inbox["slaSeconds"] for group, inbox in groups.items()} == SLA_SECONDS
