"""The unit of work: one database transaction whose recorded events become outbox rows when it commits.

Use cases load aggregates through a connection of the unit of work, call the domain, hand the aggregates'
recorded events to :meth:`UnitOfWork.record`, and commit. No code path publishes to Kafka from inside a
business transaction: the relay does, after commit (or, in cdc mode, Debezium reads the committed inserts from the
WAL: the commit then deletes every row the transaction inserted, see :func:`~pin.outbox.writer.outbox_capture`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType

from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.contracts import Contract
from pin.outbox.writer import MessageContext, OutboxRow, build_payload_row, outbox_capture, outbox_insert


class UnitOfWork:
    """A transaction on a pooled connection plus the integration events recorded during it.

    With ``connection`` the transaction runs on that connection, which the caller holds (a worker keeps one
    pooled connection for a whole cycle of per-item transactions): it is neither taken from nor returned to the
    pool here; an uncommitted transaction is still rolled back on exit.
    """

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        context: MessageContext,
        *,
        traceparent_provider: Callable[[], str | None] | None = None,
        connection: Conn | None = None,
    ) -> None:
        self._pool = pool
        self._context = context
        self._traceparent_provider = traceparent_provider
        # each event as its contract, key and payload (built when recorded: a contract is frozen) and its time
        self._events: list[tuple[type[Contract], str, Mapping[str, object], datetime]] = []
        self._rows: list[OutboxRow] = []  # rows a caller built already (add_outbox_rows)
        self._inserted: list[uuid.UUID] = []  # rows the caller inserted itself in this transaction (cdc capture)
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

    def record(self, event: Contract, occurred_at: datetime) -> None:
        """Queue an integration event; it is written to the outbox in this transaction at commit."""
        self._events.append((type(event), event.message_key(), event.to_payload(), occurred_at))

    def record_payload(
        self, kind: type[Contract], key: str, payload: Mapping[str, object], occurred_at: datetime
    ) -> None:
        """Queue an integration event given as its contract's payload (the model's, built without the model: see
        :meth:`~pin.messaging.contracts.Contract.payload_from`) and Kafka key; written as :meth:`record` writes."""
        self._events.append((kind, key, payload, occurred_at))

    def add_outbox_rows(self, rows: Iterable[OutboxRow]) -> None:
        """Queue rows already built (by :func:`~pin.outbox.writer.build_row`); written with the events at commit."""
        self._rows.extend(rows)

    def take_outbox_rows(self) -> list[OutboxRow]:
        """The outbox rows of the events recorded so far, for a caller that writes them itself in this transaction.

        The events are then no longer written at commit (a use case that saves its aggregates and its outbox
        rows in one statement); the commit still writes any event recorded afterwards.
        """
        rows = self._outbox_rows()
        self._events.clear()
        self._rows.clear()
        self.inserting(rows)
        return rows

    def inserting(self, rows: Iterable[OutboxRow]) -> None:
        """Rows the caller inserts itself in this transaction with a fragment of the writer (a set-based statement):
        the commit captures them with its own (cdc mode), so that no producer path escapes the capture."""
        self._inserted.extend(row.message_id for row in rows)

    def _outbox_rows(self) -> list[OutboxRow]:
        context = self._context
        if self._traceparent_provider is not None:
            traceparent = self._traceparent_provider()
            context = MessageContext(context.correlation_id, traceparent or context.traceparent, context.extra_headers)
        events = [
            build_payload_row(kind, key, payload, occurred_at=at, context=context)
            for kind, key, payload, at in self._events
        ]
        return events + self._rows

    def commit(self) -> None:
        """Write the recorded events as outbox rows and commit, atomically with the state change."""
        rows = self._outbox_rows()
        outbox_insert(self.conn, rows)
        outbox_capture(self.conn, [*self._inserted, *(row.message_id for row in rows)])
        self.conn.commit()
        self._events.clear()
        self._rows.clear()
        self._inserted.clear()
        self._committed = True

    def rollback(self) -> None:
        """Discard the transaction and the recorded events."""
        self.conn.rollback()
        self._events.clear()
        self._rows.clear()
        self._inserted.clear()

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
