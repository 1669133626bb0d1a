"""Commands run where `pin up` runs find its endpoints (pin.local.state_folder.running_endpoints) when the PIN_*
variables are unset; `pin up` keeps its state folder there too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pin import settings as env_settings
from pin.local import state_folder
from pin.local.state_folder import UP_ENDPOINTS_FILE, PinUpEndpoints, load_settings
from pin.settings import ConfigurationError

pytestmark = pytest.mark.unit

ENDPOINTS = PinUpEndpoints(
    pid=4242,
    started_at="2026-01-01 10:00:00 UTC",
    api_url="http://127.0.0.1:8000",
    database_url="postgresql://postgres@127.0.0.1:5999/postgres",
    kafka_bootstrap_servers="127.0.0.1:5998",
    jwt_secret_file=state_folder.DEV_SECRET_FILE,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty environment whose state folder is ``tmp_path/.pin``, the default, seen from ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith("PIN_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".pin"
    folder.mkdir()
    (folder / state_folder.DEV_SECRET_FILE).write_text("a-development-secret-of-32-chars\n")
    state_folder.write_endpoints(folder, ENDPOINTS)
    return folder


@pytest.fixture
def running(home: Path) -> Iterator[Path]:
    """The folder's lock held, as a running `pin up` holds it."""
    with state_folder.lock(home):
        yield home


def test_a_running_pin_up_supplies_what_the_environment_leaves_unset(
    running: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings()
    assert settings.database.url == ENDPOINTS.database_url
    assert settings.kafka.bootstrap_servers == ENDPOINTS.kafka_bootstrap_servers
    assert settings.api.jwt_secret is not None
    assert settings.api.jwt_secret.get_secret_value() == "a-development-secret-of-32-chars"
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1
    assert "PIN_DATABASE_URL, PIN_KAFKA_BOOTSTRAP_SERVERS, PIN_JWT_SECRET" in said[0]
    assert f"{running} (pid 4242" in said[0]
    assert "http://127.0.0.1:8000" in said[0]


def test_the_environment_wins_over_the_running_pin_up(
    running: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PIN_DATABASE_URL", "postgresql://elsewhere/pin")
    settings = load_settings()
    assert settings.database.url == "postgresql://elsewhere/pin"
    assert settings.kafka.bootstrap_servers == ENDPOINTS.kafka_bootstrap_servers
    assert "PIN_KAFKA_BOOTSTRAP_SERVERS, PIN_JWT_SECRET from" in capsys.readouterr().err


def test_pin_home_points_at_a_pin_up_elsewhere(running: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_settings().database.url is None
    monkeypatch.setenv("PIN_HOME", str(running))
    assert load_settings().database.url == ENDPOINTS.database_url


def test_the_endpoints_of_a_pin_up_that_is_gone_are_ignored(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = load_settings()
    assert settings.database.url is None
    assert settings.kafka.bootstrap_servers is None
    assert capsys.readouterr().err == ""


def test_pin_up_itself_never_reads_another_pin_ups_endpoints(running: Path) -> None:
    assert env_settings.load_settings().database.url is None


def test_a_second_pin_up_on_the_same_folder_is_refused_by_name(running: Path) -> None:
    with pytest.raises(state_folder.StateFolderError, match=r"in use by another `pin up` \(pid \d+\).*PIN_HOME"):
        state_folder.lock(running)


def test_a_state_folder_that_cannot_be_created_is_one_line_naming_pin_home(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(state_folder.StateFolderError, match=r"cannot be used.*PIN_HOME"):
        state_folder.lock(blocker / "home")


def test_the_configuration_error_of_a_missing_url_is_unchanged_without_a_pin_up(home: Path) -> None:
    (home / UP_ENDPOINTS_FILE).unlink()
    with pytest.raises(ConfigurationError, match="PIN_DATABASE_URL is not set"):
        load_settings().database.require_url()
