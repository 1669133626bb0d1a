"""What every long-running role shares: settings, the outbox policy, logging, metrics, the collector's tuning, a stop
event on signals."""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import structlog

from pin.backoff import exponential_backoff
from pin.consumer_groups import migration_readers
from pin.messaging.migrations import publishing, start_migrations
from pin.observability.liveness import add_readiness_check
from pin.observability.logging import configure_logging, error_text
from pin.observability.metrics import serve_metrics
from pin.observability.tracing import configure_tracing_from_env
from pin.outbox.writer import OutboxPolicy
from pin.settings import Settings, load_settings

# The exit code of a role that did not stop within PIN_STOP_TIMEOUT_SECONDS of SIGTERM (and left anyway).
STOP_TIMEOUT_EXIT_CODE = 3

# The cyclic garbage collector's youngest threshold in a role (CPython's default: 700 new container objects). A
# consumer's batch keeps thousands of tracked objects (models, UUIDs, contexts) alive until its transaction ends, so
# with 700 the collector ran several times per batch and moved each batch into the older generations, whose full
# collections walk every object of the imports: about a fifth of a consumer's client CPU per message (measured
# with the bench's messages, bench/README.md, "The consumers' per-message cost").
GC_YOUNG_THRESHOLD = 20_000


@dataclass
class RoleContext:
    """A started role: its settings, its outbox policy (every unit of work of the process writes as it says) and the
    event that tells it to stop."""

    settings: Settings
    stop: threading.Event
    outbox: OutboxPolicy


def start_role(role: str, *, metrics: bool = True, broker: bool = False) -> RoleContext:
    """Load settings (exit 2 on a bad one, via the CLI), build the outbox policy, configure logs and traces (OTEL_
    variables), tune the garbage collector, serve /metrics and the probes (readiness: the database, and the broker
    when ``broker``), trap SIGTERM/SIGINT."""
    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format, role=role)
    # a bad migration is a configuration error, an overdue one a warning; the writer then publishes what they say
    outbox = OutboxPolicy.of(settings.outbox_mode, publishing(start_migrations(settings, migration_readers())))
    configure_tracing_from_env(role)
    _tune_collector()
    if metrics:
        _check_dependencies(settings, broker=broker)
        serve_metrics(settings.metrics_port, settings.metrics_host)
    stop = threading.Event()
    deadline_armed = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()
        if not deadline_armed.is_set():
            deadline_armed.set()
            _exit_if_still_running(settings.stop_timeout_seconds)

    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)
    if settings.up_pid is not None:
        _stop_when_gone(settings.up_pid)
    return RoleContext(settings=settings, stop=stop, outbox=outbox)


# How long the readiness probe waits for each dependency (an orchestrator's probe timeout must exceed the sum).
READINESS_TIMEOUT_SECONDS = 2.0


def _check_dependencies(settings: Settings, *, broker: bool) -> None:
    """The readiness probe's checks: a new database connection answers (not one of the role's pool, which a busy
    role may have checked out), and the broker answers a Metadata request."""
    from pin.db import connect, default_policy

    def database() -> None:
        timeout = max(1, round(READINESS_TIMEOUT_SECONDS))  # libpq's connect_timeout is whole seconds
        with connect(settings.require_database_url(), policy=default_policy(), connect_timeout=timeout) as conn:
            conn.execute("SELECT 1")

    if settings.database_url:
        add_readiness_check("database", database)
    if broker and settings.kafka_bootstrap_servers:
        from pin.messaging.kafka import missing_topics  # imported by the roles that use the broker only

        add_readiness_check("broker", lambda: missing_topics(settings, [], timeout=READINESS_TIMEOUT_SECONDS))


def _tune_collector() -> None:
    """Start-up's objects out of the collector's reach (they live as long as the process), fewer young collections."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)


def _exit_if_still_running(timeout: float) -> None:
    """End the process ``timeout`` seconds from now if it has not stopped by then.

    A role blocked on a connection whose peer vanished (a network that drops packets) only sees the stop once
    that call returns; the dead-peer settings bound the wait, and this bounds the stop whatever the call. What
    the role did not commit, the server rolls back: nothing is lost by leaving.
    """

    def _deadline() -> None:
        time.sleep(timeout)
        structlog.get_logger(__name__).error("stop did not finish in time; exiting", stop_timeout_seconds=timeout)
        logging.shutdown()
        os._exit(STOP_TIMEOUT_EXIT_CODE)

    threading.Thread(target=_deadline, name="stop-deadline", daemon=True).start()


# How long a role of a vanished `pin up` may take to stop by itself before it exits hard: the embedded PostgreSQL and
# broker end with `pin up` (pin.local.embedded.lifetime), and a stop that still wants them (a relay releasing its
# leases) would otherwise wait for them with its back-off.
ORPHAN_STOP_GRACE_SECONDS = 10.0


def _stop_when_gone(parent_pid: int) -> None:
    """A role of `pin up`: SIGTERM to itself once ``parent_pid`` is no longer its parent (killed with SIGKILL,
    `pin up` cannot stop its children). A signal, so that the API's server stops the way it always does; a stop
    that has not ended after ORPHAN_STOP_GRACE_SECONDS ends the process."""

    def _watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        log = structlog.get_logger(__name__)
        log.warning("pin up is gone; stopping", up_pid=parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_STOP_GRACE_SECONDS)
        log.warning("pin up is gone and the stop is taking too long; exiting", grace_seconds=ORPHAN_STOP_GRACE_SECONDS)
        os._exit(1)

    threading.Thread(target=_watch, name="parent-watch", daemon=True).start()


class NotReadyError(Exception):
    """The dependency answers but is not ready for this role yet (its message says what is missing)."""


def wait_until_reachable(
    what: str, attempt: Callable[[], object], stop: threading.Event, *, max_delay: float = 5.0
) -> bool:
    """Call ``attempt`` until it succeeds (True) or ``stop`` is set (False), with a capped backoff.

    A role started while the database or the broker is down waits here, saying so in its log, and starts
    working as soon as the dependency answers, instead of exiting with a stack trace. An ``attempt`` that raises
    :class:`NotReadyError` was answered: the line says "not ready" and why.
    """
    log = structlog.get_logger(__name__)
    failures = 0
    while not stop.is_set():
        try:
            attempt()
        except Exception as exc:  # noqa: BLE001 - any failure to reach the dependency is retried
            failures += 1
            delay = exponential_backoff(failures, base=0.5, cap=max_delay)
            state = "not ready" if isinstance(exc, NotReadyError) else "unreachable"
            log.warning(f"{what} {state}; waiting", error=error_text(exc), retry_in_seconds=delay)
            stop.wait(delay)
            continue
        return True
    return False
