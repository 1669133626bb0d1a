"""The consumer runtime's Prometheus metrics (names and labels are public: docs/runbooks/consumers.md)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from prometheus_client import Counter, Gauge, Histogram


def _per_topic(name: str, documentation: str) -> Counter:
    """A counter of a group's messages of one topic."""
    return Counter(name, documentation, ["group", "topic"])


PROCESSED = _per_topic("pin_consumer_processed", "Messages whose effect committed (or that needed none).")
DUPLICATES = _per_topic("pin_consumer_duplicates", "Messages skipped because their MessageId was in the inbox.")
RETRIES = _per_topic("pin_consumer_retries", "Failed attempts that will be retried.")
DEAD_LETTERED = _per_topic("pin_consumer_dead_lettered", "Messages published to the group's dead-letter topic.")
DEAD_LETTERS_TRUNCATED = _per_topic(
    "pin_consumer_dead_letters_truncated",
    "Dead letters too large for the dead-letter producer: cut, full bytes in messaging.dead_letter.",
)
DEAD_LETTER_FAILURES = _per_topic(
    "pin_consumer_dead_letter_failures", "Dead-letter publishes the broker did not acknowledge."
)
DEAD_LETTERS_PARKED = _per_topic(
    "pin_consumer_dead_letters_parked",
    "Dead letters the topic refused on every attempt, kept in messaging.dead_letter instead (partition went on).",
)
UNKNOWN_VALUES = Counter(
    "pin_consumer_unknown_values", "Enum values this consumer does not know (neutral path taken).", ["group", "field"]
)
LAG = Gauge(
    "pin_consumer_lag",
    "Messages behind the high watermark per assigned partition (informational; from librdkafka statistics).",
    ["group", "topic", "partition"],
)

# The groups' SLAs (pin.messaging.groups.SLA_SECONDS: 60 and 300 s) are bucket bounds, so that the p99 the
# ConsumerSlaBreached alert takes from the buckets is above an SLA exactly when more than 1 % of the events are.
EVENT_AGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
EVENT_AGE = Histogram(
    "pin_consumer_event_age_seconds",
    "From the message's OccurredAt to its effect's transaction, both on the database clock (the SLA's measure).",
    ["group", "topic"],
    buckets=EVENT_AGE_BUCKETS,
)
HELD = Gauge(
    "pin_consumer_held_messages",
    "Messages this instance holds in retry now (each also a row of messaging.held_message; with one lane each holds"
    " its partition, with lanes its key).",
    ["group"],
)
SLA = Gauge(
    "pin_consumer_sla_seconds",
    "The group's SLA (pin.messaging.groups.SLA_SECONDS): the bound ConsumerSlaBreached compares the p99 age with.",
    ["group"],
)


def observe_event_ages(group: str, topic: str, at: datetime, occurred: Iterable[datetime | None]) -> None:
    """The age of each event whose effect committed at database time ``at`` (an event without OccurredAt has none)."""
    histogram = EVENT_AGE.labels(group, topic)
    for occurred_at in occurred:
        if occurred_at is not None:
            histogram.observe(max(0.0, (at - occurred_at).total_seconds()))
