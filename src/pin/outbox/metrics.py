"""Prometheus gauges of the outbox table (names fixed by the helper guide; alert rules depend on them).

The backlog, lag and dead-letter gauges describe the whole outbox table, not one instance's share: every
relay instance and every worker (pin/outbox/gauges.py) reports the same values, so aggregate them with ``max``,
never ``sum``. The relay's own series (its counters, latency and leases) are in :mod:`pin.outbox.relay.metrics`,
which only a relay imports: a worker does not export them (a worker's 0 owned vparts would list it among the relays).
"""

from __future__ import annotations

from prometheus_client import Gauge

BACKLOG = Gauge(
    "pin_outbox_backlog",
    "Outbox rows waiting to be published, by topic (bounded count, refreshed every few seconds).",
    ["topic"],
)
LAG = Gauge(
    "pin_outbox_lag_seconds",
    "Age of the oldest unpublished outbox row of each topic, in seconds (0 when none waits).",
    ["topic"],
)
DEAD_LETTERS = Gauge(
    "pin_outbox_dead_letters", "Rows in outbox.dead_letter awaiting an operator (bounded count); alert when > 0."
)
