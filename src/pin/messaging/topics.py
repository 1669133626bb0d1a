"""Topic names (SPEC section 6), their dead-letter topics and the Kafka group ids."""

from __future__ import annotations

from pin.settings import CONSUMER_GROUPS as CONSUMER_GROUPS  # noqa: PLC0414 - re-exported: written once, in settings
from pin.settings import KafkaSettings

APPOINTMENT_CANCELLED = "pin.calendar.appointment-cancelled.v1"
EVENT_STATUS_CHANGED = "pin.calendar.event-status-changed.v1"
APPOINTMENT_CREATED = "pin.calendar.appointment-created.v1"
APPOINTMENT_CONFIRMED = "pin.calendar.appointment-confirmed.v1"
PURCHASE_CHANGED = "pin.promotion.purchase-changed.v1"

INTEGRATION_TOPICS = (
    APPOINTMENT_CANCELLED,
    EVENT_STATUS_CHANGED,
    APPOINTMENT_CREATED,
    APPOINTMENT_CONFIRMED,
    PURCHASE_CHANGED,
)
# The partitions of each topic `pin topics` creates unless told otherwise (seeds): PIN_KAFKA_TOPIC_PARTITIONS's default.
PARTITIONS: int = KafkaSettings().topic_partitions

# The group id of `pin status`'s client that lists the topics: it never joins or commits (the operator's ACLs name it).
STATUS_PROBE_GROUP = "pin-status"


def topic_version(topic: str) -> int | None:
    """The contract version a topic's name ends in (``.v2`` -> 2), None when it names none."""
    _, _, suffix = topic.rpartition(".v")
    return int(suffix) if suffix.isdecimal() else None


def dead_letter_topic(group: str) -> str:
    """The dead-letter topic of one consumer group."""
    return f"pin.dlq.{group}.v1"


def all_topics() -> tuple[str, ...]:
    """Every topic `pin topics` creates: the integration topics and one dead-letter topic per group."""
    return INTEGRATION_TOPICS + tuple(dead_letter_topic(group) for group in CONSUMER_GROUPS)
