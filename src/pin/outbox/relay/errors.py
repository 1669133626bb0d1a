"""Why a send to Kafka failed, and how the relay treats it: retry for ever, dead-letter, or replace the producer."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError


@dataclass(frozen=True)
class SendError:
    """Why a send failed, and how the relay treats it."""

    code: str
    reason: str
    # broker unavailability or a broken producer: retried with backoff for ever, never dead-lettered
    retriable: bool = False
    # the broker will never accept this message: dead-lettered at once
    permanent: bool = False
    # the producer instance is unusable and is replaced
    fatal: bool = False
    # the broker does not know the topic (deleted meanwhile?): the next batch checks it again
    unknown_topic: bool = False

    def text(self) -> str:
        """One line for last_error / dead_letter.error: code and broker text, never the payload."""
        return f"{self.code}: {self.reason}"[:1000]


# Errors the broker will repeat for ever for this message, whatever we do.
_PERMANENT_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.TOPIC_EXCEPTION,  # invalid topic name
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
    }
)
_UNKNOWN_TOPIC_CODES = frozenset({KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})
# The broker (or the way to it) is unavailable: nothing is wrong with the message. Retried for ever with
# backoff, never dead-lettered. (librdkafka's retriable() flag is not set on delivery-report errors such as
# _MSG_TIMED_OUT, so the codes are listed.)
_UNAVAILABLE_CODES = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._QUEUE_FULL,
        KafkaError._RESOLVE,
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
    }
)
# The idempotent producer's own state is broken (seen after a broker freeze: PRODUCER_FENCED for every send):
# replace the producer; the message is fine, so this never counts towards dead-lettering.
_PRODUCER_STATE_CODES = frozenset(
    {
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError._FATAL,
        KafkaError._FENCED,
        KafkaError._INCONSISTENT,
        KafkaError._GAPLESS_GUARANTEE,
    }
)


def send_error_of(error: KafkaError) -> SendError:
    """Classify a librdkafka error."""
    code = error.code()
    producer_broken = bool(error.fatal()) or code in _PRODUCER_STATE_CODES
    return SendError(
        code=str(error.name()),
        reason=str(error.str()),
        retriable=code in _UNAVAILABLE_CODES or producer_broken,
        permanent=code in _PERMANENT_CODES,
        fatal=producer_broken,
        unknown_topic=code in _UNKNOWN_TOPIC_CODES,
    )
