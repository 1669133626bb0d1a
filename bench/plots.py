"""PNG plots of one run (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from bench.results import Results, percentile

_STYLE = {"figure.dpi": 110, "font.size": 10, "axes.grid": True, "grid.alpha": 0.3}


def _save(fig: Any, directory: Path, name: str, results: Results) -> None:
    fig.tight_layout()
    fig.savefig(directory / name)
    plt.close(fig)
    results.plots.append(name)


def ratios(results: Results, directory: Path) -> None:
    """Every throughput ratio against its same-run baseline, with the goals."""
    goals = {"timeout": 0.8, "promotion": 0.8, "relay": 0.5}
    items = [
        (name, f.ratio)
        for name, f in results.figures.items()
        if f.ratio is not None and "per_second" in f.unit and not name.endswith("_vs_batch_commit")
    ]
    if not items:
        return
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(9, 0.45 * len(items) + 1.6))
        names = [n for n, _ in items][::-1]
        values = [v for _, v in items][::-1]
        colors = []
        for n, v in zip(names, values, strict=True):
            goal = next((g for k, g in goals.items() if n.startswith(k)), None)
            colors.append("#999999" if goal is None else "#2a9d55" if v >= goal else "#d1495b")
        bars = ax.barh(names, values, color=colors)
        for bar, v in zip(bars, values, strict=True):
            ax.text(bar.get_width() + 0.01, bar.get_y() + bar.get_height() / 2, f"{v:.2f}", va="center")
        ax.axvline(0.8, color="#d1495b", linestyle="--", linewidth=1, label="goal 0.8 (workers)")
        ax.axvline(0.5, color="#e39b2d", linestyle=":", linewidth=1, label="goal 0.5 (relay)")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("throughput / same-run baseline (1.0 = as fast as the baseline)")
        ax.set_title("Throughput / same-run baseline\n(green: goal met, red: goal missed, grey: no goal)")
        ax.legend(loc="lower right")
        _save(fig, directory, "ratios.png", results)


def _cdf(ax: Any, values: Sequence[float], label: str) -> None:
    ordered = sorted(values)
    if not ordered:
        return
    ys = [(i + 1) / len(ordered) for i in range(len(ordered))]
    ax.plot(ordered, ys, label=label)


def expiry_lag(results: Results, directory: Path, lag: dict[str, Any]) -> None:
    """Lag of each expiry against its deadline: over time, and as a histogram."""
    ms = lag["lags_ms"]
    if not ms:
        return
    seconds = [x / 1000 for x in ms]
    with plt.rc_context(_STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        left.scatter(lag["due_offsets_s"], seconds, s=4)
        left.set_xlabel("PendingExpiresAt, seconds from the first deadline")
        left.set_ylabel("expiry commit - PendingExpiresAt (s)")
        left.set_title(f"Expiry lag per appointment ({len(ms)} over {lag['spread_s']:.0f} s, one worker)")
        right.hist(seconds, bins=40)
        for q, style in ((50, "--"), (99, ":")):
            v = percentile(seconds, q)
            right.axvline(v, color="black", linestyle=style, label=f"p{q} = {v:.3f} s")
        right.axvline(max(seconds), color="#d1495b", label=f"max = {max(seconds):.3f} s")
        right.axvline(1.0, color="#2a9d55", linewidth=2, label="goal p99 <= 1 s")
        right.set_xlabel("lag (s)")
        right.set_ylabel("appointments")
        right.set_title("Distribution")
        right.legend()
        _save(fig, directory, "expiry_lag.png", results)


def relay_latency(results: Results, directory: Path, latency: dict[str, Any]) -> None:
    """CDF of commit -> ack through the relay vs produce -> ack of the bare producer, at the same rate."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(8, 4.5))
        _cdf(ax, latency["latencies_ms"], f"relay: commit -> ack (p99 {latency['p99_ms']:.0f} ms)")
        base = latency["baseline"]
        _cdf(ax, base["latencies_ms"], f"bare producer: send -> ack (p99 {base['p99_ms']:.0f} ms)")
        ax.axvline(200, color="#d1495b", linestyle="--", label="goal p99 <= 200 ms")
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel("fraction of messages")
        ax.set_title(f"Latency at a steady {latency['target_rate']:.0f} events/s")
        ax.legend(loc="lower right")
        _save(fig, directory, "relay_latency.png", results)


def relay_drain(results: Results, directory: Path, drain: dict[str, Any]) -> None:
    """Outbox rows left over time while one relay drains them."""
    samples = drain["samples"]
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([t for t, _ in samples], [n for _, n in samples])
        ax.set_xlabel("seconds since the relay could start")
        ax.set_ylabel("outbox rows left")
        ax.set_title(
            f"Relay drain of {drain['count']:,} rows: {drain['messages_per_second']:.0f} msg/s "
            f"(bare producer {drain['baseline_messages_per_second']:.0f} msg/s)"
        )
        _save(fig, directory, "relay_drain.png", results)


def end_to_end(results: Results, directory: Path, e2e: dict[str, Any]) -> None:
    """PendingExpiresAt -> both notifications: CDF, and the median/p99 of each part."""
    with plt.rc_context(_STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        _cdf(left, [x / 1000 for x in e2e["totals_ms"]], "PendingExpiresAt -> both notifications")
        left.set_xlabel("seconds")
        left.set_ylabel("fraction of appointments")
        left.set_title(f"End to end, everything running ({e2e['appointments']} appointments)")
        left.legend(loc="lower right")
        parts = ["expiry", "relay", "consumer", "total"]
        p50 = [e2e[p]["p50_ms"] / 1000 for p in parts]
        p99 = [e2e[p]["p99_ms"] / 1000 for p in parts]
        xs = range(len(parts))
        right.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50")
        right.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
        right.set_xticks(
            list(xs), ["deadline\n-> expiry commit", "commit\n-> broker ack", "ack\n-> notification", "total"]
        )
        right.set_ylabel("seconds")
        right.set_title("Where the time goes")
        right.legend()
        _save(fig, directory, "end_to_end.png", results)


def scaling(results: Results, directory: Path, runs: list[dict[str, Any]]) -> None:
    """Drain time against the number of due appointments, and dead tuples left on the hot tables."""
    if not runs:
        return
    runs = sorted(runs, key=lambda r: r["count"])
    with plt.rc_context(_STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        counts = [r["count"] for r in runs]
        seconds = [r["seconds"] for r in runs]
        left.plot(counts, seconds, marker="o", label="measured")
        per_item = seconds[0] / counts[0]
        left.plot(counts, [c * per_item for c in counts], linestyle="--", label="linear from the smallest run")
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("due appointments")
        left.set_ylabel("drain time (s)")
        left.set_title("Drain time, one worker")
        left.legend()
        tables = [
            "calendar.appointment",
            "calendar.availability_slot",
            "calendar.calendar_event",
            "calendar.event_reminder",
        ]
        width = 0.8 / len(runs)
        for k, run in enumerate(runs):
            dead = [run["table_stats"].get(t, {}).get("n_dead_tup") or 0 for t in tables]
            right.bar([i + k * width for i in range(len(tables))], dead, width=width, label=f"{run['count']:,}")
        right.set_xticks(
            [i + width * (len(runs) - 1) / 2 for i in range(len(tables))], [t.split(".")[1] for t in tables]
        )
        right.set_ylabel("dead tuples after the drain")
        right.set_title("Dead tuples (autovacuum runs during the drain)")
        right.legend(title="due appointments")
        _save(fig, directory, "scaling.png", results)
