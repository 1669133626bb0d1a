"""An embedded PostgreSQL server from the binaries the `pgserver` wheel ships, listening on 127.0.0.1.

We drive initdb and pg_ctl ourselves (rather than pgserver's socket-only server) so that the server has a
TCP port every role can reach, and so that tests can restart it or stop it hard.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from pin.ports import free_port

with warnings.catch_warnings():
    # pgserver asks platformdirs for a runtime folder at import; without XDG_RUNTIME_DIR that only warns
    warnings.simplefilter("ignore")
    from pgserver import utils as pg_utils
    from pgserver._commands import POSTGRES_BIN_PATH  # where the wheel keeps initdb, pg_ctl, postgres, pgbench

# PostgreSQL refuses to run as root; pgserver creates this unprivileged user for the same reason.
_SYSTEM_USER = "pgserver"


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL cluster in ``data_dir``; start() is idempotent across processes' restarts."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    # wal_level=logical and a few replication slots, for a server that logical decoding reads (the cdc mode's
    # test); off by default: other servers keep the default WAL level and its smaller WAL
    logical_replication: bool = False

    @property
    def url(self) -> str:
        """libpq URL of the ``postgres`` database."""
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    @property
    def bin_dir(self) -> Path:
        """Where the server's executables (pgbench included) are."""
        return Path(POSTGRES_BIN_PATH)

    def _run(self, tool: str, args: list[str], user: str | None, timeout: float = 90) -> None:
        """Run one of the server's tools on this cluster as ``user``; its output goes to the server log."""
        with (self.data_dir.parent / f"{self.data_dir.name}-{tool}.log").open("ab") as log:
            subprocess.run(  # noqa: S603 - the tools of the installed wheel, with our own arguments
                [str(self.bin_dir / tool), "-D", str(self.data_dir), *args],
                check=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                user=user,
                timeout=timeout,
            )

    def _user(self) -> str | None:
        if os.geteuid() != 0:
            return None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pg_utils.ensure_user_exists(_SYSTEM_USER)
        pg_utils.ensure_prefix_permissions(self.data_dir)
        pg_utils.ensure_prefix_permissions(self.bin_dir)
        return _SYSTEM_USER

    def start(self) -> None:
        """Initialise the cluster if needed and start it; returns when it accepts connections."""
        user = self._user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            self._run("initdb", ["--auth=trust", "--encoding=utf8", "--no-sync", "-U", "postgres"], user)
        self._pg_ctl_start(user)

    def _pg_ctl_start(self, user: str | None) -> None:
        options = (
            f"-h {self.host} -p {self.port} -k {self.data_dir} "
            # fsync off: a development server need not survive the machine losing power, and only that loses
            # OS-cached writes. synchronous_commit stays on: a crash of PostgreSQL itself must not lose a
            # commit it acknowledged (the soak's checker caught that when it was off).
            "-c max_connections=300 -c fsync=off -c full_page_writes=off"
        )
        if self.logical_replication:
            options += " -c wal_level=logical -c max_replication_slots=4 -c max_wal_senders=4"
        self._run("pg_ctl", ["-w", "-t", "60", "-o", options, "-l", str(self.data_dir / "server.log"), "start"], user)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (mode: smart, fast or immediate); a server that is not running is fine."""
        user = None if os.geteuid() != 0 else _SYSTEM_USER
        try:
            self._run("pg_ctl", ["-w", "-m", mode, "stop"], user, timeout=60)
        except subprocess.CalledProcessError:
            if self.is_running():
                raise

    def restart(self, mode: str = "immediate") -> None:
        """Stop (immediate: like a crash) and start again on the same port."""
        self.stop(mode)
        self._pg_ctl_start(None if os.geteuid() != 0 else _SYSTEM_USER)

    def is_running(self) -> bool:
        """Whether the postmaster of this cluster is alive."""
        pid_file = self.data_dir / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            os.kill(int(pid_file.read_text().split()[0]), 0)
        except (OSError, ValueError):
            return False
        return True

    def destroy(self) -> None:
        """Stop the server and delete its data."""
        self.stop("immediate")
        shutil.rmtree(self.data_dir, ignore_errors=True)
