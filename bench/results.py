"""The figures of one run: summary.json ({name: {value, unit, baseline, ratio}}), summary.md and the plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    """One measured figure, its same-run baseline and value/baseline (None when a figure has no baseline)."""

    value: float | None
    unit: str
    baseline: float | None = None
    ratio: float | None = None
    goal: str | None = None
    met: bool | None = None
    note: str = ""
    runs: int = 1
    spread: tuple[float, float] | None = None  # min..max of the ratio (of the value without a ratio) over the runs
    loads: list[LoadWindow] = field(default_factory=list)  # the machine's load around each run of the phase

    @property
    def noisy(self) -> bool:
        """Whether any run of the phase behind this figure ran on a busy or changing machine."""
        return any(load.noisy for load in self.loads)

    def as_dict(self) -> dict[str, Any]:
        """The summary.json entry."""
        out: dict[str, Any] = {
            "value": _round(self.value),
            "unit": self.unit,
            "baseline": _round(self.baseline),
            "ratio": _round(self.ratio, 3),
        }
        if self.runs > 1:
            out["runs"] = self.runs
            out["spread"] = None if self.spread is None else [_round(x, 3) for x in self.spread]
        if self.goal is not None:
            out["goal"] = self.goal
            out["met"] = self.met
        if self.loads:
            out["load_1m"] = [[load.start, load.end] for load in self.loads]
            out["noisy"] = self.noisy
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class LoadWindow:
    """The 1-minute load average at the start and the end of one run of a phase, on a machine of ``cores`` CPUs.

    Noisy when the load moved by more than one core during the run (a neighbour started or stopped: value and
    baseline did not share the same machine), or when it already exceeded the cores at the start (every process,
    ours and the baseline, waited for a CPU). The 1-minute figure lags: a run shorter than a minute sees only part
    of a change, so a quiet verdict on a short run is weaker than a noisy one.
    """

    start: float
    end: float
    cores: int

    @property
    def reason(self) -> str | None:
        """Why the run is noisy, or None when it is not."""
        moved = self.end - self.start
        if abs(moved) > 1:
            return f"load moved by {moved:+.2f} (more than one core)"
        if self.start > self.cores:
            return f"load {self.start:.2f} above the {self.cores} cores at the start"
        return None

    @property
    def noisy(self) -> bool:
        """Whether the run is noisy (see the class docstring)."""
        return self.reason is not None

    def describe(self) -> str:
        """One line for the console: start -> end, and the verdict with its reason."""
        shown = f"{self.start:.2f} -> {self.end:.2f} of {self.cores} cores"
        return f"{shown}, NOISY: {self.reason}" if self.reason else f"{shown}, quiet"

    def cell(self) -> str:
        """The table's short form: start→end, marked when noisy."""
        shown = f"{self.start:.2f}→{self.end:.2f}"
        return f"{shown} **noisy**" if self.noisy else shown

    def as_dict(self) -> dict[str, Any]:
        """The run.json entry."""
        return {"start": self.start, "end": self.end, "cores": self.cores, "noisy": self.noisy, "reason": self.reason}


def median(values: Sequence[float]) -> float:
    """The median (the mean of the two middle values for an even count); NaN for no values."""
    return percentile(values, 50)


def aggregate(runs: Sequence[Figure]) -> Figure:
    """One figure from the same figure of N runs: median value, baseline and ratio, each on its own; min..max spread.

    The median ratio is taken over the runs' ratios (not the ratio of the medians): each ratio pairs a value with
    the baseline measured beside it, which is the point of a same-run baseline. The goal is judged on the medians.
    """
    if not runs:
        raise ValueError("aggregate: no runs")
    last = runs[-1]
    values = [f.value for f in runs if f.value is not None]
    baselines = [f.baseline for f in runs if f.baseline is not None]
    ratios = [f.ratio for f in runs if f.ratio is not None]
    value = median(values) if values else None
    ratio_ = median(ratios) if ratios else None
    spread_of = ratios or values
    return Figure(
        value=value,
        unit=last.unit,
        baseline=median(baselines) if baselines else None,
        ratio=ratio_,
        goal=last.goal,
        met=goal_met(last.goal, value, ratio_),
        note=last.note,
        runs=len(runs),
        spread=(min(spread_of), max(spread_of)) if spread_of else None,
        loads=[load for f in runs for load in f.loads],
    )


def goal_met(goal: str | None, value: float | None, ratio_: float | None) -> bool | None:
    """Judge a goal as the phases write it: ">= 0.8" is on the ratio, "<= 200 ms" (with a unit) on the value."""
    if goal is None:
        return None
    op, number, *unit = goal.split()
    subject = value if unit else ratio_
    if subject is None:
        return False
    return subject >= float(number) if op == ">=" else subject <= float(number)


def _round(value: float | None, digits: int = 2) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), digits)


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing or the baseline is 0."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Results:
    """Everything one invocation measured."""

    figures: dict[str, Figure] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)  # extra markdown (profiles, dead tuples, statements)
    durable: dict[str, Figure] = field(default_factory=dict)  # the same figures on the durable server (bench.durable)

    def add(self, name: str, figure: Figure) -> Figure:
        """Record a figure (and print it, so a long run shows progress)."""
        self.figures[name] = figure
        shown = figure.as_dict()
        print(f"  {name}: {shown['value']} {figure.unit}  baseline={shown['baseline']}  ratio={shown['ratio']}")
        return figure

    def write(self, directory: Path, *, mode: str, seconds: float) -> None:
        """summary.json and summary.md in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        summary = {name: figure.as_dict() for name, figure in self.figures.items()}
        for name, figure in self.durable.items():
            summary.setdefault(name, {})["durable"] = figure.as_dict()
        (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
        meta = {"mode": mode, "seconds": round(seconds, 1), "machine": self.machine, "notes": self.notes}
        meta["details"] = self.details
        (directory / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        (directory / "summary.md").write_text(self.markdown(mode=mode, seconds=seconds))

    def markdown(self, *, mode: str, seconds: float) -> str:
        """The results table with the machine it ran on."""
        m = self.machine
        lines = [
            "# Benchmark results",
            "",
            f"Mode `{mode}`, {seconds:.0f} s in total. Machine: {m.get('nproc')} CPUs, {m.get('memory_gb')} GB, "
            f"PostgreSQL {m.get('pg_server_version')} ({m.get('postgres')}; fsync={m.get('pg_fsync')}, "
            f"synchronous_commit={m.get('pg_synchronous_commit')}), broker: {m.get('broker')}, "
            f"load average at start {m.get('loadavg_at_start')}.",
            "",
            "| figure | value | unit | baseline | ratio | spread | goal | met | load (1 min, per run) |",
            "|---|---:|---|---:|---:|---|---|---|---|",
        ]
        for name, figure in self.figures.items():
            d = figure.as_dict()
            met = "" if figure.met is None else ("yes" if figure.met else "**no**")
            spread = "" if figure.spread is None else f"{figure.spread[0]:.3g}..{figure.spread[1]:.3g} ({figure.runs})"
            load = ", ".join(window.cell() for window in figure.loads)
            lines.append(
                f"| {name} | {_show(d['value'])} | {figure.unit} | {_show(d['baseline'])} | {_show(d['ratio'])} "
                f"| {spread} | {figure.goal or ''} | {met} | {load} |"
            )
        lines += self._durable_table()
        if self.notes:
            lines += ["", "Notes:", ""]
            lines += [f"- {note}" for note in self.notes]
        for section in self.sections:
            lines += ["", section.rstrip()]
        if self.plots:
            lines += ["", "## Plots", ""]
            lines += [f"![{name}]({name})" for name in dict.fromkeys(self.plots)]  # --repeat redraws each plot
        return "\n".join(lines) + "\n"

    def _durable_table(self) -> list[str]:
        """Both columns side by side: each commit-bound figure on the main server and on the durable one, each
        against its own baseline measured on that server."""
        if not self.durable:
            return []
        server = self.machine.get("durable") or {}
        shown = ", ".join(f"{k}={v}" for k, v in server.items())
        lines = [
            "",
            "## Both columns: the main server and a durable one",
            "",
            f"The commit-bound phases again on `PIN_BENCH_DURABLE_DATABASE_URL` ({shown}), each against its own "
            "baseline on that server in the same run (summary.json: `durable` under each figure).",
            "",
            "| figure | unit | main: value | baseline | ratio | durable: value | baseline | ratio | spread | goal "
            "| met | load (1 min, per run) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|",
        ]
        for name, figure in self.durable.items():
            d = figure.as_dict()
            main = self.figures.get(name)
            m = main.as_dict() if main is not None else {"value": None, "baseline": None, "ratio": None}
            met = "" if figure.met is None else ("yes" if figure.met else "**no**")
            spread = "" if figure.spread is None else f"{figure.spread[0]:.3g}..{figure.spread[1]:.3g} ({figure.runs})"
            load = ", ".join(window.cell() for window in figure.loads)
            lines.append(
                f"| {name} | {figure.unit} | {_show(m['value'])} | {_show(m['baseline'])} | {_show(m['ratio'])} "
                f"| {_show(d['value'])} | {_show(d['baseline'])} | {_show(d['ratio'])} | {spread} "
                f"| {figure.goal or ''} | {met} | {load} |"
            )
        return lines


def _show(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
