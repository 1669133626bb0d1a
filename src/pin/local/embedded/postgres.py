"""An embedded PostgreSQL server from the binaries the `pgserver` wheel ships, listening on 127.0.0.1.

We drive initdb, postgres and pg_ctl ourselves (rather than pgserver's socket-only server) so that the server has a
TCP port every role can reach, so that tests can restart it or stop it hard, and so that the server is our own child
and ends with us (pin.local.embedded.lifetime) instead of a daemon that outlives a killed `pin up` or test run.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import fasteners

from pin.local.embedded.lifetime import die_with_parent
from pin.local.tcp_ports import free_port

with warnings.catch_warnings():
    # pgserver asks platformdirs for a runtime folder at import; without XDG_RUNTIME_DIR that only warns
    warnings.simplefilter("ignore")
    from pgserver import utils as pg_utils
    from pgserver._commands import POSTGRES_BIN_PATH  # where the wheel keeps initdb, pg_ctl, postgres, pgbench

# PostgreSQL refuses to run as root: as root, the server runs as this unprivileged system user (pgserver's name).
SYSTEM_USER = "pgserver"
# Every process on the machine that may create a system user takes this lock first (tests, `pin up`, the bench and
# the soak all come through ensure_system_user): concurrent useradd calls race, and one of them can leave a uid that
# another process already chowned a data folder to, or fail outright.
_USER_LOCK = Path(tempfile.gettempdir()) / "pin-system-user.lock"
# useradd's exit codes (shadow-utils): the passwd file is locked by another useradd, and the name is taken.
_USERADD_BUSY = 10
_USERADD_EXISTS = 9
# postmaster.pid's eighth line once the server accepts connections (what `pg_ctl -w` waits for)
_READY = "ready"


class SystemUserError(RuntimeError):
    """The unprivileged system user could not be created."""


def ensure_system_user(name: str = SYSTEM_USER, *, attempts: int = 20) -> pwd.struct_passwd:
    """The passwd entry of system user ``name``, created once (``useradd``) if it does not exist.

    Safe under concurrency across processes: the check and the creation happen under a machine-wide lock, a
    useradd that finds the name taken (a creator outside the lock, pgserver's own) counts as success, a busy
    passwd file is retried, and the entry is read again after the creation rather than trusted from before.
    """
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    with fasteners.InterProcessLock(str(_USER_LOCK)):
        for attempt in range(attempts):
            try:
                return pwd.getpwnam(name)
            except KeyError:
                pass
            result = subprocess.run(  # noqa: S603 - a fixed tool with our own arguments
                ["useradd", "-s", "/bin/bash", name],  # noqa: S607 - useradd from the system's PATH
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode not in (0, _USERADD_EXISTS, _USERADD_BUSY):
                raise SystemUserError(f"useradd {name} failed ({result.returncode}): {result.stderr.strip()}")
            if result.returncode == _USERADD_BUSY:
                time.sleep(0.05 * (attempt + 1))
        try:
            return pwd.getpwnam(name)
        except KeyError:
            raise SystemUserError(f"system user {name} still missing after {attempts} useradd attempts") from None


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL cluster in ``data_dir``; start() is idempotent across processes' restarts."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    # Another network whose clients are trusted besides the loopback's (a test's network namespace), CIDR.
    trusted_network: str | None = None
    # wal_level=logical and a few replication slots, for a server that logical decoding reads (the cdc mode's
    # test); off by default: other servers keep the default WAL level and its smaller WAL
    logical_replication: bool = False
    # as root: the unprivileged user the server runs as (created by ensure_system_user when missing)
    system_user: str = SYSTEM_USER
    # Linux: the server gets SIGQUIT (an immediate shutdown) when the thread that started it ends, even when its
    # process is killed with SIGKILL (pin.local.embedded.lifetime). Without it the server outlives us until stop().
    die_with_parent: bool = True
    # Server settings given after the defaults below, so they win (the bench's durable server: fsync, autovacuum).
    settings: dict[str, str] = field(default_factory=dict)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

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
        """As root, the system user the server runs as, with its data folder its own; else None (ourselves)."""
        if os.geteuid() != 0:
            return None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        entry = ensure_system_user(self.system_user)  # read after any creation: the uid the user has now
        pg_utils.ensure_prefix_permissions(self.data_dir)
        pg_utils.ensure_prefix_permissions(self.bin_dir)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        return self.system_user

    def start(self) -> None:
        """Initialise the cluster if needed and start it; returns when it accepts connections."""
        user = self._user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            self._run("initdb", ["--auth=trust", "--encoding=utf8", "--no-sync", "-U", "postgres"], user)
            if self.trusted_network:
                with (self.data_dir / "pg_hba.conf").open("a") as hba:
                    hba.write(f"host all all {self.trusted_network} trust\n")
        self._start_server(user)

    def _start_server(self, user: str | None, timeout: float = 60.0) -> None:
        """Start the postmaster as our own child (no pg_ctl: its daemon would not end with us) and wait until it
        accepts connections, as `pg_ctl -w` does: postmaster.pid says "ready"."""
        options = [
            # TCP only (every client uses the URL): no Unix socket, whose path has a 107-byte limit that a deep
            # data folder (a test run inside a test run) passes
            *("-h", self.host, "-p", str(self.port), "-k", ""),
            # fsync off: a development server need not survive the machine losing power, and only that loses
            # OS-cached writes. synchronous_commit stays on: a crash of PostgreSQL itself must not lose a
            # commit it acknowledged (the soak's checker caught that when it was off).
            *("-c", "max_connections=300", "-c", "fsync=off", "-c", "full_page_writes=off"),
        ]
        if self.logical_replication:
            options += ["-c", "wal_level=logical", "-c", "max_replication_slots=4", "-c", "max_wal_senders=4"]
        for name, value in self.settings.items():
            options += ["-c", f"{name}={value}"]
        with (self.data_dir / "server.log").open("ab") as log:
            self._process = subprocess.Popen(  # noqa: S603 - the wheel's own server with our own arguments
                [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), *options],
                stdout=log,
                stderr=subprocess.STDOUT,
                user=user,
                start_new_session=True,  # a Ctrl-C in the terminal is for `pin up`, which stops the server in order
                preexec_fn=die_with_parent(signal.SIGQUIT) if self.die_with_parent else None,  # noqa: PLW1509
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the embedded PostgreSQL exited at start; see {self.data_dir / 'server.log'}")
            if self._ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"the embedded PostgreSQL did not start in {timeout} s; see {self.data_dir / 'server.log'}")

    def _ready(self) -> bool:
        """Whether our postmaster wrote "ready" into its pid file."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        return len(lines) >= 8 and lines[0].strip() == str(self._pid()) and lines[7].strip() == _READY

    def _pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (mode: smart, fast or immediate); a server that is not running is fine."""
        user = None if os.geteuid() != 0 else self.system_user
        try:
            self._run("pg_ctl", ["-w", "-m", mode, "stop"], user, timeout=60)
        except subprocess.CalledProcessError:
            if self.is_running():
                raise
        if self._process is not None:  # our child: reap it (a zombie would look alive to is_running)
            self._process.wait(60)
            self._process = None

    def restart(self, mode: str = "immediate") -> None:
        """Stop (immediate: like a crash) and start again on the same port."""
        self.stop(mode)
        self._start_server(None if os.geteuid() != 0 else self.system_user)

    def is_running(self) -> bool:
        """Whether the postmaster of this cluster is alive."""
        if self._process is not None:
            self._process.poll()  # reap our own child if it ended, so that its pid is no longer signalable
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
