"""PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS reaches the consumers' librdkafka configuration and no other client's."""

from __future__ import annotations

from typing import Any

import pytest

from pin.consumer_groups import build_runtime
from pin.messaging.kafka import client_config
from pin.settings import Settings

pytestmark = [pytest.mark.unit]


def runtime_configs(settings: Settings) -> tuple[dict[str, Any], dict[str, Any]]:
    """The consumer and dead-letter producer configurations `pin consume crm` builds (no connection is made)."""
    runtime = build_runtime("crm", settings, pool=None)  # type: ignore[arg-type]  # the pool is used only in run()
    return runtime._consumer_config, runtime._producer_config


def test_the_fetch_wait_reaches_the_consumer_and_not_its_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIN_KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", "25")
    settings = Settings()

    consumer, producer = runtime_configs(settings)

    assert consumer["fetch.wait.max.ms"] == 25
    assert "fetch.wait.max.ms" not in producer
    assert "fetch.wait.max.ms" not in client_config(settings)  # the admin client's


def test_the_consumer_has_a_fetch_wait_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIN_KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.delenv("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", raising=False)
    settings = Settings()

    consumer, producer = runtime_configs(settings)

    assert consumer["fetch.wait.max.ms"] == settings.kafka_consumer_fetch_wait_max_ms
    assert "fetch.wait.max.ms" not in producer


def test_the_setting_wins_over_the_same_key_in_the_client_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIN_KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("PIN_KAFKA_CLIENT_CONFIG", "fetch.wait.max.ms=500")
    monkeypatch.setenv("PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS", "25")

    consumer, _ = runtime_configs(Settings())

    assert consumer["fetch.wait.max.ms"] == 25
