"""Dashboards, alert rules and runbooks name only what really exists.

Every metric a rule or dashboard query selects must be exported by the code (collected from the
prometheus_client registry after importing the modules that define the metrics) or recorded by a rule; every
label they select or group by must be a label of those metrics; every alert links to an existing runbook
section. The seeds' metric names (fixed in the helper guide) must all be exported, with their labels.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tests.ops.rulefiles import (
    GRAFANA,
    ROOT,
    all_rules,
    dashboard_queries,
    grouping_labels,
    kept_labels,
    label_matchers,
    legend_labels,
    metric_names,
    pinned_labels,
    runbook_labels,
)

pytestmark = pytest.mark.unit

# The packages whose modules define metrics (and any other module that might): imported in full.
METRIC_PACKAGES = (
    "pin.api",
    "pin.calendar",
    "pin.promotion",
    "pin.outbox",
    "pin.messaging",
    "pin.jobs",
    "pin.crm",
    "pin.notifications",
    "pin.catalog",
    "pin.news",
    "pin.observability",
)

# The seeds' metrics (seed 000, seed 002, and the relay, consumer, poison and interval names fixed for this project):
# name as declared (prometheus-client adds _total to counters), type, labels.
SEED_METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "calendar_appointment_timeout_cycle_duration_seconds": ("histogram", ()),
    "calendar_appointment_timeout_items": ("counter", ("slot_outcome",)),
    "calendar_appointment_timeout_backlog": ("gauge", ()),
    "calendar_appointment_timeout_skip_locked": ("counter", ()),
    "calendar_appointment_timeout_errors": ("counter", ()),
    "calendar_appointment_timeout_last_success_timestamp_seconds": ("gauge", ()),
    "calendar_appointment_timeout_poison_items": ("gauge", ()),
    "promotion_expire_run": ("counter", ()),
    "promotion_expire_cycle_duration_seconds": ("histogram", ()),
    "promotion_expire_items": ("counter", ("outcome",)),
    "promotion_expire_backlog": ("gauge", ()),
    "promotion_expire_skip_locked": ("counter", ()),
    "promotion_expire_errors": ("counter", ()),
    "promotion_expire_last_success_timestamp_seconds": ("gauge", ()),
    "promotion_expire_poison_items": ("gauge", ()),
    "promotion_expire_interval_seconds": ("gauge", ()),
    "pin_outbox_backlog": ("gauge", ("topic",)),
    "pin_outbox_lag_seconds": ("gauge", ("topic",)),
    "pin_outbox_published": ("counter", ("topic",)),
    "pin_outbox_publish_errors": ("counter", ("topic",)),
    "pin_outbox_dead_lettered": ("counter", ("topic",)),
    "pin_outbox_publish_latency_seconds": ("histogram", ()),
    "pin_outbox_owned_vparts": ("gauge", ()),
    "pin_consumer_processed": ("counter", ("group", "topic")),
    "pin_consumer_duplicates": ("counter", ("group", "topic")),
    "pin_consumer_retries": ("counter", ("group", "topic")),
    "pin_consumer_dead_lettered": ("counter", ("group", "topic")),
    "pin_consumer_unknown_values": ("counter", ("group", "field")),
    "pin_consumer_lag": ("gauge", ("group", "topic", "partition")),
}

# Labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = frozenset({"instance", "job"})
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def _import_metric_modules() -> None:
    for package_name in METRIC_PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)


def exported() -> tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]]:
    """(declared name -> (type, labels), exposed sample name -> its labels) of the process's default registry."""
    _import_metric_modules()
    declared: dict[str, tuple[str, tuple[str, ...]]] = {}
    samples: dict[str, set[str]] = {}
    # prometheus_client keeps no public list of registered collectors; this private map is the registry itself
    for collector, names in list(REGISTRY._collector_to_names.items()):
        kind = getattr(collector, "_type", None)
        name = getattr(collector, "_name", None)
        labels = tuple(getattr(collector, "_labelnames", ()))
        if kind is None or name is None:  # process, platform and gc collectors
            for sample in names:
                samples[sample] = set()
            continue
        declared[name] = (kind, labels)
        for suffix in SUFFIXES.get(kind, ("",)):
            samples[name + suffix] = set(labels) | ({"le"} if suffix == "_bucket" else set())
    return declared, samples


@pytest.fixture(scope="module")
def registry() -> tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]]:
    return exported()


def test_every_seed_metric_is_exported_with_its_type_and_labels(
    registry: tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]],
) -> None:
    declared, _ = registry
    missing = sorted(name for name in SEED_METRICS if name not in declared)
    assert not missing, f"metrics the seeds name but no module of {METRIC_PACKAGES} defines: {missing}"
    wrong = {name: declared[name] for name, spec in SEED_METRICS.items() if declared[name] != spec}
    assert not wrong, f"metrics with another type or labels than the seeds': {wrong}"


def _queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every rule expression and dashboard query."""
    rules = [(f"{rule.file}: {rule.name}", rule.expr) for rule in all_rules()]
    panels = [(f"{board}: {title}", expr) for board, title, expr in dashboard_queries()]
    assert len(rules) > 20
    assert len(panels) > 30
    return rules + panels


def test_every_query_selects_exported_metrics_by_their_labels(
    registry: tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]],
) -> None:
    _, samples = registry
    recorded = {rule.name for rule in all_rules() if rule.kind == "record"}
    problems: list[str] = []
    for where, expr in _queries():
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: no metric in {expr!r}")
        for name in sorted(names - set(samples) - recorded):
            problems.append(f"{where}: {name} is not exported by the code")
        for name, labels in label_matchers(expr):
            unknown = labels - samples.get(name, set()) - TARGET_LABELS
            if name in samples and unknown:
                problems.append(f"{where}: {name} has no label {sorted(unknown)}")
        available = set().union(*(samples.get(name, set()) for name in names)) | TARGET_LABELS
        for label in sorted(grouping_labels(expr) - available):
            problems.append(f"{where}: groups by {label}, which none of {sorted(names)} has")
    assert not problems, "\n".join(problems)


def test_the_name_extraction_finds_metrics_and_only_metrics() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le) (rate(a_seconds_bucket{topic=~"x.y"}[5m]))) '
        "> on (group) group_left b_total offset 5m or vector(0) unless time() - c_gauge{instance='i'}"
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c_gauge"}
    assert grouping_labels(expr) == {"le", "group"}
    assert label_matchers(expr) == [("a_seconds_bucket", {"topic"}), ("c_gauge", {"instance"})]
    assert metric_names("sum(rate(x_total[$__rate_interval])) * 60") == {"x_total"}


def _runbook_labels_of(name: str) -> set[str]:
    """The labels the runbooks name a sample's metric with (a histogram's by its base name)."""
    named = runbook_labels()
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return named.get(name, named.get(base, set()))


def test_the_runbooks_name_metrics_by_labels_they_have(
    registry: tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]],
) -> None:
    _, samples = registry
    named = runbook_labels()
    assert named["pin_outbox_lag_seconds"] == {"topic"}  # the reader finds the runbooks' signal tables
    problems = [
        f"docs/runbooks: {name}{{{','.join(sorted(labels))}}}: "
        + (f"exported with {sorted(samples[name])}" if name in samples else "not exported")
        for name, labels in sorted(named.items())
        if not labels <= samples.get(name, samples.get(f"{name}_bucket", set()))
    ]
    assert not problems, "\n".join(problems)


def test_no_panel_aggregates_away_a_label_the_runbooks_name_and_its_legend_tells_the_series_apart() -> None:
    """A runbook says ``pin_outbox_lag_seconds{topic}``: a panel of it shows one series per topic (or selects one
    topic), named by topic in its legend; ``max(pin_outbox_lag_seconds)`` would hide which topic lags."""
    problems: list[str] = []
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        for panels in _panels_by_row(_board(path.stem)).values():
            for panel in panels:
                for target in panel["targets"]:  # type: ignore[attr-defined]
                    expr, legend = target["expr"], target.get("legendFormat", "")
                    kept = kept_labels(expr)
                    for name in sorted(metric_names(expr)):
                        wanted = _runbook_labels_of(name) - pinned_labels(expr, name)
                        if kept is not None and wanted - kept:
                            problems.append(f"{path.name}: {panel['title']}: {expr} drops {sorted(wanted - kept)}")
                        if unnamed := wanted - legend_labels(legend):
                            problems.append(f"{path.name}: {panel['title']}: legend {legend!r} lacks {sorted(unnamed)}")
    assert not problems, "\n".join(problems)


def test_the_label_reading_sees_what_a_query_keeps_and_fixes() -> None:
    assert kept_labels("max(pin_outbox_lag_seconds)") == set()
    assert kept_labels("max by (topic) (pin_outbox_lag_seconds)") == {"topic"}
    assert kept_labels("sum(max by (topic) (pin_outbox_backlog))") == set()
    assert kept_labels("histogram_quantile(0.99, sum by (group, le) (rate(a_bucket[5m])))") == {"group", "le"}
    assert kept_labels("pin_outbox_owned_vparts") is None
    assert pinned_labels('max(pin_outbox_backlog{topic="t", group=~"g"})', "pin_outbox_backlog") == {"topic"}
    assert pinned_labels('max(pin_outbox_backlog{topic!="t"})', "pin_outbox_backlog") == set()
    with pytest.raises(ValueError, match="grouping before"):
        kept_labels("sum(x) by (topic)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_alert_has_severity_summary_and_an_existing_runbook_section() -> None:
    alerts = [rule for rule in all_rules() if rule.kind == "alert"]
    assert len(alerts) >= 20
    problems: list[str] = []
    for alert in alerts:
        if alert.labels.get("severity") not in ("critical", "warning", "info"):
            problems.append(f"{alert.name}: severity {alert.labels.get('severity')!r}")
        if not alert.annotations.get("summary"):
            problems.append(f"{alert.name}: no summary")
        url = alert.annotations.get("runbook_url", "")
        path, _, anchor = url.partition("#")
        document = ROOT / path
        if not path.startswith("docs/runbooks/") or not document.is_file():
            problems.append(f"{alert.name}: runbook {path!r} does not exist")
            continue
        anchors = {_slug(line.lstrip("#")) for line in document.read_text().splitlines() if line.startswith("#")}
        if anchor not in anchors:
            problems.append(f"{alert.name}: {path} has no section #{anchor}")
    assert not problems, "\n".join(problems)


def test_the_seeds_alerts_are_all_there() -> None:
    """Seed 000 and seed 002 list these alerts; each has a rule (names are ours)."""
    alerts = {rule.name: rule for rule in all_rules() if rule.kind == "alert"}
    expected = {
        "AppointmentTimeoutNoSuccessfulCycle": "calendar_appointment_timeout_last_success_timestamp_seconds",
        "AppointmentTimeoutBacklogHigh": "calendar_appointment_timeout_backlog",
        "AppointmentTimeoutErrors": "calendar_appointment_timeout_errors_total",
        "AppointmentTimeoutOutboxBacklog": "pin_outbox_backlog",
        # the stamp of the run counter's last increase (both move in one step), and the counter's absence
        "PromotionExpireNotRunning": "promotion_expire_last_success_timestamp_seconds",
        "PromotionExpireWorkerAbsent": "promotion_expire_run_total",
        "PromotionExpireBacklogHigh": "promotion_expire_backlog",
        "PromotionExpireErrorsGrowing": "promotion_expire_errors_total",
        "AppointmentTimeoutPoisonItems": "calendar_appointment_timeout_poison_items",
        "PromotionExpirePoisonItems": "promotion_expire_poison_items",
        "PromotionPublishLagHigh": "pin_outbox_backlog",
        "OutboxLagHigh": "pin_outbox_lag_seconds",
        "OutboxDeadLetters": "pin_outbox_dead_letters",
        "ConsumerDeadLettered": "pin_consumer_dead_lettered_total",
        "ConsumerLagHigh": "pin_consumer_lag",
    }
    for name, metric in expected.items():
        assert name in alerts, f"alert {name} is missing"
        assert metric in metric_names(alerts[name].expr), f"{name} does not use {metric}"
    assert "> 100" in alerts["AppointmentTimeoutBacklogHigh"].expr
    assert alerts["AppointmentTimeoutBacklogHigh"].hold == "5m"
    assert "> 300" in alerts["AppointmentTimeoutNoSuccessfulCycle"].expr
    # "job не отработал > 2 интервалов": the configured interval, not a constant window
    not_running = metric_names(alerts["PromotionExpireNotRunning"].expr)
    assert {"promotion_expire_interval_seconds", "promotion_expire_last_success_timestamp_seconds"} <= not_running
    assert "2 * max_over_time(promotion_expire_interval_seconds[1h])" in alerts["PromotionExpireNotRunning"].expr
    # the seeds' liveness bounds are the firing time: no hold on top (the promtool tests pin both sides of it)
    for name in (
        "AppointmentTimeoutNoSuccessfulCycle",
        "PromotionExpireNotRunning",
        "PromotionExpireNoSuccessfulCycle",
    ):
        assert alerts[name].hold == "0s", f"{name} holds {alerts[name].hold} on top of the seed's bound"
    assert "> 1000" in alerts["PromotionPublishLagHigh"].expr
    assert 'topic="pin.promotion.purchase-changed.v1"' in alerts["PromotionPublishLagHigh"].expr


def _board(name: str) -> dict[str, object]:
    document: dict[str, object] = json.loads((GRAFANA / "dashboards" / f"{name}.json").read_text())
    return document


def _panels_by_row(board: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    rows: dict[str, list[dict[str, object]]] = {"": []}
    current = ""
    panels = board["panels"]
    assert isinstance(panels, list)
    for panel in panels:
        if panel["type"] == "row":
            current = panel["title"]
            rows[current] = list(panel.get("panels", []))
        else:
            rows[current].append(panel)
    return rows


def _metrics_of(panels: list[dict[str, object]]) -> set[str]:
    found: set[str] = set()
    for panel in panels:
        for target in panel.get("targets", []):  # type: ignore[attr-defined]
            found |= metric_names(target["expr"])
    return found


def test_calendar_overview_has_the_background_jobs_row() -> None:
    rows = _panels_by_row(_board("calendar-overview"))
    assert "Background jobs" in rows
    used = _metrics_of(rows["Background jobs"])
    for metric in (
        "calendar_appointment_timeout_cycle_duration_seconds_bucket",
        "calendar_appointment_timeout_items_total",
        "calendar_appointment_timeout_backlog",
        "calendar_appointment_timeout_skip_locked_total",
        "calendar_appointment_timeout_errors_total",
        "calendar_appointment_timeout_poison_items",
        "pin_outbox_lag_seconds",
    ):
        assert metric in used, f"the Background jobs row shows no {metric}"
    by_outcome = [
        target["legendFormat"]
        for panel in rows["Background jobs"]
        for target in panel.get("targets", [])  # type: ignore[attr-defined]
        if "calendar_appointment_timeout_items_total" in target["expr"]
    ]
    assert "{{slot_outcome}}" in by_outcome


def test_promotion_dashboard_shows_the_seed_002_signals() -> None:
    used = _metrics_of([p for panels in _panels_by_row(_board("promotion")).values() for p in panels])
    for metric in (
        "promotion_expire_run_total",
        "promotion_expire_cycle_duration_seconds_bucket",
        "promotion_expire_items_total",
        "promotion_expire_backlog",
        "promotion_expire_errors_total",
        "promotion_expire_poison_items",
        "pin_outbox_backlog",
    ):
        assert metric in used, f"the promotion dashboard shows no {metric}"


def _through_records(names: set[str]) -> set[str]:
    """``names`` with each recorded series replaced by the metrics its rule reads (and kept)."""
    records = {rule.name: rule.expr for rule in all_rules() if rule.kind == "record"}
    found, pending = set(), list(names)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.add(name)
        pending.extend(metric_names(records[name]) if name in records else ())
    return found


def test_every_alert_has_a_panel() -> None:
    """An alert that fires must have a panel to look at: one of the metrics it reads is on a dashboard (the seven
    pin_db_ alerts, the budget exhaustions, contract migrations and parked dead letters once had none)."""
    shown = _through_records(set().union(*(metric_names(expr) for _, _, expr in dashboard_queries())))
    problems = [
        f"{alert.name}: none of {sorted(metric_names(alert.expr))} is on a dashboard"
        for alert in all_rules()
        if alert.kind == "alert" and not _through_records(metric_names(alert.expr)) & shown
    ]
    assert not problems, "\n".join(problems)


def test_the_api_dashboard_shows_requests_by_route_and_status_class_and_latency() -> None:
    used = _metrics_of([p for panels in _panels_by_row(_board("api")).values() for p in panels])
    assert {"pin_http_requests_total", "pin_http_request_duration_seconds_bucket"} <= used
    legends = [
        target["legendFormat"]
        for panels in _panels_by_row(_board("api")).values()
        for panel in panels
        for target in panel.get("targets", [])  # type: ignore[attr-defined]
        if "pin_http_requests_total" in target["expr"]
    ]
    assert any({"{{route}}", "{{status_class}}", "{{method}}"} <= set(re.findall(r"\{\{\w+\}\}", x)) for x in legends)


def test_dashboards_are_well_formed_for_provisioning(
    registry: tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, set[str]]],
) -> None:
    _, samples = registry
    uids: set[str] = set()
    for path in sorted((GRAFANA / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        assert board["uid"] not in uids, f"{path.name}: duplicate uid"
        uids.add(board["uid"])
        ids = [panel["id"] for panels in _panels_by_row(board).values() for panel in panels]
        assert len(ids) == len(set(ids)), f"{path.name}: duplicate panel ids"
        for panels in _panels_by_row(board).values():
            for panel in panels:
                assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
                for target in panel["targets"]:
                    names = metric_names(target["expr"])
                    labels = set().union(*(samples.get(n, set()) for n in names)) | TARGET_LABELS
                    missing = legend_labels(target["legendFormat"]) - labels
                    assert not missing, f"{path.name}: {panel['title']}: legend uses {missing}"
    assert uids == {
        "pin-api",
        "pin-calendar-overview",
        "pin-database-health",
        "pin-promotion",
        "pin-relay-consumers",
    }


def test_every_expression_parses_in_promtool(tmp_path: Path) -> None:
    """promtool parses every dashboard query (as a recording rule); the rule files are checked by CI itself."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed (Debian package prometheus); .ci/run installs it")
    lines = ["groups:", "  - name: dashboard-queries", "    rules:"]
    for i, (_, _, expr) in enumerate(dashboard_queries()):
        concrete = expr.replace("$__rate_interval", "5m").replace("$group", ".*")
        lines += [f"      - record: dashboard:query_{i}", f"        expr: {json.dumps(concrete)}"]
    rules = tmp_path / "dashboards.rules.yml"
    rules.write_text("\n".join(lines) + "\n")
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
