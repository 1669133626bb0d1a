"""The consumer runtime's Prometheus metrics (names and labels are public: docs/runbooks/consumers.md)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge


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
