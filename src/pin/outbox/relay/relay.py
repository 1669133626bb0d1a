"""One relay instance: its leases, its pipeline, its heartbeat and wake-up threads, and its two ways to run."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
import structlog
from confluent_kafka import Producer
from psycopg_pool import ConnectionPool

from pin.backoff import exponential_backoff
from pin.cancellation import Canceller
from pin.db import Conn, ConnectionPolicy, connect
from pin.observability import liveness
from pin.outbox.gauges import OutboxGauges, refresh_in_background
from pin.outbox.relay import metrics
from pin.outbox.relay.batch import REPORTED_COUNTERS, RelayCounts
from pin.outbox.relay.config import RelayConfig
from pin.outbox.relay.delivery import DeliveryWatch
from pin.outbox.relay.hooks import RelayHooks
from pin.outbox.relay.leases import Leases
from pin.outbox.relay.pipeline import Pipeline
from pin.outbox.relay.producing import BatchProducer
from pin.outbox.relay.settling import Settler

log = structlog.get_logger(__name__)

# The channel outbox.message's statement trigger NOTIFYs at commit.
NOTIFY_CHANNEL = "pin_outbox"


class OutboxRelay:
    """One relay instance: ``run_once`` publishes one batch, ``run`` publishes until stopped (or, ``until_empty``,
    until this instance's share of the outbox is empty)."""

    def __init__(
        self,
        pool: ConnectionPool[Conn],
        producer_factory: Callable[[], Producer],
        config: RelayConfig | None = None,
        *,
        database_url: str | None = None,
        policy: ConnectionPolicy | None = None,
        ensure_topic: Callable[[str], object] | None = None,
        hooks: RelayHooks | None = None,
        instance_id: str | None = None,
    ) -> None:
        self._config = config or RelayConfig()
        self._database_url = database_url
        self._policy = policy  # of the LISTEN connection (the pool has its own)
        self.instance_id = instance_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        self._delivery = DeliveryWatch()
        self._given_up = threading.Event()  # set while this relay cannot deliver: no heartbeat, no leases
        self._leases = Leases(pool, self.instance_id, self._config.lease_ttl_seconds, self._wake.set)
        self._gauges = OutboxGauges(pool, self._config.backlog_count_cap)
        self._producer = BatchProducer(
            producer_factory, self._config.message_timeout_ms, ensure_topic, hooks or RelayHooks()
        )
        # run()'s stop request cancels the statement in flight of the read and of the settle (pin.cancellation)
        self._canceller = Canceller()
        settler = Settler(pool, self.instance_id, self._config, self._canceller)
        self.pipeline = Pipeline(
            pool,
            self.instance_id,
            batch_size=self._config.batch_size,
            batches_in_flight=self._config.batches_in_flight,
            owned_count=lambda: self._leases.count,
            floors=self._leases.floor_params,
            producer=self._producer,
            settler=settler,
            canceller=self._canceller,
        )

    def run_once(self) -> RelayCounts:
        """Read one batch of owned, due rows; publish; delete the acknowledged; mark or dead-letter the failed.
        Nothing is left in flight when it returns."""
        return self.pipeline.round()

    def run(self, stop: threading.Event, *, until_empty: bool = False) -> dict[str, int]:
        """Publish, pipelined, until ``stop`` is set, or (``until_empty``: `pin relay --once`) until nothing is
        left in this instance's share; the batch in flight is settled before leaving. Returns the totals."""
        totals = dict.fromkeys((*REPORTED_COUNTERS, "cycles"), 0)
        self._canceller.stop = stop
        self._start(listen=not until_empty)
        try:
            if until_empty:
                self._drain(totals)
            else:
                self._serve(stop, totals)
        finally:
            self._settle_before_stop()
            self.close()
            if not until_empty:
                log.info("outbox relay stopped", instance=self.instance_id)
        return totals

    # -- leases (the heartbeat thread renews them; a test without that thread calls heartbeat itself) ------

    def heartbeat(self) -> dict[int, int]:
        """Register this instance, renew our leases, take free vparts up to a fair share; returns owned vparts."""
        return self._leases.heartbeat()

    def release_all(self) -> None:
        """Give back every lease and unregister (graceful stop): the others take over at once, not after a TTL."""
        self._leases.release_all()

    def owned_vparts(self) -> list[int]:
        """The vparts this instance held at its last heartbeat."""
        return self._leases.owned_vparts()

    # -- start and stop ---------------------------------------------------------------------------------

    def _start(self, *, listen: bool) -> None:
        """Take the first leases, then start the heartbeat (and the LISTEN) threads, and the gauges' refresh."""
        self._closing.clear()
        try:
            self.heartbeat()
        except (psycopg.Error, OSError) as exc:
            log.warning("outbox heartbeat failed", error=str(exc))
        self._threads = [threading.Thread(target=self._heartbeat_loop, name="relay-heartbeat", daemon=True)]
        if listen and self._database_url:
            self._threads.append(threading.Thread(target=self._listen_loop, name="relay-listen", daemon=True))
        for thread in self._threads:
            thread.start()
        # a thread of its own: the gauges are exact, so at a large backlog a refresh takes long and must not hold
        # a lease renewal back
        self._threads.append(refresh_in_background(self._gauges, self._config.gauge_refresh_seconds, self._closing))

    def close(self) -> None:
        """Stop the threads, let the producer go, release the leases (once; again does nothing)."""
        if self._producer.producer is None:
            return
        self._closing.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        # the batch in hand was settled already; this only drains stray callbacks, and must stay short so a
        # stop during a broker outage ends within an orchestrator's grace period
        self._producer.close(1.0)
        try:
            self.release_all()
        except (psycopg.Error, OSError) as exc:
            log.warning("outbox lease release failed; they expire by themselves", error=str(exc))

    # -- the two loops ----------------------------------------------------------------------------------

    def _serve(self, stop: threading.Event, totals: dict[str, int]) -> None:
        """Step the pipeline until ``stop``; idle while there is nothing to do; survive failures with a backoff."""
        failures = 0
        log.info("outbox relay started", instance=self.instance_id, owned=self._leases.count)
        while not stop.is_set():
            liveness.beat()  # /healthz/liveness fails if this loop stops turning (a hung call)
            self._wake.clear()
            if self._delivery.stalled_for() > self._config.undelivered_give_up_seconds:
                self._give_up_until_the_broker_answers(stop, totals)
                continue
            try:
                if self._leases.has_excess():
                    _add(totals, self.pipeline.settle_all())  # no row of a vpart we give back stays unsettled
                    self._leases.release_excess()
                cycle = self.pipeline.step()
                self._delivery.observe(cycle, in_flight=self.pipeline.in_flight or self.pipeline.settling)
                _add(totals, cycle)
            except Exception as exc:  # noqa: BLE001 - the loop survives database and broker failures
                failures += 1
                log.warning("outbox relay cycle failed", error=str(exc), consecutive_failures=failures)
                stop.wait(exponential_backoff(failures + 1, base=0.2, cap=5.0))
                continue
            failures = 0
            if not self.pipeline.in_flight and not cycle.is_full:
                self._idle(stop)

    def _give_up_until_the_broker_answers(self, stop: threading.Event, totals: dict[str, int]) -> None:
        """Cannot deliver: settle what is out (each send ends by message.timeout.ms: none is left queued to land
        after another relay's), give every lease up, then ask the broker each heartbeat until it answers."""
        stalled = round(self._delivery.stalled_for(), 1)
        log.warning("outbox relay cannot deliver; giving its leases up", stalled_seconds=stalled)
        metrics.GIVE_UPS.inc()
        self._given_up.set()
        try:
            _add(totals, self.pipeline.settle_all())
        except Exception as exc:  # noqa: BLE001 - its rows stay in the outbox and are sent again
            log.warning("outbox relay could not settle the batch in flight", error=str(exc))
        try:
            self.release_all()
        except (psycopg.Error, OSError) as exc:
            log.warning("outbox lease release failed; they expire by themselves", error=str(exc))
        while not stop.is_set() and not self._producer.broker_answers(self._config.heartbeat_seconds):
            stop.wait(self._config.heartbeat_seconds)
        self._delivery.reset()
        self._given_up.clear()
        if not stop.is_set():
            log.info("outbox relay reaches the broker again; taking its share back")
            self._wake.set()

    def _drain(self, totals: dict[str, int]) -> None:
        """Step the pipeline until a read finds nothing and nothing is settling, adding up the counters."""
        while True:
            cycle = self.pipeline.step()
            _add(totals, cycle)
            if not self.pipeline.in_flight and cycle.read == 0:
                if not self.pipeline.settling:
                    return
                _add(totals, self.pipeline.settle_all())  # then look once more: what was left out is settled now
                continue
            if cycle.settled and cycle.published == 0 and cycle.dead_lettered == 0:
                _add(totals, self.pipeline.settle_all())  # a whole batch failed: stop rather than spin
                return

    def _settle_before_stop(self) -> None:
        try:
            self.pipeline.settle_all()
        except Exception as exc:  # noqa: BLE001 - its rows stay in the outbox and are sent again
            log.warning("outbox relay could not settle the batch in flight", error=str(exc))

    def _idle(self, stop: threading.Event) -> None:
        """Wait for a NOTIFY, the next poll, or the stop request, whichever comes first."""
        deadline = time.monotonic() + self._config.poll_interval_seconds
        while not stop.is_set() and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(min(remaining, 0.2))

    def _heartbeat_loop(self) -> None:
        while not self._closing.wait(self._config.heartbeat_seconds):
            if self._given_up.is_set():
                continue  # not registered while it cannot deliver: the others share its keys
            try:
                self.heartbeat()
            except Exception as exc:  # noqa: BLE001 - a database outage must not kill the heartbeat
                log.warning("outbox heartbeat failed", error=str(exc))

    def _listen_loop(self) -> None:
        """LISTEN on a dedicated connection; reconnect after any failure."""
        assert self._database_url is not None
        while not self._closing.is_set():
            try:
                with connect(self._database_url, autocommit=True, policy=self._policy) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._wake.set()  # notifications sent while we were away are lost: look once
                    while not self._closing.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._wake.set()
            except psycopg.Error as exc:
                log.warning("outbox listen connection lost", error=str(exc))
                self._closing.wait(1.0)


def _add(totals: dict[str, int], cycle: RelayCounts) -> None:
    """Count one more cycle and add its counters to the totals."""
    totals["cycles"] += 1
    for name, value in cycle.as_dict().items():
        totals[name] += value
