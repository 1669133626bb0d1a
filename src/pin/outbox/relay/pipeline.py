"""The batches in a relay's hands: read the next, produce it, await its outcomes, settle it on a second thread."""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import NamedTuple

import psycopg
import structlog
from psycopg_pool import ConnectionPool

from pin.cancellation import Canceller, Watch
from pin.db import Conn
from pin.outbox.relay import queries
from pin.outbox.relay.batch import Batch, PendingRow, RelayCounts, pending_rows
from pin.outbox.relay.producing import BatchProducer
from pin.outbox.relay.settling import Settler

log = structlog.get_logger(__name__)


class _Read(NamedTuple):
    """What one read gave: the rows to send, how many were read and held back, and whether more wait."""

    rows: list[PendingRow]
    read: int
    held: int
    more_waiting: bool


class Pipeline:
    """At most ``batches_in_flight`` + 1 unsettled batches: up to ``batches_in_flight`` handed to the producer
    (the oldest possibly acknowledged and waiting for the settling thread) and one settling (see
    docs/design/relay.md). ``step`` reads and produces one batch and finishes the oldest when it must;
    ``settle_all`` empties the pipeline."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        owner: str,
        *,
        batch_size: int,
        batches_in_flight: int,
        owned_count: Callable[[], int],
        floors: Callable[[], dict[str, object]],
        producer: BatchProducer,
        settler: Settler,
        canceller: Canceller | None = None,
    ) -> None:
        self._pool = pool
        self._canceller = canceller if canceller is not None else Canceller()  # a stop cancels the read in flight
        self._owner = owner
        self._batch_size = batch_size
        self._batches_in_flight = batches_in_flight
        self._owned_count = owned_count
        self._floors = floors  # the floors the leases keep, as the read takes them
        self._producer = producer
        self._settler = settler
        self._in_flight: deque[Batch] = deque()  # handed to the producer, not yet awaited; oldest first
        # batches acknowledged (or failed) whose rows the settling thread is deleting or marking, oldest first
        self._settling: deque[tuple[Batch, Future[RelayCounts]]] = deque()
        self._settling_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-settle")
        self._active_vparts = 0  # vparts that gave rows to the last batch

    @property
    def in_flight(self) -> bool:
        """Some batch was handed to the producer and its outcomes are not all in yet."""
        return bool(self._in_flight)

    @property
    def settling(self) -> bool:
        """Some batch is still being settled."""
        return bool(self._settling)

    def round(self) -> RelayCounts:
        """One synchronous batch: read, produce, await the outcomes, settle in this thread. Nothing is left in
        flight when it returns (what the pipeline had in flight is settled first; those counters are dropped)."""
        self.settle_all()
        read = self._read()
        if not read.rows:
            return RelayCounts(read=read.read, more_waiting=read.more_waiting)
        batch = self._producer.produce(read.rows)
        self._producer.await_outcomes(batch, flush=True)
        cycle = self._settler.settle(batch)
        return replace(cycle, read=read.read, more_waiting=read.more_waiting)

    def step(self) -> RelayCounts:
        """Read the next batch while the broker acknowledges the batches in flight, and produce its first wave.
        Then finish (await, hand to the settling thread) every batch in flight when no backlog is left, else the
        oldest when the pipeline is full or the read added no batch. Returns the rows read and the counters of
        the batches settled meanwhile."""
        done = self._collect(wait=False)
        read = self._read()
        if read.rows:
            self._in_flight.append(self._producer.produce(read.rows))
        if not (read.more_waiting or read.held):
            # no backlog: await what is in flight now rather than after the next read (commit -> ack latency)
            while self._in_flight:
                done += self._finish_oldest()
        elif self._in_flight and (len(self._in_flight) >= self._batches_in_flight or not read.rows):
            # a read that added nothing (every row it found is held behind a key in flight) must finish a batch:
            # otherwise the next read finds the same rows held, and `pin relay --once` would spin for ever
            done += self._finish_oldest()
        done += self._collect(wait=False)
        held_back = done.held_back + read.held
        return replace(done, read=read.read, held_back=held_back, more_waiting=read.more_waiting or read.held > 0)

    def settle_all(self) -> RelayCounts:
        """Await the batches in flight and wait until every batch is settled (before a stop, a lease release or
        a synchronous round); returns their counters."""
        done = RelayCounts()
        while self._in_flight:
            done += self._finish_oldest()
        return done + self._collect(wait=True)

    def _finish_oldest(self) -> RelayCounts:
        """Await the oldest batch's outcomes, then hand it to the settling thread; the counters of the batches
        that had to be waited for (one batch settles at a time: when the database is behind, wait for it)."""
        batch = self._in_flight.popleft()
        # flush when nothing else is in flight (sent at once, not after linger.ms); else poll, which does not
        # wait for the younger batches' acknowledgements
        self._producer.await_outcomes(batch, flush=not self._in_flight)
        done = RelayCounts()
        while self._settling:
            done += self._collect(wait=True, oldest_only=True)
        self._settling.append((batch, self._settling_thread.submit(self._settler.settle, batch)))
        return done

    def _collect(self, *, wait: bool, oldest_only: bool = False) -> RelayCounts:
        """The counters of the settled batches (all, or only the oldest; waiting for them, or only those done)."""
        total = RelayCounts()
        error: BaseException | None = None
        while self._settling and (wait or self._settling[0][1].done()):
            _batch, future = self._settling.popleft()
            try:
                total += future.result()
            except Exception as exc:  # noqa: BLE001 - its rows stay in the outbox and are sent again
                error = error or exc
            if oldest_only:
                break
        if error is not None:
            raise error
        return total

    def _read(self) -> _Read:
        """The next batch of owned, due rows, leaving out every unsettled row and every row of a key with a row
        in flight or a failure whose backoff or dead letter is not committed yet."""
        # share the batch among the vparts that had rows last time (all owned ones at first), so one hot vpart
        # still gets whole batches and many busy vparts are read evenly
        limit = self._batch_size
        per_vpart = max(8, math.ceil(limit / max(1, self._active_vparts or self._owned_count())))
        unsettled: list[int] = []
        held_keys: set[str] = set()
        for batch in self._in_flight:
            unsettled += batch.ids
            held_keys |= batch.keys  # a row in flight may still fail
        for settling, _future in self._settling:
            unsettled += settling.ids
            held_keys |= settling.blocked  # a failure whose backoff or dead letter is not committed yet
        params = {
            **self._floors(),
            "owner": self._owner,
            "per_vpart": per_vpart,
            "limit": limit,
            "in_flight": queries.id_array(unsettled),
        }
        watch: Watch | None = None
        try:
            with (
                self._pool.connection() as conn,
                self._canceller.watch(conn) as watch,
                conn.cursor(row_factory=pending_rows) as cur,
            ):
                # with ids to leave out: planned with them (a hashed constant); without: the prepared plan (trickle)
                prepare = False if unsettled else None
                cur.execute(queries.RELAY_PLAN_BY_INDEX)
                rows = cur.execute(queries.OUTBOX_READ_OWNED, params, prepare=prepare).fetchall()
        except psycopg.Error as exc:
            if watch is None or watch.cancelled(exc) is None:
                raise
            log.info("outbox relay stopping: the read in flight was cancelled (it changed nothing)")
            return _Read([], 0, 0, more_waiting=False)
        per_vpart_counts = Counter(row.vpart for row in rows)
        self._active_vparts = len(per_vpart_counts)
        more_waiting = bool(rows) and (len(rows) >= limit or max(per_vpart_counts.values()) >= per_vpart)
        if not held_keys or not rows:
            return _Read(rows, len(rows), 0, more_waiting)
        sendable = [row for row in rows if row.key not in held_keys]
        return _Read(sendable, len(rows), len(rows) - len(sendable), more_waiting)
