"""Metrics of the worker appointment-timeout, with the names seed 000 gives them (prometheus adds ``_total``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from pin.calendar.domain import SlotOutcome
from pin.jobs.cycle import JobMetrics

CYCLE_DURATION = Histogram(
    "calendar_appointment_timeout_cycle_duration_seconds",
    "Duration of one appointment-timeout cycle.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ITEMS = Counter(
    "calendar_appointment_timeout_items",
    "Appointments expired by appointment-timeout, by what happened to their slot (INV-SLT-5).",
    ["slot_outcome"],
)
BACKLOG = Gauge(
    "calendar_appointment_timeout_backlog",
    "Pending appointments past PendingExpiresAt not processed yet, poison ones included, after the last cycle"
    " (counted up to 10 001).",
)
SKIP_LOCKED = Counter(
    "calendar_appointment_timeout_skip_locked",
    "Due appointments a cycle skipped because another instance or an in-flight operation held them.",
)
ERRORS = Counter(
    "calendar_appointment_timeout_errors",
    "Failed attempts of poison appointments (rolled back; one per cycle while broken), and cycles ended by an"
    " infrastructure error.",
)
POISON = Gauge(
    "calendar_appointment_timeout_poison_items",
    "Pending appointments whose expiry failed and is retried every cycle (jobs.item_failure), after the last cycle.",
)
LAST_SUCCESS = Gauge(
    "calendar_appointment_timeout_last_success_timestamp_seconds",
    "Unix time of the last appointment-timeout cycle that completed.",
)
BUDGET_EXHAUSTED = Counter(
    "calendar_appointment_timeout_cycle_budget_exhausted",
    "Cycles that stopped claiming because their time budget was spent (the rest waits for the next tick).",
)

# The labelled series, created here so that dashboards and rate() see 0 before the first expiry (and looked up once,
# not once per item).
ITEMS_BY_OUTCOME = {outcome: ITEMS.labels(slot_outcome=outcome.value) for outcome in SlotOutcome}

JOB_METRICS = JobMetrics(
    CYCLE_DURATION, SKIP_LOCKED, ERRORS, BACKLOG, POISON, LAST_SUCCESS, budget_exhausted=BUDGET_EXHAUSTED
)
