"""`pin status`'s snapshot as rich tables: workers, poison items, last cycles, outbox, consumers."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pin.observability.thresholds import THRESHOLDS
from pin.outbox.writer import VPARTS
from pin.status.snapshot import (
    Backlog,
    BrokerUnavailable,
    CdcSlot,
    ConsumerView,
    Cycle,
    Cycles,
    GroupMembers,
    GroupOffsets,
    Horizon,
    InboxActivity,
    JobView,
    MigrationView,
    OutboxView,
    Poison,
    Snapshot,
    Unavailable,
    Waiting,
)

Cell = Text | str


def render(snapshot: Snapshot) -> RenderableType:
    """The snapshot as rich tables."""
    header = Text("pin status", style="bold")
    if isinstance(snapshot.clock, Unavailable):
        header.append("   database: ").append_text(_unavailable(snapshot.clock))
    else:
        header.append(f"   database clock {_time(snapshot.clock)}")
    parts: list[RenderableType] = [header]
    if snapshot.horizon is not None:
        parts.append(_horizon_text(snapshot.horizon))
    parts.append(_jobs_table(snapshot.jobs))
    poison = _poison_table(snapshot.jobs)
    if poison is not None:
        parts.append(poison)
    cycles = _cycles_table(snapshot.jobs)
    if cycles is not None:
        parts.append(cycles)
    parts += [_outbox_table(snapshot.outbox), _consumers_table(snapshot.consumers)]
    if snapshot.migrations:
        parts.append(_migrations_table(snapshot.migrations))
    return Group(*parts)


# A holder of the horizon older than this is shown in red: LongRunningTransaction's threshold, as the console's.
HORIZON_WARN_SECONDS = THRESHOLDS["database.transaction-age"].value


def _horizon_text(horizon: Horizon | Unavailable) -> Text:
    """Who holds the xmin horizon back, the oldest first: vacuum removes nothing younger than its xmin."""
    text = Text("xmin horizon held by: ")
    if isinstance(horizon, Unavailable):
        return text.append_text(_unavailable(horizon))
    if not horizon.holders:
        return text.append("nothing")
    for i, h in enumerate(horizon.holders):
        who = " ".join(
            part
            for part in (
                h.holder,
                f"pid {h.pid}" if h.pid is not None else "",
                h.name or "",
                f"({h.application})" if h.application else "",
            )
            if part
        )
        age = f"{_age(h.age_seconds)}, " if h.age_seconds is not None else ""
        old = h.age_seconds is not None and h.age_seconds > HORIZON_WARN_SECONDS
        text.append("; " if i else "").append(
            f"{who}: {age}{h.age_transactions:,.0f} transactions old", style="red bold" if old else ""
        )
    return text


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def _unavailable(part: Unavailable) -> Text:
    return Text(f"n/a: {part.reason}", style="yellow")


def _time(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%SZ")


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    return table


# --- workers ---------------------------------------------------------------------------------------------


def _jobs_table(jobs: tuple[JobView, ...]) -> Table:
    table = _table("Workers", "job", "backlog (due now)", "oldest overdue", "poison items", "last cycle")
    for job in jobs:
        table.add_row(job.job, *_backlog_cells(job.backlog), _poison_cell(job.poison), _last_cycle_cell(job.cycles))
    return table


def _backlog_cells(backlog: Backlog | Unavailable) -> list[Cell]:
    if isinstance(backlog, Unavailable):
        return [_unavailable(backlog), ""]
    count = f"{backlog.count - 1}+" if backlog.capped else str(backlog.count)
    oldest = backlog.oldest_overdue_seconds
    return [
        Text(count, style="red" if backlog.count else ""),
        "-" if oldest is None else f"{_age(oldest)} ({backlog.oldest_id})",
    ]


def _poison_cell(poison: Poison | Unavailable) -> Cell:
    if isinstance(poison, Unavailable):
        return _unavailable(poison)
    attempts = f" (up to {poison.max_attempts} attempts)" if poison.items else ""
    return Text(f"{poison.items}{attempts}", style="red" if poison.items else "")


def _last_cycle_cell(cycles: Cycles | Unavailable) -> Cell:
    if isinstance(cycles, Unavailable):  # jobs.cycle could not be read
        return _unavailable(cycles)
    if not cycles.latest:
        return Text("no cycle yet", style="yellow")
    newest = cycles.latest[0]
    last = Text(f"{_age(newest.seconds_ago)} ago", style="" if newest.succeeded else "red")
    if not newest.succeeded:
        last.append(" FAILED")
    return last


def _poison_table(jobs: tuple[JobView, ...]) -> Table | None:
    """The poison items of every job, the longest failing first (none: no table)."""
    poisoned = [job.poison for job in jobs if isinstance(job.poison, Poison) and job.poison.items]
    if not poisoned:
        return None
    table = _table(
        "Poison items (jobs.item_failure): tried again every cycle",
        "job",
        "item id",
        "attempts",
        "failing since",
        "last error",
    )
    for poison in poisoned:
        for item in poison.oldest:
            table.add_row(poison.job, item.id, str(item.attempts), _time(item.failing_since), item.last_error)
    hidden = sum(poison.items - len(poison.oldest) for poison in poisoned)
    if hidden:
        table.caption = f"{hidden} more poison items not shown"
    return table


def _cycles_table(jobs: tuple[JobView, ...]) -> Table | None:
    readable = [job.cycles for job in jobs if isinstance(job.cycles, Cycles)]
    shown = [cycle for cycles in readable for cycle in cycles.latest]
    if not shown:
        return None
    table = _table(
        "Last cycle of each worker instance (jobs.cycle)", "job", "instance", "finished", "outcome", "took", "counters"
    )
    older = sum(cycles.older for cycles in readable)
    if older:
        table.caption = f"{older} older instances (finished earlier, probably restarted) not shown"
    for cycle in shown:
        table.add_row(*_cycle_cells(cycle))
    return table


def _cycle_cells(cycle: Cycle) -> list[Cell]:
    counters = ", ".join(f"{k}={v}" for k, v in sorted((cycle.counters or {}).items()))
    return [
        cycle.job,
        cycle.instance,
        f"{_age(cycle.seconds_ago)} ago",
        Text("ok") if cycle.succeeded else Text("FAILED", style="red"),
        f"{cycle.duration_ms} ms",
        counters,
    ]


# --- outbox ----------------------------------------------------------------------------------------------


def _outbox_table(outbox: OutboxView) -> RenderableType:
    backlog, dead, leases = outbox.backlog, outbox.dead_letters, outbox.leases
    if isinstance(backlog, Unavailable):
        return Group(Text("Outbox", style="italic"), _unavailable(backlog))
    table = _table("Outbox", "topic", "waiting", "oldest", "in backoff", "dead letters")
    dead_by_topic = {} if isinstance(dead, Unavailable) else dead.by_topic()
    waiting = {t.topic: t for t in backlog.topics}
    names = sorted(waiting.keys() | dead_by_topic.keys())
    for name in names:
        row = waiting.get(name)
        dead_rows = dead_by_topic.get(name, 0)
        table.add_row(
            name,
            str(0 if row is None else row.rows),
            _age(None if row is None else row.oldest_seconds),
            str(0 if row is None else row.backing_off),
            Text(str(dead_rows), style="red bold" if dead_rows else ""),
        )
    summary = Text(f"lag (oldest unpublished row): {_age(backlog.lag_seconds)}")
    if not names:
        summary.append("   nothing waiting")
    if isinstance(dead, Unavailable):
        summary.append("   dead letters: ").append_text(_unavailable(dead))
    if outbox.cdc is not None:  # cdc mode: no relay runs; Debezium reads the slot
        summary.append("   ").append_text(_cdc_text(outbox.cdc))
    elif isinstance(leases, Unavailable):
        summary.append("   relays: ").append_text(_unavailable(leases))
    else:
        owners = ", ".join(f"{r.owner} ({r.vparts})" for r in leases.relays) or "none"
        summary.append(f"   relays (vparts leased): {owners}")
        if leases.unowned_vparts:
            summary.append(f"   {leases.unowned_vparts} of {VPARTS} vparts unowned", style="red")
    return Group(table, summary)


def _cdc_text(slot: CdcSlot | Unavailable) -> Text:
    """cdc mode's line: the slot Debezium reads, whether it streams, and the WAL it keeps."""
    if isinstance(slot, Unavailable):
        return Text("cdc slot: ").append_text(_unavailable(slot))
    if not slot.exists:
        return Text(f"cdc mode: replication slot {slot.slot} does not exist (is the connector deployed?)", style="red")
    retained = slot.retained_wal_bytes or 0.0
    text = Text(f"cdc mode: slot {slot.slot} {'streaming' if slot.active else 'not streaming'}, ")
    return text.append(f"keeps {retained / 2**20:.1f} MiB of WAL", style="red bold" if retained > 2**30 else "")


# --- consumers -------------------------------------------------------------------------------------------


def _consumers_table(consumers: tuple[ConsumerView, ...]) -> Table:
    table = _table(
        "Consumers", "group", "last processed", "last 5 min", "p99 age / SLA", "parked letters",
        "lag (committed vs end)", "dead-lettered (DLQ topic)", "members", "waiting (oldest / SLA)",
    )  # fmt: skip
    for consumer in consumers:
        table.add_row(
            consumer.group, *_inbox_cells(consumer.inbox), *_broker_cells(consumer.broker),
            _members_cell(consumer.members), _waiting_cell(consumer.waiting),
        )  # fmt: skip
    everywhere = next((c.broker for c in consumers if isinstance(c.broker, BrokerUnavailable)), None)
    table.caption = (
        f"broker: n/a: {everywhere.reason}"
        if everywhere is not None
        else "broker offsets are informational (the embedded broker's watermarks are wrong)"
    )
    return table


def _inbox_cells(inbox: InboxActivity | Unavailable) -> list[Cell]:
    if isinstance(inbox, Unavailable):
        return [_unavailable(inbox), "", "", ""]
    last = "never" if inbox.last_processed_at is None else f"{_age(inbox.last_processed_seconds_ago)} ago"
    parked = inbox.parked_letters
    return [
        last,
        str(inbox.processed_last_5_min),
        _sla_cell(inbox),
        Text(str(parked), style="red bold" if parked else ""),
    ]


def _sla_cell(inbox: InboxActivity) -> Cell:
    """«12s / 1m», red and marked when the recent p99 age is over the SLA; «- / 1m» with no recent event."""
    sla = _age(inbox.sla_seconds)
    if inbox.recent_p99_age_seconds is None:
        return f"- / {sla}"
    cell = f"{_age(inbox.recent_p99_age_seconds)} / {sla}"
    return Text(f"{cell} over SLA", style="red bold") if inbox.sla_breached else cell


def _broker_cells(broker: GroupOffsets | Unavailable) -> list[Cell]:
    if isinstance(broker, BrokerUnavailable):  # said once, in the caption
        return ["n/a", "n/a"]
    if isinstance(broker, Unavailable):
        return [_unavailable(broker), ""]
    lagging = [p for p in broker.partitions if p.lag]
    if lagging:
        lag = ", ".join(f"{p.topic.split('.')[-2]}[{p.partition}]={p.lag}" for p in lagging)
    else:
        lag = "0" if broker.partitions else "no commits yet"
    if broker.missing_topics:
        lag += f" (missing topics: {len(broker.missing_topics)}; run `pin topics`)"
    dead = broker.dead_lettered
    return [lag, Text("-" if dead is None else str(dead), style="red bold" if dead else "")]


def _members_cell(members: GroupMembers | Unavailable | None) -> Cell:
    """«2 (15 partitions)»; «1, no partition for 1m30s»; red «WEDGED» past the bound (docs/operations.md says why)."""
    if members is None:
        return "-"
    if isinstance(members, Unavailable):
        return _unavailable(members)
    if not members.live_members:
        return "none"
    if members.unassigned_seconds is None:
        return f"{members.live_members} ({members.partitions} partitions)"
    cell = f"{members.live_members}, no partition for {_age(members.unassigned_seconds)}"
    if members.wedged:
        return Text(f"{cell}: WEDGED (docs/operations.md)", style="red bold")
    return cell


def _waiting_cell(waiting: Waiting | Unavailable | None) -> Cell:
    """«0»; «3 (42s / 1m)»; red «12 (2m5s / 1m) over SLA, crm... [1]»: what ConsumerWaitingPastSla alerts on."""
    if waiting is None:
        return "-"
    if isinstance(waiting, BrokerUnavailable):  # said once, in the caption
        return "n/a"
    if isinstance(waiting, Unavailable):
        return _unavailable(waiting)
    if not waiting.messages:
        return "0"
    cell = f"{waiting.messages} ({_age(waiting.oldest_seconds)} / {_age(waiting.sla_seconds)})"
    if not waiting.past_sla:
        return cell
    oldest = max(waiting.partitions, key=lambda p: p.oldest_seconds)
    where = f"{oldest.topic.split('.')[-2]}[{oldest.partition}]"
    return Text(f"{cell} over SLA, oldest on {where}", style="red bold")


# --- contract migrations ---------------------------------------------------------------------------------


def _migrations_table(migrations: tuple[MigrationView, ...] | Unavailable) -> RenderableType:
    if isinstance(migrations, Unavailable):
        return Text("Contract migrations: ").append_text(_unavailable(migrations))
    table = _table("Contract migrations", "event type", "publishing", "deadline", "still on v1", "on v2")
    for m in migrations:
        deadline = Text(_time(m.deadline), style="red" if m.overdue else "")
        if m.overdue:
            deadline.append(" overdue")
        publishing = f"{m.v1_topic} + {m.v2_topic}" if m.publish == "dual" else f"{m.v2_topic} (v1 sunset)"
        table.add_row(m.event_type, publishing, deadline, ", ".join(m.v1_groups) or "-", ", ".join(m.v2_groups) or "-")
    return table
