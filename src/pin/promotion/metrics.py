"""Metrics of the worker expire-promotions, with the names seed 002 gives them (prometheus adds ``_total``)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from pin.jobs.cycle import JobMetrics

RUNS = Counter("promotion_expire_run", "Cycles of expire-promotions that committed (liveness: alert when flat).")
CYCLE_DURATION = Histogram(
    "promotion_expire_cycle_duration_seconds",
    "Duration of one expire-promotions cycle.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
ITEMS = Counter("promotion_expire_items", "Purchases processed by expire-promotions, by outcome.", ["outcome"])
BACKLOG = Gauge(
    "promotion_expire_backlog",
    "Active purchases with EndsAt <= now not processed yet, poison ones included, after the last cycle"
    " (counted up to 10 001).",
)
POISON = Gauge(
    "promotion_expire_poison_items",
    "Active purchases whose expiry failed and is retried every cycle (jobs.item_failure), after the last cycle.",
)
INTERVAL = Gauge(
    "promotion_expire_interval_seconds",
    "The configured interval between cycles (PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS): the liveness alert's unit.",
)
SKIP_LOCKED = Counter(
    "promotion_expire_skip_locked", "Due purchases a cycle skipped because another transaction held their row lock."
)
ERRORS = Counter(
    "promotion_expire_errors",
    "Failed attempts of poison purchases (excluded from the batch; one per cycle while broken), and failed cycles.",
)
BUDGET_EXHAUSTED = Counter(
    "promotion_expire_cycle_budget_exhausted",
    "Cycles that stopped writing because their time budget was spent (the rest waits for the next tick).",
)
LAST_SUCCESS = Gauge(
    "promotion_expire_last_success_timestamp_seconds", "Unix time of the last expire-promotions cycle that committed."
)

# Pre-create the labelled series so that dashboards and rate() see 0 before the first expiry.
ITEMS.labels(outcome="expired")

JOB_METRICS = JobMetrics(
    CYCLE_DURATION, SKIP_LOCKED, ERRORS, BACKLOG, POISON, LAST_SUCCESS, runs=RUNS, budget_exhausted=BUDGET_EXHAUSTED
)
