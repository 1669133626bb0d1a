"""The consumer runtime's Prometheus metrics (names and labels are public: docs/runbooks/consumers.md)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

PROCESSED = Counter(
    "pin_consumer_processed", "Messages whose effect committed (or that needed none).", ["group", "topic"]
)
DUPLICATES = Counter(
    "pin_consumer_duplicates", "Messages skipped because their MessageId was in the inbox.", ["group", "topic"]
)
RETRIES = Counter("pin_consumer_retries", "Failed attempts that will be retried.", ["group", "topic"])
DEAD_LETTERED = Counter(
    "pin_consumer_dead_lettered", "Messages published to the group's dead-letter topic.", ["group", "topic"]
)
DEAD_LETTERS_TRUNCATED = Counter(
    "pin_consumer_dead_letters_truncated",
    "Dead letters too large for the dead-letter producer: cut, full bytes in messaging.dead_letter.",
    ["group", "topic"],
)
DEAD_LETTER_FAILURES = Counter(
    "pin_consumer_dead_letter_failures", "Dead-letter publishes the broker did not acknowledge.", ["group", "topic"]
)
DEAD_LETTERS_PARKED = Counter(
    "pin_consumer_dead_letters_parked",
    "Dead letters the topic refused on every attempt, kept in messaging.dead_letter instead (partition went on).",
    ["group", "topic"],
)
UNKNOWN_VALUES = Counter(
    "pin_consumer_unknown_values", "Enum values this consumer does not know (neutral path taken).", ["group", "field"]
)
LAG = Gauge(
    "pin_consumer_lag",
    "Messages behind the high watermark per assigned partition (informational; from librdkafka statistics).",
    ["group", "topic", "partition"],
)
