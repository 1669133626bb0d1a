"""`python -m bench [--quick | --full] [--only NAMES] [--repeat N] [--out DIR]`: every benchmark beside its baseline.

Writes summary.json, summary.md, run.json, the PNG plots and the generated pgbench scripts to ``--out``
(bench/results by default). See bench/README.md for what each figure means and how it is measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import console, consumers, durable, live, plots, pressure, promotion, relay, timeout
from bench.env import BenchEnv, make_env
from bench.results import Figure, LoadWindow, Results, aggregate, goal_met, ratio
from bench.seed import MessageFactory

SIZES: dict[str, dict[str, Any]] = {
    "quick": {
        "timeout": 2_000,
        "promotion": 2_000,
        "relay": 10_000,
        "gauges": 100_000,
        "latency_seconds": 5,
        "consumers": 1_000,
        "lag": (500, 20.0),
        "e2e": (500, 20.0),
        "scaling": [500, 2_000],
        "profile": 1_000,
        "console": (100_000, 10_000, 1_000, 10),
    },
    "default": {
        "timeout": 20_000,
        "promotion": 10_000,
        "relay": 100_000,
        "gauges": 1_000_000,
        "latency_seconds": 20,
        "consumers": 5_000,
        "lag": (2_000, 60.0),
        "e2e": (2_000, 60.0),
        "scaling": [2_000, 20_000],
        "profile": 2_000,
        "console": (1_000_000, 100_000, 10_000, 30),
    },
    "full": {
        "timeout": 20_000,
        "promotion": 10_000,
        "relay": 100_000,
        "gauges": 1_000_000,
        "latency_seconds": 30,
        "consumers": 50_000,
        "lag": (2_000, 60.0),
        "e2e": (2_000, 60.0),
        "scaling": [2_000, 20_000, 200_000],
        "profile": 5_000,
        "console": (1_000_000, 100_000, 10_000, 100),
    },
}
# The drains' goals, as ratios to pgbench on the same statements with as many clients (issue 38: 4 workers contend
# for the same index and rows, so their goal is lower)
TIMEOUT_GOALS = {1: ">= 0.8", 4: ">= 0.7"}

PHASES = ("timeout", "lag", "promotion", "relay", "consumers", "e2e", "scaling", "console")
# Phases only --only runs (they take a quarter of an hour to an hour, on a server of their own).
EXTRA_PHASES = ("pressure",)
RELAY_RATE = 500.0


class Run:
    """One invocation: the environment, the results and what the phases hand to each other."""

    def __init__(
        self, env: BenchEnv, mode: str, out: Path, rate: float = pressure.RATES[0], workers: int = pressure.WORKERS
    ) -> None:
        self.env = env
        self.rate = rate
        self.workers = workers
        self.mode = mode
        self.sizes = SIZES[mode]
        self.out = out
        self.results = Results()
        self.factory: MessageFactory | None = None
        self.scaling_runs: list[dict[str, Any]] = []
        self.lags: dict[str, dict[str, Any]] = {}  # the expiry lag of each column (end to end's baseline)
        self.timeout_script: timeout.Script | None = None
        self.durable_url = durable.configured_url()
        self.column = durable.MAIN  # which server the phase runs on (bench.durable)

    @property
    def main_column(self) -> bool:
        """Whether this run of a phase is on the main server (profiles, plots and gauges are taken there only)."""
        return self.column == durable.MAIN

    def on_durable(self, phase: Callable[[], None]) -> None:
        """Run ``phase`` on the durable server, in databases of its own there, dropped when it ends."""
        env = self.env
        with durable.twin(env, self.durable_url) as twin:
            self.env, self.column = twin, durable.DURABLE
            try:
                phase()
            finally:
                self.env, self.column = env, durable.MAIN

    # ------------------------------------------------------------------------------------------- phases

    def capture(self) -> None:
        """Record the workers' statements (for pgbench) and real outbox rows (for the message benchmarks)."""
        cap = timeout.capture(self.env)
        self.timeout_script = timeout.item_script(cap, "a")
        timeout.write_script(self.out / "timeout_item.pgbench.sql", self.timeout_script)
        statements, templates = promotion.capture(self.env)
        self.promotion_statements = statements
        self.factory = MessageFactory({**cap.templates, **templates})

    def phase_timeout(self) -> None:
        """1. appointment-timeout drain by 1 and 4 workers vs pgbench with 1 and 4 clients; a profile."""
        assert self.timeout_script is not None
        n = self.sizes["timeout"]
        for workers in (1, 4):
            base = timeout.pgbench_drain(self.env, self.timeout_script, n, workers, label=f"pgbench_timeout_{workers}")
            run = timeout.worker_drain(self.env, n, workers, label=f"timeout_{workers}w")
            self.results.details[f"timeout_{workers}"] = {"worker": run, "pgbench": base}
            value, baseline = run["items_per_second"], base["items_per_second"]
            r = ratio(value, baseline)
            plural = "worker" if workers == 1 else "workers"
            goal = TIMEOUT_GOALS[workers]
            self.results.add(
                f"timeout_drain_{workers}_{plural}",
                Figure(value, "items_per_second", baseline, r, goal, goal_met(goal, value, r),
                       f"{n:,} due appointments; pgbench -M prepared -c {workers} on the captured statements"),
            )  # fmt: skip
        if not self.main_column:
            return
        prof = timeout.profile(self.env, self.sizes["profile"])
        self.results.details["timeout_profile"] = prof
        self.results.sections.append(_profile_section("appointment-timeout", prof, self.timeout_script))

    def phase_lag(self) -> None:
        """2. Expiry lag with one worker."""
        count, spread = self.sizes["lag"]
        lag = live.expiry_lag(self.env, count, spread)
        self.lags[self.column] = lag
        self.results.details["expiry_lag"] = {k: v for k, v in lag.items() if k not in ("lags_ms", "due_offsets_s")}
        for q in ("p50", "p99", "max"):
            value = lag[f"{q}_ms"]
            goal = "<= 1000 ms" if q == "p99" else None
            met = value <= 1000 if q == "p99" else None
            self.results.add(
                f"expiry_lag_{q}",
                Figure(value, "ms", None, None, goal, met, f"{count:,} deadlines over {spread:.0f} s, one worker"),
            )
        if self.main_column:
            plots.expiry_lag(self.results, self.out, lag)

    def phase_promotion(self) -> None:
        """3. expire-promotions drain vs pgbench on the per-batch statements."""
        n = self.sizes["promotion"]
        script = promotion.batch_script(self.promotion_statements)
        timeout.write_script(self.out / "promotion_batch.pgbench.sql", script)
        base = promotion.pgbench_drain(self.env, script, n, label="pgbench_promotion")
        run = promotion.worker_drain(self.env, n, label="promotion")
        self.results.details["promotion"] = {"worker": run, "pgbench": base}
        r = ratio(run["items_per_second"], base["items_per_second"])
        self.results.add(
            "promotion_drain",
            Figure(run["items_per_second"], "purchases_per_second", base["items_per_second"], r, ">= 0.8",
                   r is not None and r >= 0.8, f"{n:,} due purchases, 1-3 targets, BatchSize 200, one worker"),
        )  # fmt: skip
        if not self.main_column:
            return
        prof = promotion_profile(self.env, min(n, 4_000))
        self.results.details["promotion_profile"] = prof
        self.results.sections.append(_profile_section("expire-promotions", prof, None))

    def phase_relay(self) -> None:
        """4. Relay drain throughput and latency at a steady rate, each vs a bare producer; the outbox gauges."""
        assert self.factory is not None
        drain = relay.throughput(self.env, self.factory, self.sizes["relay"])
        self.results.details["relay_drain"] = {k: v for k, v in drain.items() if k != "samples"}
        r = ratio(drain["messages_per_second"], drain["baseline_messages_per_second"])
        self.results.add(
            "relay_throughput",
            Figure(drain["messages_per_second"], "messages_per_second", drain["baseline_messages_per_second"], r,
                   ">= 0.5", r is not None and r >= 0.5, f"{drain['count']:,} outbox rows, one relay"),
        )  # fmt: skip
        if self.main_column:
            plots.relay_drain(self.results, self.out, drain)
        lat = relay.latency(self.env, self.factory, RELAY_RATE, self.sizes["latency_seconds"])
        self.results.details["relay_latency"] = {
            k: v for k, v in lat.items() if k not in {"latencies_ms", "baseline"}
        } | {"baseline": {k: v for k, v in lat["baseline"].items() if k != "latencies_ms"}}
        note = f"achieved {lat['achieved_rate']:.0f} events/s of {RELAY_RATE:.0f}; baseline: bare producer send -> ack"
        for q in ("p50", "p99"):
            value, baseline = lat[f"{q}_ms"], lat["baseline"][f"{q}_ms"]
            goal = "<= 200 ms" if q == "p99" else None
            met = value <= 200 if q == "p99" else None
            self.results.add(
                f"relay_latency_{q}", Figure(value, "ms", baseline, ratio(value, baseline), goal, met, note)
            )
        if not self.main_column:
            return  # the gauges are a read and the profile the relay's CPU: the main server's figures say it
        plots.relay_latency(self.results, self.out, lat)
        gauge = relay.gauges(self.env, self.sizes["gauges"])
        self.results.details["outbox_gauges"] = gauge
        self.results.add(
            "outbox_gauges_exact",
            Figure(gauge["exact_ms"], "ms", gauge["scan_ms"], ratio(gauge["exact_ms"], gauge["scan_ms"]), None, None,
                   f"{gauge['rows']:,} waiting rows, 7 topics, every row counted past the floors; baseline: one plain"
                   f" scan counting the same; the capped read it replaced: {gauge['capped_ms']:.0f} ms"),
        )  # fmt: skip
        prof = relay.profile(self.env, self.factory, min(self.sizes["relay"], 20_000))
        self.results.details["relay_profile"] = prof
        self.results.sections.append(_profile_section("outbox relay", prof, None))

    def phase_consumers(self) -> None:
        """5. Each consumer group vs a bare consume-and-commit loop."""
        assert self.factory is not None
        runs = consumers.run(self.env, self.factory, self.sizes["consumers"], list(consumers.SOURCE))
        self.results.details["consumers"] = runs
        for group, run in runs.items():
            value = run["messages_per_second"]
            each = run["bare_each"]["messages_per_second"]
            batch = run["bare_batch"]["messages_per_second"]
            n = run["count"]
            self.results.add(
                f"consumer_{group}",
                Figure(value, "messages_per_second", each, ratio(value, each), None, None,
                       f"{n:,} msgs; baseline: bare loop, synchronous commit per message"),
            )  # fmt: skip
            self.results.add(
                f"consumer_{group}_vs_batch_commit",
                Figure(value, "messages_per_second", batch, ratio(value, batch), None, None,
                       "baseline: bare loop, asynchronous commit every 1,000 messages (the broker's ceiling)"),
            )  # fmt: skip
            same = run["same_statements"]["messages_per_second"]
            r = ratio(value, same)
            self.results.add(
                f"consumer_{group}_vs_same_statements",
                Figure(value, "messages_per_second", same, r, ">= 0.8", r is not None and r >= 0.8,
                       "baseline: the same statements for the same batches, a bare consumer and psycopg loop"),
            )  # fmt: skip
        io = consumers.run_io_wait(self.env, self.factory, max(self.sizes["consumers"], 2_000))
        self.results.details["consumers_io_wait"] = io
        one, many = (io[f"lanes_{lanes}"]["messages_per_second"] for lanes in consumers.IO_LANES)
        what = f"{io['count']:,} msgs, notifications whose delivery waits {io['wait_ms']:g} ms a message, 3 partitions"
        self.results.add(
            f"consumer_io_wait_{consumers.IO_LANES[0]}_lane",
            Figure(one, "messages_per_second", None, None, None, None, what),
        )
        r = ratio(many, one)
        self.results.add(
            f"consumer_io_wait_{consumers.IO_LANES[1]}_lanes",
            Figure(many, "messages_per_second", one, r, ">= 5", r is not None and r >= 5,
                   f"{what}; baseline: the same at {consumers.IO_LANES[0]} lane, in the same run"),
        )  # fmt: skip
        prof = consumers.profile(self.env, self.factory, "notifications", min(self.sizes["consumers"], 2_000))
        self.results.details["consumer_profile"] = prof
        self.results.sections.append(_profile_section("notifications consumer", prof, None))

    def phase_e2e(self) -> None:
        """6. End to end with everything running."""
        count, spread = self.sizes["e2e"]
        e2e = live.end_to_end(self.env, count, spread)
        self.results.details["end_to_end"] = {k: v for k, v in e2e.items() if k != "totals_ms"}
        for q in ("p50", "p99"):
            value = e2e["total"][f"{q}_ms"]
            lag = self.lags.get(self.column)
            baseline = lag[f"{q}_ms"] if lag else None
            self.results.add(
                f"end_to_end_{q}",
                Figure(value, "ms", baseline, ratio(value, baseline), None, None,
                       f"{e2e['both_notified']}/{count} appointments with both notifications; "
                       "baseline: the expiry lag alone (phase 2)"),
            )  # fmt: skip
        if self.main_column:
            plots.end_to_end(self.results, self.out, e2e)

    def phase_scaling(self) -> None:
        """7. Drain time against the amount of work, one worker, and dead tuples after each run."""
        self.scaling_runs = []  # this run's drains only (--repeat runs the phase again)
        for n in self.sizes["scaling"]:
            run = timeout.worker_drain(self.env, n, 1, label=f"scaling_{n}")
            self.scaling_runs.append(run)
        runs = sorted(self.scaling_runs, key=lambda r: r["count"])
        smallest = runs[0]
        per_item = smallest["seconds"] / smallest["count"]
        for run in runs:
            linear = per_item * run["count"]
            self.results.add(
                f"scaling_drain_{run['count']}",
                Figure(run["seconds"], "seconds", linear, ratio(run["seconds"], linear), None, None,
                       f"baseline: linear from the {smallest['count']:,}-item run (ratio 1 = linear)"),
            )  # fmt: skip
        self.results.details["scaling"] = runs
        self.results.sections.append(_dead_tuples_section(runs))
        plots.scaling(self.results, self.out, runs)

    def phase_pressure(self) -> None:
        """9. The deadlines and the relay under a held xmin, readers, kills, no connections and a restart."""
        result = pressure.run(self.env, self.mode, self.rate, self.workers)
        self.results.details["pressure"] = result
        self.results.sections.append(pressure.section(result))
        wrong = {k: v for k, v in result["correctness"].items() if k in pressure.MUST_BE_ZERO and v}
        self.results.add(
            "pressure_correctness_violations",
            Figure(float(sum(wrong.values())), "count", None, None, "== 0", not wrong and result["drained"],
                   f"at {self.rate:g}/s: lost, doubled, still Pending after the drain; drained {result['drained']}"),
        )  # fmt: skip

    def phase_console(self) -> None:
        """8. Every console page's server time, p50 and p99, over many dead letters and outbox rows."""
        outbox_rows, relay_letters, group_letters, tries = self.sizes["console"]
        measured = console.run(
            self.env, outbox_rows=outbox_rows, relay_letters=relay_letters, group_letters=group_letters, tries=tries
        )
        self.results.details["console"] = measured
        note = (f"{outbox_rows:,} outbox rows, {relay_letters:,} relay dead letters, {group_letters:,} dead letters "
                f"per group; {tries} requests in process")  # fmt: skip
        for page, figures in measured["pages"].items():
            for q in ("p50", "p99"):
                value = figures[f"{q}_ms"]
                goal, met = (f"<= {console.GOAL_MS:.0f} ms", value <= console.GOAL_MS) if q == "p99" else (None, None)
                self.results.add(f"console_{page}_{q}", Figure(value, "ms", None, None, goal, met, note))


def promotion_profile(env: BenchEnv, count: int) -> dict[str, Any]:
    """cProfile of ExpirePromotionsJob over ``count`` due purchases."""
    import json

    url = env.fresh_database("profile_promotion")
    promotion._seed_due(url, count)
    out = env.work_dir / "promotion-profile.json"
    role = env.spawn(
        "profile-promotion",
        [sys.executable, "-m", "bench.profile_worker", "expire-promotions", str(out)],
        env.role_env(url),
    )
    code = role.process.wait(timeout=1800)
    env.roles.remove(role)
    env.drop_database(url)
    if code != 0:
        raise RuntimeError(f"bench: the profiled worker failed; see {role.log_path}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _profile_section(job: str, prof: dict[str, Any], script: timeout.Script | None) -> str:
    lines = [
        f"## Where the time goes: {job} (cProfile, {prof['items']:,} items, "
        f"{prof['items_per_second_under_profiler']:.0f} items/s under the profiler)",
        "",
        "| category | seconds | share |",
        "|---|---:|---:|",
    ]
    for label, entry in prof["breakdown"].items():
        lines.append(f"| {label} | {entry['seconds']:.2f} | {entry['share'] * 100:.0f}% |")
    lines += ["", "Top functions by self time: " + ", ".join(
        f"`{t['function']}` {t['seconds']:.2f} s" for t in prof["top_self_time"][:8]
    )]  # fmt: skip
    if script is not None:
        lines += ["", f"Statements the worker sends per item ({len(script.per_item)}), in order:", ""]
        lines += [f"{i + 1}. `{s[:110]}{'...' if len(s) > 110 else ''}`" for i, s in enumerate(script.per_item)]
        lines += ["", f"... plus {len(script.per_cycle)} per cycle (once per 200 items in a full-batch drain)."]
    return "\n".join(lines)


def _dead_tuples_section(runs: list[dict[str, Any]]) -> str:
    tables = [t for t in timeout.HOT_TABLES if t != "outbox.message"]
    header = "| due appointments | drain s | " + " | ".join(f"{t}: dead, HOT updates, autovacuums" for t in tables)
    lines = [
        "## Dead tuples on the hot tables after each one-worker drain",
        "",
        header + " | claim index bytes |",
        "|---:|---:|" + "---|" * len(tables) + "---:|",
    ]
    for run in runs:
        stats = run["table_stats"]
        cells = [
            f"{stats[t].get('n_dead_tup')}, {stats[t].get('n_tup_hot_upd')}/{stats[t].get('n_tup_upd')}, "
            f"{stats[t].get('autovacuum_count')}"
            for t in tables
        ]
        index = stats.get("calendar.ix_appointments_pending_expires_at", {}).get("bytes")
        lines.append(f"| {run['count']:,} | {run['seconds']:.1f} | " + " | ".join(cells) + f" | {index} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the phases, write the results even when a phase fails (its failure becomes a note)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (a smoke run of a minute or two)")
    size.add_argument("--full", action="store_true", help="the issue's sizes everywhere (50,000 per group, 200,000)")
    parser.add_argument(
        "--only", default="", help=f"comma-separated phases of {','.join(PHASES + EXTRA_PHASES)} (pressure: only so)"
    )
    parser.add_argument(
        "--rate", type=float, default=pressure.RATES[0], help="pressure: appointments due per second (100 or 300)"
    )
    parser.add_argument("--workers", type=int, default=pressure.WORKERS, help="pressure: appointment-timeout processes")
    parser.add_argument("--repeat", type=int, default=1, help="run each phase N times; report median and min..max")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    mode = "quick" if args.quick else "full" if args.full else "default"
    phases = [p for p in args.only.split(",") if p] or list(PHASES)
    unknown = set(phases) - set(PHASES) - set(EXTRA_PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    out: Path = args.out
    if out.exists():
        for old in out.glob("*.png"):
            old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # the capture runs the workers in this process: keep their INFO lines out of the bench's own output (and an
    # exception's traceback plain, not drawn with its locals for seconds)
    import logging

    from pin.observability.logging import configure_unstarted

    configure_unstarted(logging.WARNING)
    env = make_env()
    run = Run(env, mode, out, args.rate, args.workers)
    server = pressure.DurableServer(env) if run.durable_url and set(phases) & set(durable.PHASES) else None
    try:
        print(f"bench: mode {mode}, phases {','.join(phases)}, {args.repeat} run(s) each, work dir {env.work_dir}")
        env.start()
        run.results.machine = env.machine()
        failures = _run_phases(run, phases, args.repeat, server)
        plots.ratios(run.results, out)
    finally:
        try:
            load = os.getloadavg()
            run.results.machine["loadavg_at_end"] = [round(x, 2) for x in load]
        except OSError:
            pass
        try:
            if server is not None:
                server.close()
        finally:
            env.close()
    seconds = time.monotonic() - started
    run.results.write(out, mode=mode, seconds=seconds)
    if out.resolve() == (Path(__file__).parent / "results").resolve():
        _update_readme(out / "summary.md")
    print(f"bench: done in {seconds:.0f} s; results in {out}")
    if failures == 0:
        shutil.rmtree(env.work_dir, ignore_errors=True)
    else:
        print(f"bench: {failures} phase(s) failed; logs kept in {env.work_dir}", file=sys.stderr)
    return 1 if failures else 0


def _run_phases(run: Run, phases: list[str], repeat: int, server: pressure.DurableServer | None) -> int:
    """The capture, then each phase ``repeat`` times, each commit-bound one then again on the durable server when one
    is configured (its autovacuum on from here on; the caller puts it back); the count of failed runs."""
    if server is not None:
        server.start()
        run.results.machine["durable"] = durable.describe(run.durable_url)
        print(f"bench: durable column on {durable.URL_VARIABLE}: {run.results.machine['durable']}")
    if set(phases) - set(EXTRA_PHASES):
        _step("capture", run.capture)
    failures = 0
    for phase in phases:
        failures += _run_phase(run, phase, repeat)
        if server is not None and phase in durable.PHASES:
            failures += _run_phase(run, phase, repeat, on_durable=True)
    return failures


def _run_phase(run: Run, phase: str, repeat: int, *, on_durable: bool = False) -> int:
    """Run a phase ``repeat`` times, each between two load samples; keep the median of each figure; count failures.

    Each run fills fresh figures and details; the last run's details, profiles and plots are kept, every run's
    details go to run.json under ``repeats`` when there is more than one. ``on_durable``: the runs are on the
    durable server (bench.durable); their figures go to the durable column, their details under ``durable``.
    """
    results = run.results
    figures, details = results.figures, results.details
    target, kept = (results.durable, details.setdefault("durable", {})) if on_durable else (figures, details)
    key = f"{phase} ({durable.DURABLE})" if on_durable else phase
    sections_before = len(results.sections)
    per_run: dict[str, list[Figure]] = {}
    failures = 0
    action: Callable[[], None] = getattr(run, f"phase_{phase}")
    for i in range(repeat):
        label = key if repeat == 1 else f"{key} (run {i + 1}/{repeat})"
        results.figures, results.details = {}, {}
        if not on_durable:
            del results.sections[sections_before:]  # an earlier run's profile sections: the last run's replace them
        start = _load_1m()
        ok = _step(label, (lambda: run.on_durable(action)) if on_durable else action, results)
        end = _load_1m()
        failures += 0 if ok else 1
        window = None if start is None or end is None else LoadWindow(start, end, os.cpu_count() or 1)
        if window is not None:
            print(f"bench: {label} load (1 min) {window.describe()}", flush=True)
            details.setdefault("phase_load", {}).setdefault(key, []).append(window.as_dict())
        for name, figure in results.figures.items():
            figure.loads = [window] if window is not None else []
            per_run.setdefault(name, []).append(figure)
        run_details = results.details
        details.setdefault("phase_seconds", {}).update(run_details.pop("phase_seconds", {}))
        kept.update(run_details)
        if repeat > 1:
            details.setdefault("repeats", {}).setdefault(key, []).append(run_details)
    results.figures, results.details = figures, details
    for name, runs in per_run.items():
        target[name] = runs[0] if len(runs) == 1 else aggregate(runs)
        if repeat > 1:
            _print_aggregate(name, target[name])
    return failures


def _load_1m() -> float | None:
    """The machine's 1-minute load average, or None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _print_aggregate(name: str, figure: Figure) -> None:
    shown = figure.as_dict()
    spread = "" if figure.spread is None else f" ({figure.spread[0]:.3g}..{figure.spread[1]:.3g})"
    what = "ratio" if figure.ratio is not None else "value"
    noisy = f", noisy in {sum(w.noisy for w in figure.loads)} of {len(figure.loads)} runs" if figure.noisy else ""
    print(
        f"  {name}: median of {figure.runs}: {shown['value']} {figure.unit}  baseline={shown['baseline']}  "
        f"ratio={shown['ratio']}  {what} spread{spread}{noisy}"
    )


def _update_readme(summary: Path) -> None:
    """Put the run's table between the README's results markers (the analysis around it is written by hand)."""
    readme = Path(__file__).parent / "README.md"
    text = readme.read_text()
    start, end = "<!-- results:start -->", "<!-- results:end -->"
    if start not in text or end not in text:
        return
    body = summary.read_text().replace("](", "](results/").replace("# Benchmark results", "### Table of the last run")
    body = body.replace("\n## ", "\n#### ")
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    readme.write_text(f"{head}{start}\n{body}{end}{tail}")


def _step(name: str, action: Callable[[], None], results: Results | None = None) -> bool:
    print(f"bench: {name} ...", flush=True)
    began = time.monotonic()
    try:
        action()
    except Exception as exc:
        if results is None:
            raise
        traceback.print_exc()
        results.notes.append(f"phase {name} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        return False
    finally:
        print(f"bench: {name} took {time.monotonic() - began:.0f} s", flush=True)
    if results is not None:
        results.details.setdefault("phase_seconds", {})[name] = round(time.monotonic() - began, 1)
    return True


if __name__ == "__main__":
    sys.exit(main())
