"""The composition root: where settings, pools, producers, jobs and the API are built. Nothing is built
at import time anywhere else. The API is the contexts' routers and problem tables on the plumbing of ``pin.api``
(:func:`http_contexts`, :func:`build_app`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from psycopg_pool import ConnectionPool

from pin.db import Conn, ConnectionPolicy, connect, create_pool
from pin.observability.logging import error_text
from pin.outbox.writer import RELAY_POLICY, OutboxPolicy
from pin.roles import RoleContext, start_role, wait_until_reachable
from pin.settings import EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS, ConfigurationError, Settings, UnreachableError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from pin.api.app import HttpContext
    from pin.jobs.runner import PollingJob
    from pin.outbox.relay import OutboxRelay, RelayConfig, RelayHooks


# connections of one API instance (every request holds one for its transaction only)
API_POOL_SIZE = 20
# the relay's pool: its publishing loop, its settling thread, its heartbeat, and the gauges and replay jobs beside it
# (its LISTEN connection is its own, outside the pool)
RELAY_POOL_SIZE = 4
# a polling job's pool: one connection more than the job uses, for the gauges (outbox, database health: each
# refresh holds it briefly)
JOB_POOL_SIZE = 3


def run_api(*, host: str, port: int) -> None:
    """Serve the HTTP API until SIGTERM/SIGINT."""
    # imported here: the other roles start faster without the web stack
    from pin.api.server import serve

    context = start_role("api", metrics=False)
    settings = context.settings
    policy = ConnectionPolicy.from_settings(settings, "api")
    # with the database unreachable a request is answered 503 within pin.db.pool_answer_bound_seconds; every
    # session waits at most PIN_API_LOCK_TIMEOUT_SECONDS for a held row (pin.db.ConnectionPolicy), below the pool's wait
    # A fixed size: psycopg's pool grows one connection at a time, so a burst on a held row (every connection
    # waiting its lock timeout) would also wait for the pool to grow, a connection's start each.
    pool = create_pool(
        settings.database.require_url(),
        min_size=API_POOL_SIZE,
        max_size=API_POOL_SIZE,
        name="api",
        timeout=settings.api.pool_timeout_seconds,
        policy=policy,
    )
    try:
        serve(build_app(settings, pool, context.outbox), settings, host=host, port=port)
    finally:
        pool.close()


def http_contexts() -> list[HttpContext]:
    """The contexts that make the API, in the order of their routes: each contributes its ``http`` module's
    router and problem table."""
    # imported here: the other roles start faster without the web stack
    from pin.api.app import HttpContext
    from pin.calendar import http as calendar
    from pin.catalog import http as catalog
    from pin.crm import http as crm
    from pin.news import http as news
    from pin.notifications import http as notifications
    from pin.promotion import http as promotion

    return [HttpContext(c.router, c.PROBLEMS) for c in (calendar, promotion, crm, notifications, catalog, news)]


def build_app(settings: Settings, pool: ConnectionPool[Conn], outbox: OutboxPolicy = RELAY_POLICY) -> FastAPI:
    """The HTTP API of every context (:func:`http_contexts`), writing its events as ``outbox`` says, and the operator
    console under /console."""
    from pin.api.app import create_app
    from pin.console.http import install as install_console

    app = create_app(settings, pool, http_contexts(), outbox)
    install_console(app)
    return app


def build_relay(
    settings: Settings, pool: ConnectionPool[Conn], config: RelayConfig, hooks: RelayHooks | None = None
) -> OutboxRelay:
    """An outbox relay on ``pool`` with a safe producer (idempotent, acks=all, murmur2)."""
    from confluent_kafka import Producer

    from pin.messaging.kafka import ensure_topics, producer_config
    from pin.outbox.relay import OutboxRelay

    def producer() -> Producer:
        overrides = {"message.timeout.ms": config.message_timeout_ms, "client.id": "pin-relay"}
        return Producer(producer_config(settings, **overrides))

    def ensure_topic(topic: str) -> object:
        return ensure_topics(settings, [topic], timeout=5.0)

    return OutboxRelay(
        pool,
        producer,
        config,
        database_url=settings.database.require_url(),
        policy=ConnectionPolicy.from_settings(settings, "relay"),
        ensure_topic=ensure_topic,
        hooks=hooks,
    )


def run_relay(*, once: bool) -> dict[str, int] | None:
    """`pin relay`: publish the outbox until SIGTERM/SIGINT, or (``once``) what is there now, then stop."""
    from pin.outbox.relay import RelayConfig, hooks_for_fault

    context = start_role("relay", metrics=not once, broker=True)
    settings = context.settings
    if settings.outbox.mode == "cdc":
        raise ConfigurationError("PIN_OUTBOX_MODE=cdc: Debezium reads the outbox from the WAL; do not run pin relay")
    settings.kafka.require_bootstrap_servers()
    # every PIN_RELAY_* value was checked when the settings were loaded (a bad one exits 2 with one line)
    config = RelayConfig.from_settings(settings)
    hooks = hooks_for_fault(settings.fault_injection.relay)  # chosen once here: never read in the publishing path
    policy = ConnectionPolicy.from_settings(settings, "relay")
    if not wait_until_reachable("database", _database_answers(settings.database.require_url(), policy), context.stop):
        return None
    pool = _role_pool(settings.database.require_url(), RELAY_POOL_SIZE, "relay", policy)
    try:
        relay = build_relay(settings, pool, config, hooks)
        if not once:
            _export_consumer_waits(settings, pool, context.stop)
            _carry_out_replay_jobs(settings, pool, context.stop)
        totals = relay.run(context.stop, until_empty=once)
        return totals if once else None
    finally:
        pool.close()


def _export_consumer_waits(settings: Settings, pool: ConnectionPool[Conn], stop: threading.Event) -> None:
    """What waits for every consumer group, exported by every relay instance (docs/design/consumer-waits.md): the
    relay runs whenever anything is published, and reads the marks it writes itself."""
    from confluent_kafka.admin import AdminClient

    from pin.consumer_groups import group_reads
    from pin.messaging.kafka import client_config
    from pin.outbox.gauges import refresh_in_background
    from pin.outbox.waiting import ConsumerWaitGauges

    admin = AdminClient(client_config(settings, **{"client.id": "pin-relay-waits"}))
    gauges = ConsumerWaitGauges(group_reads(settings), pool, admin)
    refresh_in_background(gauges, settings.relay.gauge_refresh_seconds, stop, name="consumer-waits")


def _carry_out_replay_jobs(settings: Settings, pool: ConnectionPool[Conn], stop: threading.Event) -> None:
    """The console's replays larger than a page, carried out by every relay: one turn a second, at most
    PIN_CONSOLE_REPLAY_RATE letters a turn (pin/console/replay_jobs.py)."""
    from pin.console.replay_jobs import ReplayJobs
    from pin.outbox.gauges import refresh_in_background

    jobs = ReplayJobs(settings, pool, per_turn=settings.console.replay_rate)
    refresh_in_background(jobs, 1.0, stop, name="replay-jobs")


def run_expire_promotions(*, once: bool) -> dict[str, int] | None:
    """`pin worker expire-promotions`: expire due purchases until SIGTERM/SIGINT, or (``once``) one cycle."""
    from pin.promotion import metrics
    from pin.promotion.expiry import ExpirePromotionsConfig, ExpirePromotionsJob

    def build(pool: ConnectionPool[Conn], role: RoleContext) -> PollingJob:
        settings = role.settings
        interval = settings.jobs.expire_promotions_interval_seconds
        low, high = EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS
        if interval < low:  # allowed (tests, demos), but not what production runs
            structlog.get_logger(__name__).warning(
                f"PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS is below the seed's range of {low // 60} to {high // 60}"
                " minutes: fine for tests and demos, not for production",
                interval_seconds=interval,
            )
        metrics.INTERVAL.set(interval)  # "no cycle for 2 intervals" alert
        config = ExpirePromotionsConfig(
            batch_size=settings.jobs.expire_promotions_batch_size,
            cycle_budget_seconds=settings.jobs.expire_promotions_cycle_budget_seconds,
        )
        # a stop cancels the batch in flight: rolled back whole
        return ExpirePromotionsJob(pool, config, stop=role.stop, outbox=role.outbox)

    return _run_polling_job("expire-promotions", build, lambda s: s.jobs.expire_promotions_interval_seconds, once=once)


def run_appointment_timeout(*, once: bool) -> dict[str, int] | None:
    """`pin worker appointment-timeout`: expire due Pending appointments until SIGTERM/SIGINT, or one cycle."""
    from pin.calendar.expiry import AppointmentTimeoutConfig, AppointmentTimeoutJob

    def build(pool: ConnectionPool[Conn], role: RoleContext) -> PollingJob:
        config = AppointmentTimeoutConfig(
            batch_size=role.settings.jobs.appointment_timeout_batch_size,
            cycle_budget_seconds=role.settings.jobs.appointment_timeout_cycle_budget_seconds,
        )
        # a stop cancels the item in flight: rolled back whole
        return AppointmentTimeoutJob(pool, config, stop=role.stop, outbox=role.outbox)

    return _run_polling_job(
        "appointment-timeout", build, lambda s: s.jobs.appointment_timeout_interval_seconds, once=once
    )


def _run_polling_job(
    role: str,
    build: Callable[[ConnectionPool[Conn], RoleContext], PollingJob],
    interval_of: Callable[[Settings], float],
    *,
    once: bool,
) -> dict[str, int] | None:
    """One polling-job instance: its pool, then one cycle (``once``) or the runner until SIGTERM/SIGINT."""
    from pin.jobs.runner import JobRunner, RunnerConfig
    from pin.observability.database_health import DatabaseHealth
    from pin.operations.pauses import JOB, PauseFlag
    from pin.outbox.gauges import OutboxGauges, refresh_in_background

    context = start_role(role, metrics=not once)
    settings = context.settings
    policy = ConnectionPolicy.from_settings(settings, "worker")
    answers = _database_answers(settings.database.require_url(), policy)
    if once:
        try:
            answers()
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the one line the command prints
            raise UnreachableError(f"database unreachable: {error_text(exc)}") from None
    elif not wait_until_reachable("database", answers, context.stop):  # one line per attempt, as every role
        return None
    pool = _role_pool(settings.database.require_url(), JOB_POOL_SIZE, role, policy)
    try:
        job = build(pool, context)
        if once:
            return dict(job.run_once().as_dict())
        # the outbox gauges from the workers too: the backlog and lag alerts must not go silent when no relay runs
        gauges = OutboxGauges(pool, settings.relay.backlog_count_cap)
        refresh_in_background(gauges, settings.relay.gauge_refresh_seconds, context.stop)
        # the workers run in either outbox mode, so they export the database's health (docs/operations.md)
        DatabaseHealth(pool).start(context.stop, settings.database.health_refresh_seconds)
        paused = PauseFlag(pool, kind=JOB, name=role)  # an operator's pause, read every PAUSE_READ_SECONDS
        JobRunner(job, RunnerConfig(interval_seconds=interval_of(settings)), context.stop, paused).run()
        return None
    finally:
        pool.close()


def run_consumer(group: str) -> None:
    """`pin consume <group>`: one consumer instance of the group until SIGTERM/SIGINT (SPEC section 7)."""
    import time

    from pin.consumer_groups import build_runtime, routes_of
    from pin.messaging.consumer.runtime import pool_size
    from pin.messaging.kafka import missing_topics
    from pin.messaging.topics import dead_letter_topic
    from pin.roles import NotReadyError

    routes = routes_of(group)  # an unknown group is a configuration error (exit 2) before anything starts
    context = start_role(f"consume-{group}", broker=True)
    settings = context.settings
    settings.kafka.require_bootstrap_servers()
    database_url = settings.database.require_url()
    topics = [*routes, dead_letter_topic(group)]

    def topics_exist() -> None:
        # a consumer creates no topic (its principal may not: docs/operations.md, "Access control"); `pin topics`
        # does, with SPEC's partitions. Until its topics exist the consumer waits here, saying which are missing.
        missing = missing_topics(settings, topics, timeout=10.0)
        if missing:
            raise NotReadyError(f"topics missing: {', '.join(missing)} (`pin topics` creates them)")

    if not wait_until_reachable("broker", topics_exist, context.stop):
        return
    policy = ConnectionPolicy.from_settings(settings, "consumer")
    if not wait_until_reachable("database", _database_answers(database_url, policy), context.stop):
        return
    options: dict[str, object] = {}
    if settings.fault_injection.consumer == "hang-after-effect":
        # Test only: freeze after the first effect committed and before its offset commit, for a kill -9.
        def hang(message: object) -> None:
            del message
            structlog.get_logger(__name__).warning("test fault: effect committed, hanging before offset commit")
            while True:
                time.sleep(1)

        options["after_effect"] = hang
    size = pool_size(settings.consumers.lanes)
    pool = _role_pool(database_url, size, f"consume-{group}", policy)
    try:
        build_runtime(group, settings, pool, **options).run(context.stop)
    finally:
        pool.close()


def _database_answers(database_url: str, policy: ConnectionPolicy) -> Callable[[], None]:
    """An attempt for :func:`wait_until_reachable`: open and close one connection to the database."""

    def attempt() -> None:
        connect(database_url, policy=policy).close()

    return attempt


def _role_pool(database_url: str, size: int, name: str, policy: ConnectionPolicy) -> ConnectionPool[Conn]:
    """A role's pool, of a fixed size, as the API's: every connection is opened at the start and kept (psycopg's
    pool would close one unused for 10 minutes), so a server whose connections run out (another client holding
    every slot: the pressure bench's pool-exhaustion phase) leaves the role what it had instead of a pool that
    cannot grow back to what a burst needs."""
    return create_pool(database_url, min_size=size, max_size=size, name=name, policy=policy)
