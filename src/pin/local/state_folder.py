"""The state folder of `pin up` (PIN_HOME, default ``.pin``): its lock and the endpoints it records.

`pin up` holds an exclusive lock on ``up.lock`` while it runs (the kernel drops it when the process dies, even
by kill -9) and writes ``endpoints.json`` once everything is started. Other commands run in the same folder read
that file, but only while the lock is held: a file left behind by a `pin up` that is gone is ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

LOCK_FILE = "up.lock"
ENDPOINTS_FILE = "endpoints.json"
# the development JWT secret `pin up` generates when neither PIN_JWT_SECRET nor PIN_JWT_PUBLIC_KEY is set
DEV_SECRET_FILE = "jwt-secret"  # noqa: S105 - a file name, not a secret


class StateFolderError(Exception):
    """The state folder cannot be used by this `pin up`."""


@dataclass(frozen=True)
class Endpoints:
    """What a running `pin up` serves, as other commands need it."""

    pid: int
    started_at: str
    api_url: str
    database_url: str
    kafka_bootstrap_servers: str
    # the file (in the state folder) holding the generated development secret, when `pin up` generated one
    jwt_secret_file: str | None

    def describe(self, home: Path) -> str:
        """Which `pin up` this is, in a few words."""
        return f"the `pin up` in {home} (pid {self.pid}, started {self.started_at}, API {self.api_url})"


def home_of(path: str) -> Path:
    """The absolute state folder for the PIN_HOME setting ``path``."""
    return Path(path).expanduser().resolve()


def lock(home: Path) -> IO[str]:
    """Create the folder and take its lock; the returned file holds the lock until it is closed."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        handle = (home / LOCK_FILE).open("a+")
    except OSError as exc:
        reason = f"the state folder {home} cannot be used ({exc.strerror})"
        raise StateFolderError(f"{reason}: choose another with PIN_HOME") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise StateFolderError(
            f"the state folder {home} is in use by another `pin up` (pid {holder}): stop it, "
            "or choose another folder with PIN_HOME"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def is_locked(home: Path) -> bool:
    """Whether a `pin up` holds the folder's lock right now."""
    try:
        with (home / LOCK_FILE).open("r") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:
        return False


def write_endpoints(home: Path, endpoints: Endpoints) -> None:
    """Record the endpoints (owner-only: a URL may carry a password); replaced atomically."""
    target = home / ENDPOINTS_FILE
    partial = target.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(endpoints), indent=2) + "\n")
    partial.chmod(0o600)
    partial.replace(target)


def remove_endpoints(home: Path) -> None:
    """Forget the endpoints (at the end of `pin up`)."""
    (home / ENDPOINTS_FILE).unlink(missing_ok=True)


def running_endpoints(home: Path) -> Endpoints | None:
    """The endpoints of the `pin up` running in ``home``, or None when none runs there."""
    path = home / ENDPOINTS_FILE
    if not path.exists() or not is_locked(home):
        return None
    try:
        return Endpoints(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def read_dev_secret(home: Path, endpoints: Endpoints) -> str | None:
    """The development secret `pin up` generated, if it did."""
    if endpoints.jwt_secret_file is None:
        return None
    try:
        return (home / endpoints.jwt_secret_file).read_text().strip() or None
    except OSError:
        return None
