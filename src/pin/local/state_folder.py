"""The state folder of `pin up` (PIN_HOME, default ``.pin``): its lock and the endpoints `pin up` records there, and
how every other command reads them (:func:`load_settings`: what the environment leaves unset among the database, the
broker and the JWT secret comes from the `pin up` running in the folder, with one line on stderr saying so).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from pin import settings as settings_module
from pin.settings import Settings

# The state folder of `pin up` (PIN_HOME, default ``.pin``), as every command reads it. `pin up` holds an exclusive
# lock on UP_LOCK_FILE while it runs (the kernel drops it when the process dies, even by kill -9) and writes
# UP_ENDPOINTS_FILE once everything is started (:func:`write_endpoints`); a command reads that file only while the
# lock is held, so a file left behind by a `pin up` that is gone is ignored.
UP_LOCK_FILE = "up.lock"
UP_ENDPOINTS_FILE = "endpoints.json"
# What `pin up` printed for a person (its banner; with --demo the sample data, tokens and curl lines), owner-only:
# `pin status --demo` prints it again once the roles' lines have scrolled it away.
UP_BANNER_FILE = "banner.txt"


@dataclass(frozen=True)
class PinUpEndpoints:
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


def state_folder_of(path: str) -> Path:
    """The absolute state folder for the PIN_HOME setting ``path``."""
    return Path(path).expanduser().resolve()


def _is_held(home: Path) -> bool:
    """Whether a `pin up` holds the folder's lock right now."""
    try:
        with (home / UP_LOCK_FILE).open("r") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:
        return False


def running_endpoints(home: Path) -> PinUpEndpoints | None:
    """The endpoints of the `pin up` running in ``home``, or None when none runs there."""
    path = home / UP_ENDPOINTS_FILE
    if not path.exists() or not _is_held(home):
        return None
    try:
        return PinUpEndpoints(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running_banner(home: Path) -> str | None:
    """What the `pin up` running in ``home`` printed for a person, or None when none runs there."""
    if running_endpoints(home) is None:
        return None
    try:
        return (home / UP_BANNER_FILE).read_text()
    except OSError:
        return None


def read_dev_secret(home: Path, endpoints: PinUpEndpoints) -> str | None:
    """The development secret `pin up` generated, if it did."""
    if endpoints.jwt_secret_file is None:
        return None
    try:
        return (home / endpoints.jwt_secret_file).read_text().strip() or None
    except OSError:
        return None


# the development JWT secret `pin up` generates when neither PIN_JWT_SECRET nor PIN_JWT_PUBLIC_KEY is set
DEV_SECRET_FILE = "jwt-secret"  # noqa: S105 - a file name, not a secret


class StateFolderError(Exception):
    """The state folder cannot be used by this `pin up`."""


def lock(home: Path) -> IO[str]:
    """Create the folder and take its lock; the returned file holds the lock until it is closed."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        handle = (home / UP_LOCK_FILE).open("a+")
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


def write_endpoints(home: Path, endpoints: PinUpEndpoints) -> None:
    """Record the endpoints (owner-only: a URL may carry a password); replaced atomically."""
    target = home / UP_ENDPOINTS_FILE
    partial = target.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(endpoints), indent=2) + "\n")
    partial.chmod(0o600)
    partial.replace(target)


def write_banner(home: Path, lines: list[str]) -> None:
    """Record what `pin up` printed for a person (owner-only: the demo's tokens are in it); replaced atomically."""
    target = home / UP_BANNER_FILE
    partial = target.with_suffix(".tmp")
    partial.write_text("\n".join(lines) + "\n")
    partial.chmod(0o600)
    partial.replace(target)


def remove_endpoints(home: Path) -> None:
    """Forget the endpoints and the banner (at the end of `pin up`)."""
    (home / UP_ENDPOINTS_FILE).unlink(missing_ok=True)
    (home / UP_BANNER_FILE).unlink(missing_ok=True)


def load_settings() -> Settings:
    """The settings (:func:`pin.settings.load_settings`), completed from the `pin up` running in the state folder."""
    return settings_module.load_settings(_pin_up_values)


def _pin_up_values(settings: Settings) -> dict[str, str]:
    """What the running `pin up` serves, for the variables ``settings`` leave unset; one line on stderr says which."""
    unset = {
        "database_url": not settings.database.url,
        "kafka_bootstrap_servers": not settings.kafka.bootstrap_servers,
        "jwt_secret": settings.api.jwt_secret is None and not settings.api.jwt_public_key,
    }
    missing = {name for name, is_unset in unset.items() if is_unset}
    if not missing:
        return {}
    home = state_folder_of(settings.home)
    endpoints = running_endpoints(home)
    if endpoints is None:
        return {}
    found: dict[str, str | None] = {
        "database_url": endpoints.database_url,
        "kafka_bootstrap_servers": endpoints.kafka_bootstrap_servers,
        "jwt_secret": read_dev_secret(home, endpoints),
    }
    taken = {name: value for name, value in found.items() if name in missing and value}
    if taken:
        names = ", ".join(f"PIN_{name.upper()}" for name in taken)
        sys.stderr.write(f"pin: {names} from {endpoints.describe(home)}\n")
    return taken
