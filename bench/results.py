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

    def as_dict(self) -> dict[str, Any]:
        """The summary.json entry."""
        out: dict[str, Any] = {
            "value": _round(self.value),
            "unit": self.unit,
            "baseline": _round(self.baseline),
            "ratio": _round(self.ratio, 3),
        }
        if self.goal is not None:
            out["goal"] = self.goal
            out["met"] = self.met
        if self.note:
            out["note"] = self.note
        return out


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
            "| figure | value | unit | baseline | ratio | goal | met |",
            "|---|---:|---|---:|---:|---|---|",
        ]
        for name, figure in self.figures.items():
            d = figure.as_dict()
            met = "" if figure.met is None else ("yes" if figure.met else "**no**")
            lines.append(
                f"| {name} | {_show(d['value'])} | {figure.unit} | {_show(d['baseline'])} | {_show(d['ratio'])} "
                f"| {figure.goal or ''} | {met} |"
            )
        if self.notes:
            lines += ["", "Notes:", ""]
            lines += [f"- {note}" for note in self.notes]
        for section in self.sections:
            lines += ["", section.rstrip()]
        if self.plots:
            lines += ["", "## Plots", ""]
            lines += [f"![{name}]({name})" for name in self.plots]
        return "\n".join(lines) + "\n"


def _show(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
