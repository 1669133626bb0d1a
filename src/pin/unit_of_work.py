"""The unit of work: one database transaction whose recorded events become outbox rows when it commits.

Use cases load aggregates through a connection of the unit of work, call the domain, hand the aggregates'
recorded events to :meth:`UnitOfWork.record`, and commit: the one way events become outbox rows (a set-based
statement that inserts them itself takes them with :meth:`UnitOfWork.take_outbox_rows`). No code path publishes
to Kafka from inside a business transaction: the relay does, after commit (or, in cdc mode, Debezium reads the
committed inserts from the WAL: the commit then deletes every row the transaction inserted, see
:func:`~pin.outbox.writer.outbox_capture`). Which rows and which mode is the process's
:class:`~pin.outbox.writer.OutboxPolicy`, which the composition root hands down to every unit of work.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from types import TracebackType

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.contracts import Contract
from pin.outbox.writer import MessageContext, OutboxPolicy, OutboxRow, build_rows, outbox_capture, outbox_insert


class UnitOfWork:
    """A transaction on a pooled connection plus the integration events recorded during it, written as ``outbox``
    (the process's policy) says.

    With ``connection`` the transaction runs on that connection, which the caller holds (a worker keeps one
    pooled connection for a whole cycle of per-item transactions): it is neither taken from nor returned to the
    pool here; an uncommitted transaction is still rolled back on exit.
    """

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        context: MessageContext,
        *,
        outbox: OutboxPolicy,
        traceparent_provider: Callable[[], str | None] | None = None,
        connection: Conn | None = None,
    ) -> None:
        self._pool = pool
        self._context = context
        self._outbox = outbox
        self._traceparent_provider = traceparent_provider
        self._rows_context: MessageContext | None = None  # this transaction's rows' context (_message_context)
        self._rows: list[OutboxRow] = []  # the rows of the recorded events, inserted at commit
        self._inserted: list[uuid.UUID] = []  # rows a set-based statement inserted in this transaction (cdc capture)
        self._given = connection
        self._conn: Conn | None = None
        self._committed = False

    @property
    def conn(self) -> Conn:
        """The connection whose transaction this unit of work is."""
        if self._conn is None:
            raise RuntimeError("the unit of work is not open")
        return self._conn

    def __enter__(self) -> UnitOfWork:
        self._conn = self._given if self._given is not None else self._pool.getconn()
        self._conn.autocommit = False
        return self

    def record(self, kind: type[Contract], key: str, payload: Mapping[str, object], occurred_at: datetime) -> None:
        """Record an integration event: its contract, Kafka key and payload (the contract's fields under their
        contract names: a payload builder's, or ``event.to_payload()``). Its outbox rows are built now by the
        writer's one row builder (:func:`~pin.outbox.writer.build_rows`) and written in this transaction at commit.
        """
        self._rows.extend(
            build_rows(
                kind, key, payload, occurred_at=occurred_at, context=self._message_context(), policy=self._outbox
            )
        )

    def take_outbox_rows(self) -> list[OutboxRow]:
        """The outbox rows of the events recorded so far, for a set-based statement of this transaction that inserts
        them with its own writes through the writer's fragment (:func:`~pin.outbox.writer.insert_values_sql`,
        :func:`~pin.outbox.writer.insert_unnest_sql`). The commit then no longer inserts them but still captures them
        (cdc mode), so that no producer path escapes the capture; it writes any event recorded afterwards."""
        rows, self._rows = self._rows, []
        self._inserted.extend(row.message_id for row in rows)
        return rows

    def _message_context(self) -> MessageContext:
        """The context of this transaction's rows: the unit of work's, with the trace current at the first record."""
        if self._rows_context is None:
            context = self._context
            if self._traceparent_provider is not None:
                traceparent = self._traceparent_provider() or context.traceparent
                context = MessageContext(context.correlation_id, traceparent, context.extra_headers)
            self._rows_context = context
        return self._rows_context

    def _clear(self) -> None:
        self._rows.clear()
        self._inserted.clear()
        self._rows_context = None

    def commit(self) -> None:
        """Write the recorded events as outbox rows and commit, atomically with the state change."""
        rows = self._rows
        outbox_insert(self.conn, rows)
        outbox_capture(self.conn, [*self._inserted, *(row.message_id for row in rows)], self._outbox.mode)
        self.conn.commit()
        self._clear()
        self._committed = True

    def rollback(self) -> None:
        """Discard the transaction and the recorded events."""
        self.conn.rollback()
        self._clear()

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
            if self._given is None:
                self._pool.putconn(conn)
