"""The unit of work: one database transaction whose recorded events become outbox rows when it commits.

Use cases load aggregates through a connection of the unit of work, call the domain, hand the aggregates'
recorded events to :meth:`UnitOfWork.record`, and commit. No code path publishes to Kafka from inside a
business transaction: the relay does, after commit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from types import TracebackType

import psycopg
from psycopg_pool import ConnectionPool

from pin.messaging.contracts import Contract
from pin.outbox.writer import MessageContext, build_row, outbox_insert

Conn = psycopg.Connection[dict[str, object]]


class UnitOfWork:
    """A transaction on a pooled connection plus the integration events recorded during it."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        context: MessageContext,
        *,
        traceparent_provider: Callable[[], str | None] | None = None,
    ) -> None:
        self._pool = pool
        self._context = context
        self._traceparent_provider = traceparent_provider
        self._events: list[tuple[Contract, datetime]] = []
        self._conn: Conn | None = None
        self._committed = False

    @property
    def conn(self) -> Conn:
        """The connection whose transaction this unit of work is."""
        if self._conn is None:
            raise RuntimeError("the unit of work is not open")
        return self._conn

    def __enter__(self) -> UnitOfWork:
        self._conn = self._pool.getconn()
        self._conn.autocommit = False
        return self

    def record(self, event: Contract, occurred_at: datetime) -> None:
        """Queue an integration event; it is written to the outbox in this transaction at commit."""
        self._events.append((event, occurred_at))

    def commit(self) -> None:
        """Write the recorded events as outbox rows and commit, atomically with the state change."""
        context = self._context
        if self._traceparent_provider is not None:
            traceparent = self._traceparent_provider()
            context = MessageContext(context.correlation_id, traceparent or context.traceparent, context.extra_headers)
        rows = [build_row(event, occurred_at=at, context=context) for event, at in self._events]
        outbox_insert(self.conn, rows)
        self.conn.commit()
        self._events.clear()
        self._committed = True

    def rollback(self) -> None:
        """Discard the transaction and the recorded events."""
        self.conn.rollback()
        self._events.clear()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not self._committed and not conn.closed:
                conn.rollback()
        finally:
            self._pool.putconn(conn)
