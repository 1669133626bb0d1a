"""Pure parts of the relay: waves per key, the value and headers, error classification, configuration, its queries."""

from __future__ import annotations

import uuid
from typing import cast

import pytest
from confluent_kafka import KafkaError, Producer

from pin.db import parse_queries
from pin.outbox.relay import RelayConfig, RelayHooks, hooks_for_fault, metrics
from pin.outbox.relay.batch import Batch, PendingRow, waves
from pin.outbox.relay.encoding import kafka_headers
from pin.outbox.relay.errors import send_error_of
from pin.outbox.relay.hooks import PauseAt
from pin.settings import ConfigurationError, Settings

pytestmark = pytest.mark.unit


def _row(row_id: int, key: str) -> PendingRow:
    return PendingRow(
        id=row_id,
        message_id=str(uuid.uuid4()),
        vpart=0,
        epoch=1,
        topic="t",
        key=key,
        event_type="e",
        contract_version=1,
        value="{}",
        payload=None,
        headers='{"correlation-id": "c", "message-id": "forged"}',
        attempts=0,
    )


def test_waves_hold_the_nth_row_of_each_key_in_id_order() -> None:
    rows = [_row(1, "a"), _row(2, "b"), _row(3, "a"), _row(4, "a"), _row(5, "c"), _row(6, "b")]

    ids = [[row.id for row in wave] for wave in waves(rows)]

    assert ids == [[1, 2, 5], [3, 6], [4]]


def test_a_batch_waves_its_rows_per_key_and_sends_distinct_keys_in_one_wave() -> None:
    distinct = [_row(1, "a"), _row(2, "b"), _row(5, "c")]
    repeated = [_row(1, "a"), _row(2, "b"), _row(3, "a")]

    def wave_ids(rows: list[PendingRow]) -> list[list[int]]:
        return [[row.id for row in wave] for wave in Batch(1, rows, cast(Producer, None)).waves]

    assert wave_ids(distinct) == [[1, 2, 5]]
    assert wave_ids(repeated) == [[1, 2], [3]]


def test_row_headers_come_first_then_the_envelope() -> None:
    row = _row(1, "a")._replace(headers='{"correlation-id": "c", "traceparent": "t"}')

    assert kafka_headers(row) == [
        ("correlation-id", "c"),
        ("traceparent", "t"),
        ("message-id", row.message_id),
        ("contract-version", "1"),
        ("event-type", "e"),
    ]


def test_envelope_headers_win_over_row_headers() -> None:
    row = _row(1, "a")

    headers = dict(kafka_headers(row))

    assert headers["message-id"] == row.message_id
    assert headers["contract-version"] == "1"
    assert headers["event-type"] == "e"
    assert headers["correlation-id"] == "c"


@pytest.mark.parametrize(
    ("code", "retriable", "permanent", "fatal"),
    [
        (KafkaError._MSG_TIMED_OUT, True, False, False),  # broker away: retried for ever
        (KafkaError._TRANSPORT, True, False, False),
        (KafkaError.MSG_SIZE_TOO_LARGE, False, True, False),  # never accepted: dead-lettered at once
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, False, True, False),
        (KafkaError.PRODUCER_FENCED, True, False, True),  # broken producer: replaced, row not blamed
        (KafkaError.UNKNOWN_TOPIC_OR_PART, False, False, False),  # counts towards max_attempts
    ],
)
def test_send_errors_are_classified(code: int, retriable: bool, permanent: bool, fatal: bool) -> None:
    error = send_error_of(KafkaError(code))

    assert (error.retriable, error.permanent, error.fatal) == (retriable, permanent, fatal)


def _relay_config(monkeypatch: pytest.MonkeyPatch, **variables: str) -> RelayConfig:
    """RelayConfig from Settings read from an environment holding exactly ``variables`` among PIN_RELAY_*."""
    for name in Settings.variables():
        if name.startswith("PIN_RELAY_"):
            monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return RelayConfig.from_settings(Settings())


def test_config_reads_pin_relay_variables_and_rejects_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _relay_config(monkeypatch, PIN_RELAY_BATCH_SIZE="1000", PIN_RELAY_LEASE_TTL_SECONDS="7.5")

    assert (config.batch_size, config.lease_ttl_seconds, config.heartbeat_seconds) == (1000, 7.5, 1.0)
    with pytest.raises(ConfigurationError, match="PIN_RELAY_BATCH_SIZE"):
        _relay_config(monkeypatch, PIN_RELAY_BATCH_SIZE="many")
    with pytest.raises(ConfigurationError, match="PIN_RELAY_MAX_ATTEMPTS"):
        _relay_config(monkeypatch, PIN_RELAY_MAX_ATTEMPTS="0")
    with pytest.raises(ConfigurationError, match="LEASE_TTL"):
        _relay_config(monkeypatch, PIN_RELAY_LEASE_TTL_SECONDS="1")


def test_relay_config_defaults_are_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _relay_config(monkeypatch) == RelayConfig()


def test_test_faults_are_off_unless_asked_for() -> None:
    assert type(hooks_for_fault("")) is RelayHooks  # does nothing
    pause = hooks_for_fault("after-ack:3")
    assert isinstance(pause, PauseAt)
    assert (pause.point, pause.batch_number) == ("after-ack", 3)
    with pytest.raises(ConfigurationError):
        hooks_for_fault("sometimes")


def test_a_query_file_keeps_each_statement_as_written() -> None:
    text = (
        "-- The file's own comment.\n\n"
        "-- thing_claim_due --\n"
        "-- One line saying what it does.\n"
        "SELECT id  FROM thing -- a comment inside the statement\n"
        "WHERE note = '--  not a comment' AND id = %(id)s\n\n"
        "-- thing_delete --\n"
        "-- Another.\n"
        "DELETE FROM thing\n"
    )

    queries = parse_queries(text)

    assert queries == {
        "thing_claim_due": (
            "SELECT id  FROM thing -- a comment inside the statement\nWHERE note = '--  not a comment' AND id = %(id)s"
        ),
        "thing_delete": "DELETE FROM thing",
    }
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- a --\nSELECT 1\n-- a --\nSELECT 2\n")


def _latency_samples() -> dict[tuple[str, str], float]:
    [family] = metrics.PUBLISH_LATENCY.collect()
    return {(s.name, s.labels.get("le", "")): s.value for s in family.samples if not s.name.endswith("_created")}


def test_latencies_observed_in_bulk_count_as_one_observe_each() -> None:
    before = _latency_samples()

    metrics.observe_publish_latencies([0.0, 0.01, 0.02, 7.0, 1000.0])

    after = _latency_samples()
    delta = {key: after[key] - before[key] for key in after}
    bucket = "pin_outbox_publish_latency_seconds_bucket"
    assert delta[(bucket, "0.01")] == 2  # le is inclusive, as observe() counts
    assert delta[(bucket, "0.025")] == 3
    assert delta[(bucket, "5.0")] == 3
    assert delta[(bucket, "10.0")] == 4
    assert delta[(bucket, "+Inf")] == 5
    assert delta[("pin_outbox_publish_latency_seconds_count", "")] == 5
    assert abs(delta[("pin_outbox_publish_latency_seconds_sum", "")] - 1007.03) < 1e-9
