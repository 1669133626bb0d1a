"""What an operator does, for the console and the command line alike: every action checks its arguments, records
itself in ``operations.audit`` (who, what, the filter, the counts, the reason) in the transaction that does it."""

from __future__ import annotations

from pin.db import Conn
from pin.messaging.topics import CONSUMER_GROUPS
from pin.operations import pauses
from pin.status.database import JOBS

# What can be paused: the polling workers' jobs and the consumer groups.
PAUSABLE = {pauses.JOB: tuple(items.job for items in JOBS), pauses.GROUP: CONSUMER_GROUPS}


class ActionError(ValueError):
    """An action that cannot be done as asked (unknown target, no reason): refused before anything changes."""


def pause_or_resume(conn: Conn, *, kind: str, name: str, action: str, actor: str, reason: str) -> bool:
    """Pause or resume job or group ``name`` (recorded); True when it changed."""
    if name not in PAUSABLE.get(kind, ()):
        raise ActionError(f"nothing to pause called {kind} {name!r}")
    if action == "pause":
        return pauses.pause(conn, kind=kind, name=name, actor=actor, reason=reason)
    if action == "resume":
        return pauses.resume(conn, kind=kind, name=name, actor=actor, reason=reason)
    raise ActionError("action is pause or resume")
