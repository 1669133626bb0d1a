"""A stop, or a deadline, reaches the statement in flight: psycopg's cancel on the connections a role is working on.

A role watches a connection while it works on it (:meth:`Canceller.watch`). When the role's stop event is set
(SIGTERM, Ctrl-C), or the watch's deadline passes (a cycle's budget), a watcher thread sends the server a cancel
request for the connection (``Connection.cancel_safe``), and sends it again every :data:`RECANCEL_SECONDS` while a
statement of the watch is still running: a cancel that arrives between two statements is ignored by the server,
and the next statement of the watch is cancelled in its turn. The statement fails with SQLSTATE 57014
(query_canceled), its transaction rolls back whole, and its row locks go with it. A watch opened after the stop
is cancelled at once: no new work begins after a stop.

The server says 57014 for a statement timeout and an operator's ``pg_cancel_backend`` too:
:meth:`Watch.cancelled` tells the cancel this process asked for (a stop, a budget) from those, so that neither is
counted as a failure. Work done after the watch ended (a rollback, a cycle's own bookkeeping) is never cancelled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import psycopg
import structlog
from psycopg.errors import QueryCanceled
from psycopg.pq import TransactionStatus

log = structlog.get_logger(__name__)

# How often the watcher looks at the stop event and the deadlines while a watch is open (the stop's latency).
POLL_SECONDS = 0.05
# While a watched statement still runs after a cancel, the cancel is sent again this often.
RECANCEL_SECONDS = 0.25
# The longest one cancel request may take (it opens a connection of its own to the server).
CANCEL_TIMEOUT_SECONDS = 2.0


class Cause(Enum):
    """Why this process cancelled a statement."""

    STOP = "stop"  # the role was asked to stop
    BUDGET = "budget"  # the watch's deadline passed (a cycle's time budget was spent)


def query_canceled(exc: BaseException) -> bool:
    """Whether ``exc`` is (or was caused by) a query_canceled, 57014, before any other error of the server."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, QueryCanceled):
            return True
        if isinstance(seen, psycopg.Error):
            return False  # another failure of the server's: not the cancel's
        seen = seen.__cause__ or seen.__context__
    return False


class Watch:
    """One connection watched for a while: whether, and why, this process cancelled a statement on it."""

    def __init__(self, conn: psycopg.Connection[Any], deadline: float | None) -> None:
        self.conn = conn
        self.deadline = deadline  # time.monotonic() past which the statement in flight is cancelled; None: never
        self.cause: Cause | None = None  # set when the first cancel is sent
        self.open = True
        self._next_cancel = 0.0
        self._lock = threading.Lock()  # held while a cancel is sent: the watch does not end under it

    def cancelled(self, exc: BaseException) -> Cause | None:
        """Why ``exc`` happened, if this process's own cancel made it: a query_canceled (57014) on the chain of
        causes of a watch that sent a cancel. None: an outage, a statement timeout, an operator (or no cancel)."""
        cause = self.cause
        if cause is None and self.past_deadline():
            cause = Cause.BUDGET  # the server's statement timeout at the same deadline came first
        if cause is None or not query_canceled(exc):
            return None
        return cause

    def past_deadline(self) -> bool:
        """Whether the watch's deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _due(self, now: float, stopping: bool) -> bool:
        """Whether a cancel is to be sent now; the first one sets the cause."""
        if self.cause is None:
            if stopping:
                self.cause = Cause.STOP
            elif self.deadline is not None and now >= self.deadline:
                self.cause = Cause.BUDGET
            else:
                return False
        elif now < self._next_cancel or self.conn.info.transaction_status is not TransactionStatus.ACTIVE:
            return False  # sent already, and nothing of the watch runs now
        self._next_cancel = now + RECANCEL_SECONDS
        return True

    def _cancel(self) -> None:
        with self._lock:
            if not self.open or self.conn.closed:
                return
            try:
                self.conn.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
            except Exception as exc:  # noqa: BLE001 - a cancel that fails leaves the statement to its own timeout
                log.warning("statement cancel failed", error=str(exc))

    def end(self) -> None:
        """Send no more cancels (again does nothing): what runs next on the connection is not cancelled (a commit
        of what was finished, a rollback)."""
        with self._lock:  # a cancel being sent is finished first: none reaches what runs after the watch
            self.open = False


class Canceller:
    """One role's cancels: watches its stop event and each watch's deadline from a thread of its own (started by
    the first watch). Without a stop event it only keeps deadlines, until a role's run sets ``stop`` to its own."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop if stop is not None else threading.Event()
        self._watches: set[Watch] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, conn: psycopg.Connection[Any], *, deadline: float | None = None) -> Iterator[Watch]:
        """Watch ``conn`` until the block ends: a stop, or ``deadline`` (time.monotonic()), cancels its statement in
        flight. End the block before rolling back: nothing after it is cancelled."""
        watch = Watch(conn, deadline)
        with self._changed:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch_loop, name="statement-cancel", daemon=True)
                self._thread.start()
            self._changed.notify()
        try:
            yield watch
        finally:
            watch.end()
            with self._changed:
                self._watches.discard(watch)

    def _watch_loop(self) -> None:
        while True:
            with self._changed:
                while not self._watches:
                    self._changed.wait()
                watches = list(self._watches)
            now = time.monotonic()
            stopping = self.stop.is_set()
            for watch in watches:
                try:
                    if watch.open and watch._due(now, stopping):
                        watch._cancel()
                except Exception as exc:  # noqa: BLE001 - the watcher outlives any one watch's trouble
                    log.warning("statement cancel watch failed", error=str(exc))
            time.sleep(POLL_SECONDS)
