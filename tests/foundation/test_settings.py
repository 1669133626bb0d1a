"""Configuration: a bad value stops the process with exit code 2 and one line naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pin.settings import ConfigurationError, Settings, load_settings

pytestmark = pytest.mark.unit


def test_defaults_follow_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("PIN_"):
            monkeypatch.delenv(name)
    settings = load_settings()
    assert settings.calendar.pending_ttl_seconds == 86_400
    assert settings.calendar.cancel_cutoff_minutes == 60
    assert settings.jobs.appointment_timeout_interval_seconds == 60
    assert settings.jobs.appointment_timeout_batch_size == 200
    assert settings.jobs.expire_promotions_interval_seconds == 60
    assert settings.jobs.expire_promotions_batch_size == 200


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE", "many"),
        ("PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE", "0"),
        ("PIN_APPOINTMENT_PENDING_TTL_SECONDS", "-5"),
        ("PIN_APPOINTMENT_CANCEL_CUTOFF_MINUTES", "-1"),
        ("PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS", "0"),
        ("PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS", "soon"),
        ("PIN_EXPIRE_PROMOTIONS_BATCH_SIZE", "1.5"),
        ("PIN_METRICS_PORT", "70000"),
        ("PIN_LOG_LEVEL", "LOUD"),
        ("PIN_KAFKA_CLIENT_CONFIG", "security.protocol"),
    ],
)
def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        load_settings()


def test_a_short_jwt_secret_is_refused_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIN_JWT_SECRET", "tiny-secret")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert "PIN_JWT_SECRET" in str(caught.value)
    assert "tiny-secret" not in str(caught.value)


def test_kafka_client_config_passes_through() -> None:
    settings = Settings(kafka_client_config="security.protocol=SASL_PLAINTEXT; sasl.mechanism=PLAIN")
    assert settings.kafka.extra_config() == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


def test_the_cli_exits_2_with_one_line() -> None:
    env = {**os.environ, "PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE": "many", "PIN_DATABASE_URL": "postgresql://x/y"}
    result = subprocess.run(
        [sys.executable, "-m", "pin", "migrate"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE" in lines[0]
