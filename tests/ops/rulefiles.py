"""Reading the Prometheus rule files and the Grafana dashboards, and the metric names their queries use.

The rule files have one fixed shape (see deploy/prometheus/*.rules.yml), so a small strict reader is enough
and keeps PyYAML out of the dependencies; it fails loudly on anything it does not understand.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"


@dataclass
class Rule:
    """One recording or alerting rule."""

    file: str
    kind: str  # "alert" or "record"
    name: str
    expr: str = ""
    hold: str = "0s"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def _scalar(text: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        value: str = json.loads(text)  # the double-quoted YAML strings used here are JSON strings
        return value
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return text


def read_rules(path: Path) -> list[Rule]:
    """Every rule of one rule file."""
    rules: list[Rule] = []
    lines = path.read_text().splitlines()
    section: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        i += 1
        if not stripped or stripped.startswith("#") or stripped in ("groups:", "rules:"):
            continue
        if stripped.startswith("- name:"):
            continue
        start = re.match(r"- (alert|record): (\S+)$", stripped)
        if start:
            rules.append(Rule(file=path.name, kind=start.group(1), name=start.group(2)))
            section = None
            continue
        if not rules:
            raise ValueError(f"{path.name}: unexpected line before the first rule: {line!r}")
        rule = rules[-1]
        key, sep, value = stripped.partition(":")
        if key == "expr" and value.strip() == "|":
            indent = len(line) - len(line.lstrip())
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            rule.expr = " ".join(part for part in block if part)
            section = None
        elif key == "expr":
            rule.expr = _scalar(value)
            section = None
        elif key == "for":
            rule.hold = value.strip()
            section = None
        elif key in ("labels", "annotations") and not value.strip():
            section = key
        elif sep and section is not None:
            getattr(rule, section)[key] = _scalar(value)
        else:
            raise ValueError(f"{path.name}: cannot read line {i}: {line!r}")
    return rules


def all_rules() -> list[Rule]:
    """Every rule of every rule file under deploy/prometheus."""
    return [rule for path in sorted(PROMETHEUS.glob("*.rules.yml")) for rule in read_rules(path)]


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, PromQL) for every query target and templating query of every dashboard."""
    found: list[tuple[str, str, str]] = []
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        document = json.loads(path.read_text())
        panels = list(document.get("panels", []))
        while panels:
            panel = panels.pop(0)
            panels.extend(panel.get("panels", []))  # collapsed rows hold their panels
            for target in panel.get("targets", []):
                if target.get("expr"):
                    found.append((path.name, panel.get("title", "?"), target["expr"]))
        for variable in document.get("templating", {}).get("list", []):
            query = variable.get("query")
            if variable.get("type") == "query":
                text = query.get("query") if isinstance(query, dict) else query
                inner = re.fullmatch(r"label_values\((?:(.+),\s*)?\w+\)", text or "")
                if inner and inner.group(1):
                    found.append((path.name, f"variable {variable['name']}", inner.group(1)))
    return found


# PromQL words that are not metric names.
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
    | {"and", "or", "unless", "offset", "inf", "nan"}
)
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, labels, keywords and durations removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals (label values)
    text = re.sub(r"'(?:[^'\\]|\\.)*'", "''", text)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations
    text = _GROUPING.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables ($__rate_interval, ${topic})
    names: set[str] = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _KEYWORDS or re.fullmatch(r"\d+(ms|s|m|h|d|w|y)", word):
            continue
        names.add(word)
    return names


def label_matchers(expr: str) -> list[tuple[str, set[str]]]:
    """(metric, label names in its {...} selector) for every selector with labels."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return [
        (match.group(1), set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", match.group(2))))
        for match in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", text)
    ]


def grouping_labels(expr: str) -> set[str]:
    """Label names an expression groups or matches on (``by (...)``, ``on (...)``, ...)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    labels: set[str] = set()
    for match in _GROUPING.finditer(text):
        inside = match.group(0)[match.group(0).index("(") + 1 : -1]
        labels.update(name.strip() for name in inside.split(",") if name.strip())
    return labels


def legend_labels(legend: str) -> set[str]:
    """Label names a Grafana legend format uses (``{{topic}}``)."""
    return set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))


RUNBOOKS = ROOT / "docs" / "runbooks"
# the aggregation operators that drop every label their ``by (...)`` does not name (topk and bottomk keep them)
_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|count|group|stddev|stdvar|quantile)\s*(?:(by|without)\s*\(([^)]*)\))?\s*\("
)


def kept_labels(expr: str) -> set[str] | None:
    """The labels an expression's result keeps of its series: those every aggregation in it groups by (None: it
    aggregates nothing, so it keeps them all). Conservative for a binary operation of two aggregations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    if re.search(r"\)\s*(by|without)\s*\(", text):
        raise ValueError(f"write the grouping before the aggregation's argument: {expr!r}")
    kept: set[str] | None = None
    for match in _AGGREGATION.finditer(text):
        if match.group(2) == "without":
            raise ValueError(f"name the labels kept (by), not those dropped: {expr!r}")
        grouped = {name.strip() for name in (match.group(3) or "").split(",") if name.strip()}
        kept = grouped if kept is None else kept & grouped
    return kept


def pinned_labels(expr: str, metric: str) -> set[str]:
    """The labels ``metric``'s selectors in ``expr`` fix to one value (``topic="..."``): nothing to tell apart."""
    pinned: set[str] = set()
    for match in re.finditer(rf"(?<![\w:]){re.escape(metric)}\s*\{{([^}}]*)\}}", expr):
        pinned |= set(re.findall(r"([a-zA-Z_]\w*)\s*=(?![~=])", match.group(1)))
    return pinned


def runbook_labels() -> dict[str, set[str]]:
    """metric -> the labels a runbook names it with (``pin_outbox_lag_seconds{topic}``, bare label names only)."""
    found: dict[str, set[str]] = {}
    for path in sorted(RUNBOOKS.glob("*.md")):
        for name, inside in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)\{(\s*\w+(?:\s*,\s*\w+)*\s*)\}`", path.read_text()):
            found.setdefault(name, set()).update(label.strip() for label in inside.split(","))
    return found
