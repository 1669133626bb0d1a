"""Prometheus metrics of one outbox relay instance (names fixed by the helper guide; alert rules depend on them).

Per instance, so they add up across relays (``sum``); only a relay imports this module, so no other role exports
them. The outbox table's gauges, which every relay and worker reports alike, are in :mod:`pin.outbox.metrics`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram

PUBLISHED = Counter("pin_outbox_published", "Outbox rows acknowledged by the broker and deleted.", ["topic"])
PUBLISH_ERRORS = Counter("pin_outbox_publish_errors", "Failed sends of outbox rows (each will be retried).", ["topic"])
DEAD_LETTERED = Counter(
    "pin_outbox_dead_lettered", "Outbox rows moved to outbox.dead_letter (their key is held back).", ["topic"]
)
PUBLISH_LATENCY = Histogram(
    "pin_outbox_publish_latency_seconds",
    "From the outbox row's creation to its deletion after the broker's acknowledgement.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)
GIVE_UPS = Counter(
    "pin_outbox_give_ups", "Times this relay gave its leases up because it could not deliver to the broker."
)
OWNED_VPARTS = Gauge("pin_outbox_owned_vparts", "Virtual partitions whose lease this relay instance holds.")


def observe_publish_latencies(seconds: Sequence[float]) -> None:
    """``PUBLISH_LATENCY.observe`` of each value, with one increment per bucket and one of the sum for the whole
    sequence (a batch holds thousands of rows). Falls back to one ``observe`` each if the client's internals
    differ from the ones this relies on."""
    bounds = getattr(PUBLISH_LATENCY, "_upper_bounds", None)
    buckets = getattr(PUBLISH_LATENCY, "_buckets", None)
    total = getattr(PUBLISH_LATENCY, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in seconds:
            PUBLISH_LATENCY.observe(value)
        return
    counts = [0] * len(bounds)
    for value in seconds:  # the first bucket whose upper bound is >= the value, as observe() counts it
        counts[bisect_left(bounds, value)] += 1
    total.inc(sum(seconds))
    for bucket, count in zip(buckets, counts, strict=True):
        if count:
            bucket.inc(count)
