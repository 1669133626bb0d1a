"""The state folder of `pin up` (PIN_HOME, default ``.pin``) as `pin up` keeps it: its lock and the endpoints it
records. How every other command reads them is ``pin.settings`` (``running_endpoints``): the file names and the
endpoints' fields are written there once.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import IO

from pin.settings import UP_BANNER_FILE, UP_ENDPOINTS_FILE, UP_LOCK_FILE, PinUpEndpoints

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
