"""The durable column: the commit-bound phases again on a PostgreSQL with fsync and synchronous_commit on.

The embedded server of a bench run has fsync off (as `pin up`), which flatters every figure bound by its commits.
With ``PIN_BENCH_DURABLE_DATABASE_URL`` set, ``python -m bench`` runs each phase of :data:`PHASES` a second time on
that server, right after its runs on the main server, and the figures go to a second column of the summary
(``"durable"`` under each figure in summary.json, a table of both columns in summary.md and docs/capacity.md).
Each such run is against its own baselines, taken on the durable server in the same run: pgbench on the same
statements against the same server for the workers; the bare producer (the relay) and the expiry lag (end to end)
as on the main column.

On that server, each run of a phase works in databases of its own (:class:`ServerTwin`: a migrated template
``pin_bench_tpl_<run>`` and copies named after the phase and the run) and drops them when it ends, whether it
succeeded or not; no other database of the server is touched. Its autovacuum is turned on for the whole bench run
and put back as it was at the end (:class:`bench.pressure.DurableServer`, the pressure phase's own logic). The
broker, the processes and pgbench are the run's (the same pgbench binary for both columns).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench.env import BenchEnv

URL_VARIABLE = "PIN_BENCH_DURABLE_DATABASE_URL"
# The phases bound by PostgreSQL's commits; "lag" is the end-to-end phase's baseline, so it runs there too.
PHASES = ("timeout", "lag", "promotion", "relay", "e2e")
MAIN, DURABLE = "main", "durable"
# What the machine section and the tables say about the durable server.
SETTINGS = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "autovacuum")


def configured_url() -> str:
    """The durable server's URL, or "" when no durable server is configured."""
    return os.environ.get(URL_VARIABLE, "").strip()


@dataclass
class ServerTwin(BenchEnv):
    """The run's environment on another PostgreSQL server: databases of its own there; the parent's broker,
    processes (stopped with the run's) and pgbench."""

    parent: BenchEnv | None = None

    @property
    def _parent(self) -> BenchEnv:
        assert self.parent is not None, "a ServerTwin needs its parent environment"
        return self.parent

    def start(self) -> None:
        """Create and migrate this twin's template on its server (the broker is the parent's)."""
        from pin.db import migrate

        self.template = f"pin_bench_tpl_{self.run_id}"
        with self.admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.template}"')
        self.databases.append(self.template)
        migrate(self.url_of(self.template))

    def restart_broker(self) -> None:
        """The parent's broker, restarted (an embedded one) as a phase on the main server would."""
        self._parent.restart_broker()
        self.kafka_bootstrap = self._parent.kafka_bootstrap

    def pgbench_path(self) -> str:
        """The parent's pgbench: the same client for both columns."""
        return self._parent.pgbench_path()

    def close(self) -> None:
        """Stop the processes this twin started and drop every database it created; the servers stay."""
        for role in [r for r in self.roles if r.log_path.is_relative_to(self.work_dir)]:
            role.stop(timeout=5)
            self.roles.remove(role)
        with self.admin() as admin:
            for name in reversed(self.databases):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.databases.clear()


@contextmanager
def twin(parent: BenchEnv, url: str) -> Iterator[ServerTwin]:
    """A :class:`ServerTwin` of ``parent`` on the server of ``url`` for one run of one phase; its databases are
    dropped at the end, also when the phase fails."""
    env = ServerTwin(
        parent.work_dir / "durable",
        run_id=parent.run_id,
        server_url=url,
        kafka_bootstrap=parent.kafka_bootstrap,
        external_kafka=parent.external_kafka,
        roles=parent.roles,
        parent=parent,
    )
    env.work_dir.mkdir(parents=True, exist_ok=True)
    try:
        env.start()
        yield env
    finally:
        env.close()


def describe(url: str) -> dict[str, Any]:
    """The durable server's settings that matter to the figures (for run.json and the tables' headings)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in SETTINGS}  # type: ignore[index]
