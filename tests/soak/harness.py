"""The soak's cluster: an embedded PostgreSQL it can restart, an embedded broker it can pause, and every role as
a separate `pin` process, supervised (a dead role is started again, as an orchestrator would).

Nothing here is a fake: the roles are the real entry points (`python -m pin ...`) with their real configuration.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from pin.api.auth import mint_token
from pin.db import migrate
from pin.local.embedded.kafka import EmbeddedKafka
from pin.local.embedded.postgres import EmbeddedPostgres
from pin.local.tcp_ports import free_port
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings
from tests.support.netns import POOL, NetworkNamespace, network_namespace, unavailable_reason
from tests.support.processes import RoleProcess

JWT_SECRET = "soak-secret-of-at-least-16-chars"

# Short intervals and a short PendingTtl so that many appointments and purchases come due during the run.
PENDING_TTL_SECONDS = 4
TIMEOUT_INTERVAL_SECONDS = 1
EXPIRE_INTERVAL_SECONDS = 1


@dataclass(frozen=True)
class RoleSpec:
    """One supervised role instance: its name and `pin` arguments."""

    name: str
    args: tuple[str, ...]


def role_specs() -> list[RoleSpec]:
    """The soak's topology: 3 appointment-timeout workers, 2 expire-promotions, 2 relays, 2 per consumer group,
    one API."""
    specs = [RoleSpec("api", ("api", "--port", "{api_port}"))]
    specs += [RoleSpec(f"appointment-timeout-{i}", ("worker", "appointment-timeout")) for i in range(3)]
    specs += [RoleSpec(f"expire-promotions-{i}", ("worker", "expire-promotions")) for i in range(2)]
    specs += [RoleSpec(f"relay-{i}", ("relay",)) for i in range(2)]
    for group in ("crm", "notifications", "catalog", "news"):
        specs += [RoleSpec(f"consume-{group}-{i}", ("consume", group)) for i in range(2)]
    return specs


# One instance of each kind of role runs in a network namespace of its own, whose link the nemesis cuts.
CUTTABLE = (
    "appointment-timeout-0",
    "expire-promotions-0",
    "relay-0",
    "consume-crm-0",
    "consume-notifications-0",
    "consume-catalog-0",
    "consume-news-0",
)


class SoakNetwork:
    """A hub namespace whose pair is never cut (the servers listen on its host end, 10.x.y.1, reachable from the
    host and, over their own pairs, from every namespace), and one namespace per cuttable role."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.hub: NetworkNamespace | None = None
        self.namespaces: dict[str, NetworkNamespace] = {}

    def open(self) -> str | None:
        """Create the namespaces; returns why the link-cut fault cannot run here, or None."""
        reason = unavailable_reason()
        if reason is not None:
            return reason
        self.hub = self._stack.enter_context(network_namespace())
        for name in CUTTABLE:
            namespace = self._stack.enter_context(network_namespace())
            namespace.route_everything_via_host()
            self.namespaces[name] = namespace
        return None

    @property
    def server_address(self) -> str:
        """Where PostgreSQL and the broker listen (127.0.0.1 without namespaces)."""
        return self.hub.host_address if self.hub is not None else "127.0.0.1"

    def prefix(self, role: str) -> tuple[str, ...]:
        """How to start ``role``: inside its namespace, or on the host."""
        namespace = self.namespaces.get(role)
        return tuple(namespace.command([])) if namespace is not None else ()

    def close(self) -> None:
        """Remove every namespace (links restored first by their removal)."""
        self._stack.close()


@dataclass
class _Running:
    spec: RoleSpec
    process: RoleProcess
    starts: int = 1
    exits: list[int] = field(default_factory=list)


class Cluster:
    """PostgreSQL, broker and supervised roles under ``root``; every log stays there as evidence."""

    def __init__(self, root: Path, network: SoakNetwork | None = None) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.network = network or SoakNetwork()
        address = self.network.server_address
        self.postgres = EmbeddedPostgres(root / "postgres", host=address, trusted_network=str(POOL))
        self.kafka = EmbeddedKafka(self.logs / "broker.log", host=address)
        self.api_port = free_port()
        self.database_url = ""
        self._roles: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._supervising = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.kills: list[tuple[float, str]] = []
        self.events: list[tuple[float, str]] = []
        self._t0 = time.monotonic()

    # ----------------------------------------------------------------------------------------------- lifecycle

    def start(self, specs: list[RoleSpec]) -> None:
        """Start PostgreSQL (migrated database ``pin_soak``), the broker, the topics, then every role."""
        self.postgres.start()
        with psycopg.connect(self.postgres.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE pin_soak")
            # The embedded server runs with synchronous_commit=off (fast tests): a crash then loses the last
            # commits that were already acknowledged. The soak crashes the server on purpose and holds the system
            # to its durability promises, so its database commits durably (a per-database setting wins over -c).
            admin.execute("ALTER DATABASE pin_soak SET synchronous_commit = on")
        self.database_url = self.postgres.url.rsplit("/", 1)[0] + "/pin_soak"
        migrate(self.database_url)
        self.kafka.start()
        ensure_topics(self.settings())
        # the API first: on a loaded machine 16 interpreters starting at once take minutes to import
        for spec in sorted(specs, key=lambda s: s.name != "api"):
            self._start(spec)
            if spec.name == "api":
                self.wait_api()
        self._supervising.set()
        self._supervisor = threading.Thread(target=self._supervise, name="soak-supervisor", daemon=True)
        self._supervisor.start()

    def settings(self) -> Settings:
        """Settings for in-process clients of the cluster (the checker, topic creation)."""
        return Settings.model_validate(
            {
                "database_url": self.database_url,
                "kafka_bootstrap_servers": self.kafka.bootstrap_servers,
                "jwt_secret": JWT_SECRET,
                "kafka_session_timeout_ms": 6000,
            }
        )

    def env(self) -> dict[str, str]:
        """The environment of every role."""
        return {
            "PIN_DATABASE_URL": self.database_url,
            "PIN_KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap_servers,
            "PIN_JWT_SECRET": JWT_SECRET,
            "PIN_LOG_FORMAT": "json",
            "PIN_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "PIN_APPOINTMENT_PENDING_TTL_SECONDS": str(PENDING_TTL_SECONDS),
            "PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS": str(TIMEOUT_INTERVAL_SECONDS),
            "PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS": str(EXPIRE_INTERVAL_SECONDS),
            # the cancel cutoff stays the default (60 min): slots start hours ahead
            "PIN_RELAY_POLL_INTERVAL_SECONDS": "0.5",
        }

    def _start(self, spec: RoleSpec) -> None:
        args = [arg.format(api_port=self.api_port) for arg in spec.args]
        prefix = self.network.prefix(spec.name)
        process = RoleProcess(args, self.env(), self.logs / f"{spec.name}.log", prefix=prefix)
        with self._lock:
            previous = self._roles.get(spec.name)
            if previous is None:
                self._roles[spec.name] = _Running(spec, process)
            else:
                previous.process = process
                previous.starts += 1

    def _supervise(self) -> None:
        while self._supervising.is_set():
            with self._lock:
                dead = [r for r in self._roles.values() if r.process.process.poll() is not None]
                for running in dead:
                    running.exits.append(running.process.process.returncode)
                    running.process.close()
            for running in dead:
                self.event(f"restart {running.spec.name} (exit {running.exits[-1]})")
                self._start(running.spec)
            time.sleep(0.3)

    def stop(self) -> None:
        """Stop supervising, stop every role, the broker and PostgreSQL (the data directory stays)."""
        self._supervising.clear()
        if self._supervisor is not None:
            self._supervisor.join(5)
        with self._lock:
            for running in self._roles.values():
                try:
                    running.process.terminate(timeout=10)
                except Exception:
                    running.process.close()
                running.process.close()
        self.kafka.stop()
        self.postgres.stop("fast")

    # -------------------------------------------------------------------------------------------------- faults

    def event(self, text: str) -> None:
        """Note a fault or a restart with its time since the start (evidence)."""
        self.events.append((round(time.monotonic() - self._t0, 2), text))

    def role_names(self) -> list[str]:
        """Names of every supervised role instance."""
        with self._lock:
            return list(self._roles)

    def kill9(self, name: str) -> None:
        """SIGKILL one role instance; the supervisor starts it again."""
        with self._lock:
            running = self._roles[name]
            if running.process.process.poll() is None:
                running.process.kill9()
        self.kills.append((round(time.monotonic() - self._t0, 2), name))
        self.event(f"kill -9 {name}")

    def kill9_random(self, rng: random.Random, *, api_weight: float) -> str:
        """SIGKILL a random role (the API with ``api_weight``: the workload needs it, and it restarts slowly)."""
        names = self.role_names()
        weights = [api_weight if name == "api" else 1.0 for name in names]
        name = rng.choices(names, weights)[0]
        self.kill9(name)
        return name

    @contextmanager
    def database_down(self) -> Iterator[None]:
        """PostgreSQL stopped hard (immediate: like a crash) for the duration of the block, then started."""
        self.event("postgres stop (immediate)")
        self.postgres.stop("immediate")
        try:
            yield
        finally:
            self.postgres.start()
            self.event("postgres started")

    def restart_database(self) -> None:
        """An immediate restart (crash recovery on the same data)."""
        self.event("postgres restart (immediate)")
        self.postgres.restart("immediate")
        self.event("postgres restarted")

    def cut_link(self, name: str, seconds: float) -> None:
        """Cut the link of role ``name``'s namespace for ``seconds`` (packets vanish), then restore it."""
        namespace = self.network.namespaces[name]
        self.event(f"link of {name} cut for {seconds:.0f} s")
        namespace.cut()
        try:
            time.sleep(seconds)
        finally:
            namespace.restore()
            self.event(f"link of {name} restored")

    @contextmanager
    def broker_paused(self) -> Iterator[None]:
        """The broker frozen (SIGSTOP) for the duration of the block."""
        self.event("broker paused")
        self.kafka.pause()
        try:
            yield
        finally:
            self.kafka.resume()
            self.event("broker resumed")

    # ------------------------------------------------------------------------------------------------- queries

    def wait_api(self, timeout: float = 300.0) -> None:
        """Until the API answers /healthz."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the API did not answer in {timeout} s; see {self.logs / 'api.log'}")

    @property
    def base_url(self) -> str:
        """The API's address."""
        return f"http://127.0.0.1:{self.api_port}"

    def restarts(self) -> dict[str, int]:
        """How many times each role was started beyond the first."""
        with self._lock:
            return {name: r.starts - 1 for name, r in self._roles.items()}

    def unexpected_exits(self) -> dict[str, list[int]]:
        """Exit codes other than -9 (our kills), per role: a role that died by itself."""
        with self._lock:
            return {
                name: [c for c in r.exits if c != -9]
                for name, r in self._roles.items()
                if any(c != -9 for c in r.exits)
            }


def token(user_id: uuid.UUID, tenant_id: uuid.UUID, *roles: str, ttl_seconds: int = 7200) -> str:
    """A bearer token for the soak's secret."""
    return mint_token(JWT_SECRET, user_id=user_id, tenant_id=tenant_id, roles=list(roles), ttl_seconds=ttl_seconds)
