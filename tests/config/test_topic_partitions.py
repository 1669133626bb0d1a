"""PIN_KAFKA_TOPIC_PARTITIONS: the partitions of the topics the system creates, never of a topic that exists."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.kafka import client_config, ensure_topics
from pin.settings import Settings

pytestmark = pytest.mark.integration


def _partition_counts(settings: Settings) -> dict[str, int]:
    """Each topic of the system with its partition count, as the broker reports it."""
    metadata = AdminClient(client_config(settings)).list_topics(timeout=10)
    return {name: len(metadata.topics[name].partitions) for name in topics.all_topics() if name in metadata.topics}


def test_created_topics_have_the_configured_partitions_and_an_existing_topic_keeps_its_own(
    kafka: EmbeddedKafka, make_settings: Callable[..., Settings]
) -> None:
    six = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers, kafka_topic_partitions=6)
    ensure_topics(six, [topics.PURCHASE_CHANGED])
    default = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    created = ensure_topics(default)  # the others, with the default; purchase-changed exists and is left alone
    assert topics.PURCHASE_CHANGED not in created
    counts = _partition_counts(default)
    assert counts == {name: 6 if name == topics.PURCHASE_CHANGED else topics.PARTITIONS for name in topics.all_topics()}


@pytest.mark.unit
def test_the_default_is_the_seeds_three_partitions() -> None:
    assert Settings().kafka.topic_partitions == topics.PARTITIONS == 3
