"""Secrets never leave in logs, and Kafka security settings reach the client configuration.

Logs: a real `pin api` process (DEBUG logging) handles authenticated, refused and failing requests; a real
`pin relay` runs with a database password and SASL credentials in its environment. Neither the JWT secret,
the tokens, the database password nor the SASL password appears in what they wrote.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.tcp_ports import free_port
from pin.messaging.kafka import client_config, consumer_config, producer_config
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.support.processes import RoleProcess

SASL = (
    "security.protocol=SASL_SSL;sasl.mechanism=SCRAM-SHA-512;sasl.username=pin-relay;"
    "sasl.password=sasl-pass-7f3c9e21;ssl.ca.location=/etc/ssl/certs/ca.pem;"
    "ssl.endpoint.identification.algorithm=https"
)


@pytest.mark.unit
def test_kafka_security_settings_pass_through_to_every_client_config() -> None:
    """PIN_KAFKA_CLIENT_CONFIG (SASL, TLS) reaches producer, consumer and admin configs verbatim."""
    settings = Settings.model_validate({"kafka_bootstrap_servers": "broker:9093", "kafka_client_config": SASL})
    expected = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "pin-relay",
        "sasl.password": "sasl-pass-7f3c9e21",
        "ssl.ca.location": "/etc/ssl/certs/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }
    for config in (client_config(settings), producer_config(settings), consumer_config(settings, "crm")):
        assert config["bootstrap.servers"] == "broker:9093"
        assert {k: config[k] for k in expected} == expected


@pytest.mark.unit
def test_kafka_security_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, through the environment variable a deployment sets."""
    monkeypatch.setenv("PIN_KAFKA_BOOTSTRAP_SERVERS", "broker:9093")
    monkeypatch.setenv("PIN_KAFKA_CLIENT_CONFIG", SASL)
    config = producer_config(Settings())
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.password"] == "sasl-pass-7f3c9e21"
    # the producer's safety settings are applied after the pass-through: it cannot turn them off
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"


@pytest.mark.integration
def test_the_api_never_logs_the_secret_or_tokens(
    tmp_path: Path, settings_env: dict[str, str], token: Callable[..., str]
) -> None:
    """DEBUG logs of `pin api` while it serves valid, expired and forged tokens hold none of them."""
    port = free_port()
    log = tmp_path / "api.log"
    api = RoleProcess(["api", "--port", str(port)], {**settings_env, "PIN_LOG_LEVEL": "DEBUG"}, log)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        tenant, user = uuid.uuid4(), uuid.uuid4()
        valid = token(user, tenant, "agent", "investor", "manager", "admin")
        expired = token(user, tenant, "agent", ttl_seconds=-60)
        forged = valid[:-4] + ("AAAA" if not valid.endswith("AAAA") else "BBBB")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for bearer in (valid, expired, forged):
                headers = {"Authorization": f"Bearer {bearer}", "X-Request-Id": str(uuid.uuid4())}
                client.get("/notifications", headers=headers)
                client.get(f"/calendar/slots/{uuid.uuid4()}", headers=headers)
                client.post("/promotions", headers=headers, json={"packageId": "x"})
                client.post("/calendar/slots", headers=headers, content=b"{not json")
            # a token in the query string and in a header that is not Authorization
            client.get(f"/notifications?access_token={valid}", headers={"X-Token": valid})
    finally:
        api.terminate()
        api.close()
    text = log.read_text(errors="replace")
    assert "Started server process" in text or "Uvicorn running" in text, text[-2000:]
    for secret in (JWT_SECRET, valid, expired, forged, valid.split(".")[2]):
        assert secret not in text, f"a secret or token is in the API log {log}"


@pytest.mark.integration
def test_a_role_never_logs_the_database_password_or_sasl_credentials(tmp_path: Path, database_url: str) -> None:
    """`pin relay` with a password in PIN_DATABASE_URL (trust auth ignores it) and SASL settings that cannot
    work against a plaintext broker: it logs failures, but never the password or the SASL secret."""
    broker = EmbeddedKafka(tmp_path / "broker.log")
    broker.start()
    url = database_url.replace("postgresql://postgres@", "postgresql://postgres:db-pass-51e0aa@")
    assert "db-pass-51e0aa" in url
    env = {
        "PIN_DATABASE_URL": url,
        "PIN_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "PIN_KAFKA_CLIENT_CONFIG": "security.protocol=SASL_PLAINTEXT;sasl.mechanism=PLAIN;"
        "sasl.username=pin;sasl.password=sasl-pass-7f3c9e21",
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
        "PIN_LOG_LEVEL": "DEBUG",
    }
    log = tmp_path / "relay.log"
    relay = RoleProcess(["relay"], env, log)
    try:
        # Until it started and its producer met the broker, which refuses the SASL handshake at once (librdkafka
        # hands that failure to the log when the producer is served, at the latest when it closes on SIGTERM; it
        # was a fixed minute of waiting for five lines that never came). A refused connection lasts milliseconds
        # and librdkafka tries again after 0.1 s, doubling: seen, or 5 s of tries; the assertion below that the
        # refusal is in the log makes sure it happened.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "outbox relay started" not in log.read_text(errors="replace"):
            time.sleep(0.1)
        tries_until = time.monotonic() + 5
        while time.monotonic() < tries_until and not _connected(relay.pid, broker.port):
            time.sleep(0.02)
    finally:
        relay.terminate()
        relay.close()
        broker.stop()
    text = log.read_text(errors="replace")
    assert text.strip(), "the relay wrote nothing: the test would prove nothing"
    assert "SASL" in text, f"the relay never logged the broker's refusal: the test would prove little ({log})"
    assert "db-pass-51e0aa" not in text, f"the database password is in the relay log {log}"
    assert "sasl-pass-7f3c9e21" not in text, f"the SASL password is in the relay log {log}"


def _connected(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP connection to ``port`` on this machine."""
    try:
        return any(c.raddr and c.raddr.port == port for c in psutil.Process(pid).net_connections("tcp"))
    except psutil.Error:
        return False
