"""``pin_consumer_lag`` from librdkafka's statistics: for operators only, nothing depends on it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from pin.messaging.consumer.metrics import LAG


def record_lag(group: str, stats_json: str) -> None:
    """librdkafka statistics: per fetched partition, high watermark minus the consumer's position."""
    try:
        stats = json.loads(stats_json)
    except json.JSONDecodeError:
        return
    for topic, topic_stats in stats.get("topics", {}).items():
        for partition, partition_stats in topic_stats.get("partitions", {}).items():
            lag = partition_lag(partition_stats)
            if partition != "-1" and lag is not None:
                LAG.labels(group, topic, partition).set(lag)


def forget_lag(group: str, topic: str, partition: int) -> None:
    """Drop the gauge of a partition this instance no longer owns."""
    with contextlib.suppress(KeyError):
        LAG.remove(group, topic, str(partition))


def partition_lag(partition_stats: Mapping[str, Any]) -> int | None:
    """Lag of one partition from librdkafka's statistics, or None when it is not being fetched.

    librdkafka reports ``consumer_lag`` -1 until the application consumed something; then the position is the
    committed offset, or the fetch position, and an idle partition at its end has lag 0.
    """
    if partition_stats.get("fetch_state") != "active":
        return None
    high = int(partition_stats.get("hi_offset", -1))
    if high < 0:
        return None
    reported = int(partition_stats.get("consumer_lag", -1))
    if reported >= 0:
        return reported
    positions = [int(partition_stats.get(name, -1)) for name in ("app_offset", "committed_offset", "next_offset")]
    position = next((value for value in positions if value >= 0), None)
    return max(0, high - position) if position is not None else None
