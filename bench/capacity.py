"""docs/capacity.md from the bench's last results: how many instances of each role at 1x to 1000x the seeds' volume.

``python -m bench.capacity`` rewrites docs/capacity.md from bench/results/summary.json; ``--check`` exits 1 when the
page is not what the summary gives (tests/bench/test_capacity.py runs the same comparison). The measured costs are
the summary's; every other number is an assumption named and explained here, written out on the page.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pin.bootstrap import API_POOL_SIZE, JOB_POOL_SIZE, RELAY_POOL_SIZE
from pin.messaging.consumer.runtime import pool_size
from pin.outbox.writer import VPARTS
from pin.settings import ConsumerSettings

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "bench" / "results" / "summary.json"
PAGE = ROOT / "docs" / "capacity.md"

MULTIPLES = (1, 10, 100, 1000)
WIDTH = 116  # prose lines of the page
SECONDS_PER_DAY = 86_400

# --- assumptions (each is printed on the page with its reason) ---------------------------------------------------

ACTIVE_PURCHASES = 10_000  # seed 002: a target volume of 1-10k active purchases; the upper end
PURCHASE_DAYS = 7  # the standard package runs 7 days: as many purchases start and end per day as 10k / 7
BOOKINGS_PER_DAY = 20_000  # two showing or consultation requests per promoted listing and day
EVENTS_PER_BOOKING = 3  # created, then confirmed or ended, and the calendar event's status change
EXPIRED_SHARE = 0.10  # bookings left Pending until PendingExpiresAt (seed 000: few are Pending at once)
PEAK_FACTOR = 10  # busiest minute over the day's average: bookings fall in business hours, in bursts
GROUPS_PER_EVENT = 2.5  # consumer groups reading an average event (2 for calendar topics, 3 for purchases)
TARGET_UTILISATION = 0.5  # instances sized to run at half their measured rate: room for a failover and a burst
BENCH_CORES = 2  # the bench machine: every role, PostgreSQL and the broker shared 2 cores
PG_CORE_BUDGET = 24  # cores of one large PostgreSQL server kept for PIN (a 32-core machine at 75 %)
PROMOTION_BURST_SECONDS = 300  # a day's purchase expiries may all fall due at once (packages end at midnight)
# bootstrap.py's pools (+1 LISTEN: relay); a consumer's is its lanes + 1 (PIN_CONSUMER_LANES' default)
POOL_CONNECTIONS = {
    "api": API_POOL_SIZE, "relay": RELAY_POOL_SIZE + 1, "worker": JOB_POOL_SIZE,
    "consumer": pool_size(ConsumerSettings().lanes),
}  # fmt: skip
API_INSTANCES_PER_EVENTS = 500  # not measured by the bench: one API instance per 500 events/s at peak, assumed
MAX_CONNECTIONS = 300  # the embedded server's max_connections; a production server is usually 100-500
MIN_INSTANCES = 2  # of every role, for availability


@dataclass(frozen=True)
class Costs:
    """The measured cost of each role, from the summary (per instance, on the bench machine)."""

    timeout_per_instance: float  # appointments/s, one worker
    timeout_four: float  # appointments/s, four workers on the same PostgreSQL
    timeout_pg_ceiling: float  # appointments/s, pgbench on the worker's statements, 4 clients: PostgreSQL alone
    promotion_per_instance: float  # purchases/s, one worker, batches of 200
    promotion_pg_ceiling: float  # purchases/s, pgbench on the batch's statements, 1 client
    relay_per_instance: float  # messages/s, one relay
    broker_produce_ceiling: float  # messages/s, a bare producer with the relay's settings
    consumer_slowest: float  # messages/s, the slowest group, one instance
    consumer_slowest_group: str
    broker_consume_ceiling: float  # messages/s, a bare consumer committing every 1,000
    # the longest scaling drain the run made (200,000 appointments with --full, 20,000 at the default size) and its
    # time over the linear extrapolation from the 2,000 one (1 = linear)
    drain_longest: int
    drain_ratio_longest: float
    end_to_end_p99_ms: float

    @property
    def timeout_pg_ms(self) -> float:
        """PostgreSQL core-milliseconds per expired appointment (upper bound: pgbench's own CPU included)."""
        return BENCH_CORES * 1000 / self.timeout_pg_ceiling

    @property
    def promotion_pg_ms(self) -> float:
        """PostgreSQL core-milliseconds per expired purchase (one client: one core at most)."""
        return 1000 / self.promotion_pg_ceiling

    @property
    def relay_all_ms(self) -> float:
        """Core-milliseconds per relayed message, PostgreSQL, relay and broker together (upper bound)."""
        return BENCH_CORES * 1000 / self.relay_per_instance

    @property
    def consumer_all_ms(self) -> float:
        """Core-milliseconds per consumed message and group, PostgreSQL, consumer and broker (upper bound)."""
        return BENCH_CORES * 1000 / self.consumer_slowest

    @property
    def worker_scaling(self) -> float:
        """Throughput of four timeout workers over four times one's: what PostgreSQL's CPU leaves to a fifth."""
        return self.timeout_four / (4 * self.timeout_per_instance)


def costs_of(summary: Mapping[str, Any]) -> Costs:
    """The costs the capacity model needs, each from one figure of the summary."""
    groups = {name: summary[f"consumer_{name}"]["value"] for name in ("crm", "notifications", "catalog", "news")}
    slowest = min(groups, key=lambda name: groups[name])
    longest = max(int(name.removeprefix("scaling_drain_")) for name in summary if name.startswith("scaling_drain_"))
    return Costs(
        timeout_per_instance=summary["timeout_drain_1_worker"]["value"],
        timeout_four=summary["timeout_drain_4_workers"]["value"],
        timeout_pg_ceiling=summary["timeout_drain_4_workers"]["baseline"],
        promotion_per_instance=summary["promotion_drain"]["value"],
        promotion_pg_ceiling=summary["promotion_drain"]["baseline"],
        relay_per_instance=summary["relay_throughput"]["value"],
        broker_produce_ceiling=summary["relay_throughput"]["baseline"],
        consumer_slowest=groups[slowest],
        consumer_slowest_group=slowest,
        broker_consume_ceiling=min(summary[f"consumer_{n}_vs_batch_commit"]["baseline"] for n in groups),
        drain_longest=longest,
        drain_ratio_longest=summary[f"scaling_drain_{longest}"]["ratio"],
        end_to_end_p99_ms=summary["end_to_end_p99"]["value"],
    )


@dataclass(frozen=True)
class Load:
    """The peak rates of one multiple of the seeds' volume."""

    multiple: int

    @property
    def purchases_per_day(self) -> float:
        """Purchases that start (and as many that end) per day."""
        return self.multiple * ACTIVE_PURCHASES / PURCHASE_DAYS

    @property
    def expiries_peak(self) -> float:
        """Appointments the timeout worker expires per second at peak."""
        return self.multiple * BOOKINGS_PER_DAY * EXPIRED_SHARE / SECONDS_PER_DAY * PEAK_FACTOR

    @property
    def events_peak(self) -> float:
        """Outbox rows per second at peak: the calendar's events and the purchases' (activation, expiry)."""
        per_day = self.multiple * BOOKINGS_PER_DAY * EVENTS_PER_BOOKING + 2 * self.purchases_per_day
        return per_day / SECONDS_PER_DAY * PEAK_FACTOR


def instances(rate: float, per_instance: float) -> int:
    """Instances that carry ``rate`` at the target utilisation, and never fewer than two."""
    return max(MIN_INSTANCES, math.ceil(rate / (per_instance * TARGET_UTILISATION)))


def timeout_workers(load: Load, costs: Costs) -> int | None:
    """Timeout workers for the peak, given that a fifth worker adds less than the first (PostgreSQL-bound); None when
    even the database's own ceiling is too low."""
    if load.expiries_peak > costs.timeout_pg_ceiling * TARGET_UTILISATION * PG_CORE_BUDGET / BENCH_CORES:
        return None
    return instances(load.expiries_peak, costs.timeout_per_instance * costs.worker_scaling)


@dataclass(frozen=True)
class Plan:
    """What one multiple needs: instances per role, partitions, and the servers' headroom."""

    load: Load
    timeout_workers: int | None
    promotion_drain_seconds: float
    relays: int
    consumers_per_group: int
    partitions: int
    pg_cores: float
    broker_share: float
    connections: int


def plan(load: Load, costs: Costs) -> Plan:
    """The instances, partitions and headroom of one multiple."""
    relays = instances(load.events_peak, costs.relay_per_instance)
    consumers = instances(load.events_peak, costs.consumer_slowest)
    busy = math.ceil(load.events_peak / (costs.consumer_slowest * TARGET_UTILISATION))  # for throughput alone
    workers = timeout_workers(load, costs)
    api = max(MIN_INSTANCES, math.ceil(load.events_peak / API_INSTANCES_PER_EVENTS))
    pg_ms_per_second = (
        load.expiries_peak * costs.timeout_pg_ms
        # a booking's API transaction locks and writes about what an expiry does (not measured: assumed)
        + load.events_peak / EVENTS_PER_BOOKING * costs.timeout_pg_ms
        + load.events_peak * costs.relay_all_ms
        + load.events_peak * GROUPS_PER_EVENT * costs.consumer_all_ms
    )
    broker = load.events_peak / costs.broker_produce_ceiling + (
        load.events_peak * GROUPS_PER_EVENT / costs.broker_consume_ceiling
    )
    connections = (
        api * POOL_CONNECTIONS["api"]
        + relays * (POOL_CONNECTIONS["relay"])
        + 2 * (workers or 0) * POOL_CONNECTIONS["worker"]
        + 4 * consumers * POOL_CONNECTIONS["consumer"]
    )
    return Plan(
        load=load,
        timeout_workers=workers,
        promotion_drain_seconds=load.purchases_per_day / costs.promotion_per_instance,
        relays=relays,
        consumers_per_group=consumers,
        partitions=max(3, 2 * busy),
        pg_cores=pg_ms_per_second / 1000,
        broker_share=broker,
        connections=connections,
    )


# --- the page ---------------------------------------------------------------------------------------------------


def _n(value: float, digits: int = 0) -> str:
    """A number with thousands separators."""
    return f"{value:,.{digits}f}"


def _costs_table(costs: Costs) -> list[str]:
    return [
        "| role | measured (one instance, bench machine) | cost per item |",
        "|---|---|---|",
        f"| appointment-timeout | {_n(costs.timeout_per_instance)} appointments/s; 4 instances "
        f"{_n(costs.timeout_four)}/s ({_n(100 * costs.worker_scaling)} % of linear) | PostgreSQL "
        f"{costs.timeout_pg_ms:.2f} core-ms per appointment (its ceiling, pgbench on the same statements: "
        f"{_n(costs.timeout_pg_ceiling)}/s on {BENCH_CORES} cores) |",
        f"| expire-promotions | {_n(costs.promotion_per_instance)} purchases/s, batches of 200 | PostgreSQL "
        f"{costs.promotion_pg_ms:.2f} core-ms per purchase (pgbench: {_n(costs.promotion_pg_ceiling)}/s, one client) |",
        f"| relay | {_n(costs.relay_per_instance)} messages/s | at most {costs.relay_all_ms * 1000:.0f} core-us per "
        f"message, PostgreSQL, relay and broker together |",
        f"| consumers | {_n(costs.consumer_slowest)} messages/s for the slowest group "
        f"({costs.consumer_slowest_group}), "
        f"per instance, i.e. per busy partition | at most {costs.consumer_all_ms:.2f} core-ms per message and group, "
        "all processes together |",
        f"| broker (embedded, one node) | produce {_n(costs.broker_produce_ceiling)}/s (bare producer), consume "
        f"{_n(costs.broker_consume_ceiling)}/s (bare consumer) | - |",
    ]


def _durable_section(summary: Mapping[str, Any]) -> list[str]:
    """The commit-bound figures on the main server and on the durable one (bench.durable), each against its own
    same-run baseline; nothing when the run had no durable server."""
    names = [name for name, entry in summary.items() if isinstance(entry, Mapping) and "durable" in entry]
    if not names:
        return []

    def cell(entry: Mapping[str, Any] | None) -> str:
        if not entry or entry.get("value") is None:
            return "-"
        ratio = "" if entry.get("ratio") is None else f" (ratio {entry['ratio']:.3g})"
        return f"{_n(entry['value'], 1 if entry['value'] < 100 else 0)} {entry['unit']}{ratio}"

    lines = [
        "## On a durable server",
        "",
        *_para(
            "The same phases ran again on a PostgreSQL with `fsync` and `synchronous_commit` on",
            "(`PIN_BENCH_DURABLE_DATABASE_URL`), each against its own baseline measured on that server in the same run",
            "(pgbench on the same statements, the bare producer, the expiry lag alone). The model above uses the",
            "first column; the second is what one commit's flush costs each role on that server's disk.",
        ),
        "| figure | main server | durable server | durable / main |",
        "|---|---|---|---|",
    ]
    for name in names:
        main, durable = summary[name], summary[name]["durable"]
        both = main.get("value") and durable.get("value")
        change = f"{durable['value'] / main['value']:.2f}" if both else "-"
        lines.append(f"| `{name}` | {cell(main)} | {cell(durable)} | {change} |")
    return [*lines, ""]


def _plans_table(plans: list[Plan], usable: float) -> list[str]:
    rows = [
        "| volume | events/s at peak | expiries/s at peak | appointment-timeout | expire-promotions: a day's "
        "expiries drain in (one instance) | relay | consumers per group | partitions per topic | "
        "PostgreSQL cores (upper bound) | broker load | connections |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in plans:
        workers = "beyond one PostgreSQL" if p.timeout_workers is None else str(p.timeout_workers)
        bound = (
            " **(over one server)**"
            if p.pg_cores > usable
            else f" ({_n(usable / p.pg_cores, 1 if usable < 10 * p.pg_cores else 0)}x headroom)"
        )
        late = " **(over the window)**" if p.promotion_drain_seconds > PROMOTION_BURST_SECONDS else ""
        rows.append(
            f"| {p.load.multiple}x | {_n(p.load.events_peak, 1)} | {_n(p.load.expiries_peak, 1)} | {workers} | "
            f"{_n(p.promotion_drain_seconds, 1)} s{late} | {p.relays} | {p.consumers_per_group} | "
            f"{p.partitions} | {p.pg_cores:.2f}{bound} | {100 * p.broker_share:.1f} % of one node | "
            f"{_n(p.connections)} |"
        )
    return rows


def usable_cores(costs: Costs) -> float:
    """The server's budget less what contention takes: the one measurement of added database capacity (four
    workers instead of one) gave this share of linear, applied to the whole server."""
    return PG_CORE_BUDGET * costs.worker_scaling


def _bound(costs: Costs) -> float:
    """The multiple at which PostgreSQL's CPU passes the usable cores of one server."""
    return usable_cores(costs) / plan(Load(1), costs).pg_cores


def _para(*parts: str) -> list[str]:
    """One paragraph of prose, wrapped."""
    return [*textwrap.wrap(" ".join(parts), WIDTH, break_on_hyphens=False), ""]


def _bullet(*parts: str) -> list[str]:
    """One list item, wrapped under its dash."""
    return textwrap.wrap(" ".join(parts), WIDTH, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)


def _assumptions(costs: Costs) -> list[str]:
    return [
        *_bullet(
            f"**Purchases**: {_n(ACTIVE_PURCHASES)} active at 1x (seed 002: a target of 1-10k active purchases, the",
            f"upper end). A standard package runs {PURCHASE_DAYS} days, so {_n(ACTIVE_PURCHASES / PURCHASE_DAYS)}",
            "start and as many end each day; one purchase-changed event each. Their expiries may all fall due at once",
            "(packages bought for the same date end together): a day's expiries should drain within",
            f"{PROMOTION_BURST_SECONDS} s, by one instance (a second mostly adds availability: one batch per",
            "transaction).",
        ),
        *_bullet(
            f"**Appointments**: {_n(BOOKINGS_PER_DAY)} booked per day at 1x: two showing or consultation requests",
            "per promoted listing and day, the listings being what the active purchases promote. Each writes about",
            f"{EVENTS_PER_BOOKING} events (created; confirmed or ended; the calendar event's status).",
            f"{_n(100 * EXPIRED_SHARE)} % stay Pending until they expire (seed 000: few are Pending at once;",
            "auto-confirm slots skip Pending).",
        ),
        *_bullet(f"**Peak**: the busiest minute carries {PEAK_FACTOR} times the day's average rate."),
        *_bullet(
            f"**Consumers**: an event is read by {GROUPS_PER_EVENT} groups on average (calendar topics by crm and",
            "notifications, purchase-changed by catalog, news and notifications); one group is sized for every",
            "event (an upper bound).",
        ),
        *_bullet(
            f"**Sizing**: every role at {_n(100 * TARGET_UTILISATION)} % of its measured rate, at least",
            f"{MIN_INSTANCES} instances of each. The API was not benchmarked: one instance per",
            f"{API_INSTANCES_PER_EVENTS} events/s is a guess.",
        ),
        *_bullet(
            f"**One PostgreSQL**: {PG_CORE_BUDGET} cores for PIN (a 32-core server at 75 %), of which",
            f"{usable_cores(costs):.1f} are usable: the one measurement of added database load (four timeout",
            f"workers instead of one) gave {_n(100 * costs.worker_scaling)} % of linear, and that share is applied to",
            "the whole server rather than assuming it scales better. Its CPU is the sum of the per-item costs above",
            "times the rates; a booking's API transaction is assumed to cost what an expiry costs.",
        ),
        "",
    ]


def _limits(costs: Costs, plans: list[Plan]) -> list[str]:
    bound = _bound(costs)
    return [
        *_bullet(
            f"**PostgreSQL CPU.** At 1x PIN needs {plans[0].pg_cores:.3f} cores at peak, and every role's work lands",
            f"on the one server, so one PostgreSQL ({usable_cores(costs):.1f} usable of {PG_CORE_BUDGET} cores)",
            f"carries about {_n(bound)}x the seeds' volume by this model, CPU alone. The workers show it first: four",
            f"appointment-timeout instances drained {_n(100 * costs.worker_scaling)} % of four times one's rate,",
            "because the database, not the worker, is busy; more worker instances past that only add row-lock waits.",
            f"Plan the next steps (below) before the volume reaches {_n(bound / 2)}x, half that bound: the commit and",
            "WAL limits come first on a real disk.",
        ),
        *_bullet(
            "**WAL and commits.** Every expired appointment, every booking and every consumer batch is one commit.",
            "The bench ran with `fsync=off`, so it measured no flush: on a real disk each commit waits for its WAL",
            "flush (group commit shares one flush among the commits waiting for it). The relay's DELETEs and the",
            "inbox's inserts and prunes write WAL too, about as much as the events themselves. Measure WAL bytes per",
            "event on the target server before going past 100x.",
        ),
        *_bullet(
            f"**Bloat and long drains.** The {costs.drain_longest:,}-appointment drain took"
            f" {costs.drain_ratio_longest:.2f} times a",
            "linear extrapolation from 2,000: dead tuples and the claim index grow with the backlog. The",
            "table-health gauges and alerts ([runbooks/database-health.md](runbooks/database-health.md)) are the",
            "guardrail.",
        ),
        *_bullet(
            "**Partitions.** A group has at most as many busy consumers as a topic has partitions",
            "(`PIN_KAFKA_TOPIC_PARTITIONS`, 3 by default); the table gives twice the consumers the throughput needs,",
            "to leave room. Changing it on a live topic moves keys",
            "([operations.md](operations.md#changing-the-partition-count)).",
        ),
        *_bullet(
            f"**Relay instances.** At most {VPARTS} (the virtual partitions); at {_n(costs.relay_per_instance)}",
            "messages/s each, the relay is never the bound here: PostgreSQL is, since every relayed row is read and",
            "deleted there.",
        ),
        *_bullet(
            "**Hot keys.** Order per key serialises one aggregate's events on one partition and one consumer; an",
            "aggregate has a handful of events in its life, so no key is hot on the topics. In the database, one",
            "Project's boost card is one row that every purchase of that Project updates (catalog): many purchases",
            "of one Project queue on that row lock.",
        ),
        *_bullet(
            "**Connections.** Each instance holds its pool; past a few hundred connections PostgreSQL spends its",
            "memory and CPU on them. A pooler (PgBouncer) in transaction mode serves the API, the workers and the",
            "consumers; the relay needs a session (its LISTEN), and so does Debezium's replication connection.",
        ),
        *_bullet(
            "**Broker.** The embedded one-node broker's measured ceilings leave room at every volume here; the",
            f"end-to-end p99 was {costs.end_to_end_p99_ms:.0f} ms at the bench's rate.",
        ),
        "",
    ]


_NEXT_STEPS = [
    "1. **cdc mode** ([runbooks/outbox-cdc.md](runbooks/outbox-cdc.md)): Debezium reads the WAL, so the relay's",
    "   reads and DELETE batches leave the database; the outbox table stays empty.",
    "2. **Partitioned tables**: the inbox and the jobs' cycle records by time, dropped a partition at a time",
    "   instead of pruned and vacuumed row by row.",
    "3. **One database per context**: the contexts reference each other by id only, never by foreign key",
    "   ([architecture.md](architecture.md)), so calendar, promotion and each consumer's read model can move to a",
    "   server of its own, each with its own outbox (and relay or connector).",
    "4. **A distributed PostgreSQL** (Citus and the like), the calendar's and promotion's tables sharded by",
    "   `tenant_id`, which their aggregates carry; one outbox per shard, each read by its own relay fleet or",
    "   connector.",
    "",
]


def render(summary: Mapping[str, Any]) -> str:
    """The whole page."""
    costs = costs_of(summary)
    plans = [plan(Load(m), costs) for m in MULTIPLES]
    over = next((p.load.multiple for p in plans if p.connections > MAX_CONNECTIONS), None)
    pooler = f"from {over}x on they need a pooler (below)." if over else "no volume here needs a pooler."
    lines = [
        "# Capacity",
        "",
        "<!-- generated by `python -m bench.capacity` from bench/results/summary.json; do not edit by hand -->",
        "",
        *_para(
            "How many instances of each role PIN needs at 1, 10, 100 and 1000 times the seeds' target volume, and",
            "where one PostgreSQL stops being enough. The costs are the last bench run's",
            "([bench/README.md](../bench/README.md), `bench/results/summary.json`: 2 cores shared by every process,",
            "embedded PostgreSQL with `fsync=off`, embedded broker); the volumes and the rest are the assumptions",
            "below. A test checks that this page is what the summary gives, so it changes with the next bench run",
            "and never drifts from it.",
        ),
        "## Measured cost per item",
        "",
        *_costs_table(costs),
        "",
        *_para(
            "Every figure was measured with PostgreSQL, the broker and the role on the same 2 cores, so each cost is",
            "an upper bound of what that part costs alone. PostgreSQL's CPU per item is measured only where a",
            "baseline ran the same statements without the role (the two workers); for the relay and the consumers it",
            "is the whole machine's.",
        ),
        *_durable_section(summary),
        "## Assumptions",
        "",
        *_assumptions(costs),
        "## Instances, partitions and headroom",
        "",
        *_plans_table(plans, usable_cores(costs)),
        "",
        *_para(
            f"Connections are the pools of `bootstrap.py` (API {API_POOL_SIZE}, relay {RELAY_POOL_SIZE} and its LISTEN",
            f"connection, workers {JOB_POOL_SIZE}, consumers {POOL_CONNECTIONS['consumer']}: their lanes and one), for",
            "2 worker roles and 4 consumer",
            "groups. The embedded server allows",
            f"{MAX_CONNECTIONS};",
            pooler,
        ),
        "## What stops scaling, and from where",
        "",
        "Not these figures multiplied: each part below stops growing with instances at a point of its own.",
        "",
        *_limits(costs, plans),
        "## The next steps past one PostgreSQL",
        "",
        *_NEXT_STEPS,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write docs/capacity.md, or (``--check``) say whether it is current."""
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/capacity.md is not current")
    args = parser.parse_args(argv)
    page = render(json.loads(SUMMARY.read_text(encoding="utf-8")))
    if args.check:
        current = PAGE.exists() and PAGE.read_text(encoding="utf-8") == page
        print("docs/capacity.md is current" if current else "docs/capacity.md is stale: run python -m bench.capacity")
        return 0 if current else 1
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
