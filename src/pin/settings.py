"""Typed configuration from the environment (SPEC section 9): every variable is named ``PIN_<FIELD>``.

A bad value stops the process at start with exit code 2 and one line naming the variable (:func:`load_settings`).
A command run where `pin up` runs (its state folder, PIN_HOME) takes the database, broker and development secret
`pin up` recorded there for the variables that are not set, and says so on stderr.
"""

from __future__ import annotations

import fcntl
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

# Defaults stated once: the settings below and the components' own configurations (the runner, the jobs, the
# calendar's policy) take them from here.
JOB_BATCH_SIZE = 200  # BatchSize of both polling jobs (seed 000: AppointmentTimeoutOptions.BatchSize; seed 002)
JOB_INTERVAL_SECONDS = 60  # seconds between a polling job's ticks when no deadline is nearer (seed 000: 60 s)
# The bounds the seeds set on the polling jobs' settings: a tick at least 1 s apart; appointment-timeout's at most
# 60 s apart (seed 000's SLO: expired by its deadline + 60 s + one cycle); expire-promotions' 1 to 5 minutes in
# production (seed 002: below the range it starts with a warning, above it it is refused); a cycle's budget at most
# 30 s (seeds 000 and 002: < 30 s per cycle).
JOB_INTERVAL_MIN_SECONDS = 1
APPOINTMENT_TIMEOUT_INTERVAL_MAX_SECONDS = 60
EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS = (60, 300)
CYCLE_BUDGET_MAX_SECONDS = 30
PENDING_TTL_SECONDS = 86_400  # PendingTtl: 24 h
CANCEL_CUTOFF_MINUTES = 60  # INV-APT-3: an investor cancels or reschedules until StartAt minus this
# The consumer groups (seeds 002 and 003); their topics and group ids derive from these names (pin.messaging.topics).
CONSUMER_GROUPS = ("crm", "notifications", "catalog", "news")
INBOX_RETENTION_SECONDS = 14 * 86_400  # a consumer group's dedup window: inbox rows older than this are pruned


# The shortest HS256 secret the API accepts: as many bytes as SHA-256's output (RFC 7518 section 3.2), which is also
# the length below which PyJWT warns on every token it checks.
JWT_SECRET_MIN_BYTES = 32


class ConfigurationError(Exception):
    """The environment holds a bad configuration value."""


class UnreachableError(Exception):
    """A one-shot command could not reach the database or the broker: the CLI prints one line and exits 1."""


class ContractMigration(BaseModel):
    """One event type's move to its successor contract (PIN_CONTRACT_MIGRATIONS, docs/runbooks/contract-migration.md)"""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # "dual": every producer path writes the v1 and the v2 row of each event, with the same MessageId, in the same
    # transaction; "v2": the sunset, v1 rows stop (refused while a group still reads v1, unless force_sunset).
    publish: Literal["dual", "v2"] = "dual"
    # When dual-publish was turned on, and by when every group reads v2: the window, at most the inbox's dedup
    # window (a group moved to v2 reads the v2 topic from its start; its inbox absorbs what it applied from v1).
    since: AwareDatetime
    deadline: AwareDatetime
    # The consumer groups that read v2 of this event type (the others read v1): moving one is this setting.
    v2_groups: tuple[str, ...] = ()
    # Sunset although a group still reads v1 (it then reads nothing new of this event type).
    force_sunset: bool = False

    @model_validator(mode="after")
    def _window_and_groups(self) -> ContractMigration:
        if self.deadline <= self.since:
            raise ValueError("deadline must be after since")
        unknown = sorted(set(self.v2_groups) - set(CONSUMER_GROUPS))
        if unknown:
            raise ValueError(f"v2_groups: unknown consumer group(s) {', '.join(unknown)}")
        return self


class Settings(BaseSettings):
    """Every setting of every role; read once, at start, in the composition root."""

    model_config = SettingsConfigDict(env_prefix="PIN_", frozen=True, extra="ignore")

    # PostgreSQL URL; None means `pin up` starts an embedded server (other roles require it).
    database_url: str | None = None
    # A network that drops packets (docs/operations.md, "A network that drops packets"): every connection of
    # every role detects a dead peer within about keepalives_idle + keepalives_interval x keepalives_count seconds
    # when idle, and within tcp_user_timeout when it has sent something unanswered. A URL's own parameters win.
    # Seconds libpq waits for a new connection (connect_timeout).
    database_connect_timeout_seconds: int = Field(default=5, ge=1, le=300)
    # Seconds of silence before the first TCP keepalive probe, on both ends (libpq and the server's session).
    database_keepalives_idle_seconds: int = Field(default=5, ge=1, le=7_200)
    # Seconds between unanswered keepalive probes, on both ends.
    database_keepalives_interval_seconds: int = Field(default=2, ge=1, le=600)
    # Unanswered probes after which the connection is dead, on both ends.
    database_keepalives_count: int = Field(default=3, ge=1, le=100)
    # Milliseconds sent data may stay unacknowledged before the connection is dead (TCP_USER_TIMEOUT), both ends.
    database_tcp_user_timeout_ms: int = Field(default=10_000, ge=1_000, le=3_600_000)
    # The server ends a session idle inside a transaction this long (its locks and leases go with it).
    database_idle_in_transaction_timeout_ms: int = Field(default=10_000, ge=1_000, le=3_600_000)
    # How often the server checks, while running a query, that the client is still there (0 disables).
    database_client_connection_check_interval_ms: int = Field(default=2_000, ge=0, le=600_000)
    # The longest a pool's check of an idle connection waits for its answer before discarding it.
    database_check_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    # Seconds a request waits for a pooled connection before it is answered 503 (the database is unreachable).
    api_pool_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    # statement_timeout of the API's sessions: a request's statement that runs longer fails (503).
    api_statement_timeout_ms: int = Field(default=5_000, ge=100, le=3_600_000)
    # statement_timeout of the workers' sessions (an item's or a batch's statement; expire-promotions SETs its
    # own 60 s per batch transaction).
    worker_statement_timeout_ms: int = Field(default=10_000, ge=100, le=3_600_000)
    # statement_timeout of the relay's sessions (its reads, deletes and lease statements).
    relay_statement_timeout_ms: int = Field(default=10_000, ge=100, le=3_600_000)
    # statement_timeout of the consumers' sessions (a batch's statements).
    consumer_statement_timeout_ms: int = Field(default=30_000, ge=100, le=3_600_000)
    # statement_timeout of the one-shot commands (pin status, pin dlq, pin outbox); migrations have none.
    command_statement_timeout_ms: int = Field(default=30_000, ge=100, le=3_600_000)
    # Seconds a role may take to stop after SIGTERM before it exits anyway (a call blocked on a dead connection;
    # what it did not commit the server rolls back).
    stop_timeout_seconds: float = Field(default=15.0, gt=0, le=600)

    # Kafka bootstrap servers, comma separated; None means `pin up` starts an embedded broker.
    kafka_bootstrap_servers: str | None = None
    # Extra librdkafka settings passed through verbatim (SASL, TLS), ";"-separated key=value pairs,
    # e.g. "security.protocol=SASL_SSL;sasl.mechanism=PLAIN".
    kafka_client_config: str = ""
    # Consumer group session timeout; also how long a group join waits for members.
    kafka_session_timeout_ms: int = Field(default=10_000, ge=1_000, le=300_000)
    # The largest record the dead-letter producer sends (its message.max.bytes, headers included); a consumed value
    # larger than this is unreadable. A dead letter that does not fit is sent cut, its full bytes in the database.
    kafka_max_message_bytes: int = Field(default=1_000_000, ge=16_384, le=100_000_000)
    # Consumers only (librdkafka fetch.wait.max.ms; producers never see it): the longest the broker holds a fetch
    # that found nothing new. An idle consumer sends about 1000/N fetch requests per second to each broker it reads
    # from; a broker that answers an empty fetch only at this deadline (the embedded one) delays a new message by up
    # to N ms. Measured end to end (bench e2e, 2,000 deadlines): the consumers' hop p50/p99 was 132/260 ms at
    # librdkafka's 500, 21/64 at 100, 16/37 at 50 and 4/50 at 10. 50 keeps the end-to-end p99 under 150 ms for
    # 20 idle fetches per second; 10 would save about 12 ms at the median for five times the requests.
    kafka_consumer_fetch_wait_max_ms: int = Field(default=50, ge=1, le=60_000)
    # librdkafka socket.timeout.ms: the longest a request to a silent broker waits for its answer (every client;
    # TCP keepalives are on too). librdkafka's 60 s would let a cut link hold a relay's batch that long.
    kafka_socket_timeout_ms: int = Field(default=10_000, ge=1_000, le=300_000)
    # librdkafka request.timeout.ms of the producers: the longest a produce request waits for the broker's ack
    # (then it is retried within the relay's message.timeout.ms).
    kafka_request_timeout_ms: int = Field(default=5_000, ge=1_000, le=300_000)
    # Consumers only (librdkafka max.poll.interval.ms): a member that does not come back to poll within this is
    # removed from its group, so one stuck member cannot hold a rebalance longer. Above the longest a batch can
    # take (its statements each bounded by PIN_CONSUMER_STATEMENT_TIMEOUT_MS, a dead database found within
    # seconds) and never below the session timeout.
    kafka_max_poll_interval_ms: int = Field(default=60_000, ge=10_000, le=3_600_000)
    # Consumers: how often each instance records its membership of its group (its row of messaging.consumer_member:
    # partitions held, heartbeat); a row 3 intervals old is not a member. One upsert per interval, never per message.
    consumer_membership_heartbeat_seconds: float = Field(default=5.0, ge=0.1, le=600)
    # Consumers: lanes per partition. Messages are dealt to lanes by key (one key's in offset order in one lane) and
    # the lanes apply their batches concurrently, each on its own connection; a message in retry holds back only the
    # later messages of its key. 1: the partition is one lane, handled by the loop (a retry holds the partition).
    # 1 by default (docs/design/consumers.md, "Lanes": the measurement, and why not 2 yet).
    consumer_lanes: int = Field(default=1, ge=1, le=64)
    # Consumers: how many messages of a partition may be in hand past its committed offset (the lowest offset not
    # yet applied) before the partition is paused until the lanes catch up; bounds a key held in retry's memory.
    consumer_max_ahead: int = Field(default=10_000, ge=1, le=1_000_000)
    # Consumers: attempts at a message that cannot be read or does not satisfy its contract before it goes to the
    # group's dead-letter topic (at least 2: one more read, after a short back-off). Nothing else is dead-lettered
    # by itself: every other failure is retried without limit (pin.faults.TREATMENTS).
    consumer_unreadable_attempts: int = Field(default=3, ge=2, le=100)
    # `pin status`: a group whose live members have held no partition for longer than this is wedged (0: derived,
    # 2 x PIN_KAFKA_SESSION_TIMEOUT_MS + PIN_KAFKA_MAX_POLL_INTERVAL_MS, the longest a healthy rebalance waits).
    consumer_wedged_after_seconds: float = Field(default=0.0, ge=0, le=86_400)
    # Consumers: how long a group's inbox keeps a MessageId (its dedup window): a redelivery or a copy on another
    # topic (a contract migration's v2 row) within it is skipped; the runtime prunes older rows.
    consumer_inbox_retention_seconds: float = Field(default=INBOX_RETENTION_SECONDS, ge=3_600, le=366 * 86_400)
    # Partitions of each topic the system creates (`pin topics`, `pin up`, a role creating a missing topic): the
    # most busy consumers of a group per topic. Never changes an existing topic (docs/operations.md: changing it).
    kafka_topic_partitions: int = Field(default=3, ge=1, le=10_000)
    # The Kafka principal of each role, as the cluster's authorizer names it (`pin acls` grants exactly what that
    # role's code calls); each role's process authenticates as it through its own PIN_KAFKA_CLIENT_CONFIG.
    kafka_principal_relay: str = "User:pin-relay"
    # The principal of the crm consumer group's instances.
    kafka_principal_crm: str = "User:pin-crm"
    # The principal of the notifications consumer group's instances.
    kafka_principal_notifications: str = "User:pin-notifications"
    # The principal of the catalog consumer group's instances.
    kafka_principal_catalog: str = "User:pin-catalog"
    # The principal of the news consumer group's instances.
    kafka_principal_news: str = "User:pin-news"
    # The principal of the operator's commands: `pin topics`, `pin dlq list|replay`, `pin status`.
    kafka_principal_operator: str = "User:pin-operator"
    # HS256 secret for bearer tokens (at least JWT_SECRET_MIN_BYTES).
    jwt_secret: SecretStr | None = None
    # RS256 public key (PEM) for bearer tokens; takes precedence over the secret when both are set.
    jwt_public_key: str | None = None
    # The longest a bearer token may live: a token whose exp is further than this from now (or from its iat)
    # is refused, so that a leaked token cannot be minted to last for ever.
    jwt_max_lifetime_seconds: int = Field(default=86_400, gt=0, le=31_536_000)
    # The operator console's Prometheus (its base URL, e.g. http://prometheus:9090): the pages link their charts
    # there; unset, they say that there are none.
    console_prometheus_url: str | None = None
    # The most dead letters a replay job sends per second, per job and relay instance (pin/console/replay_jobs.py).
    console_replay_rate: int = Field(default=100, ge=1, le=10_000)
    # The most bytes of a request line and headers the HTTP server buffers (h11's max_incomplete_event_size);
    # a larger head is answered 431. At least 16 KiB: the API itself refuses a bearer token above 8 KiB.
    http_max_header_bytes: int = Field(default=65_536, ge=16_384, le=1_048_576)
    # The most bytes of a request body the API reads; a larger one is answered 413 before (Content-Length) or as
    # soon as (chunked) it passes the limit. The largest body of the API is a few KiB: 64 KiB leaves room.
    http_max_body_bytes: int = Field(default=65_536, ge=1_024, le=16_777_216)
    # How long a client may take to send a whole request head, from the connection's start (or, on a kept-alive
    # connection, from the next request's first byte): a connection that sends nothing, or trickles its head, is
    # closed after this (408 when it sent part of a head).
    http_head_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # How long an idle keep-alive connection stays open after a response before the server closes it. Longer than
    # the idle expiry of common client pools (httpx 5 s, aiohttp 15 s) and load balancers (60 s): a client that
    # reuses a connection the server is closing sees its request dropped.
    http_keep_alive_timeout_seconds: float = Field(default=65.0, gt=0, le=600)
    # The most open client connections the API serves; a request on a connection beyond it is a 503 problem
    # document and the connection is closed. The process's open-files limit is raised to this plus headroom.
    http_max_connections: int = Field(default=1_000, ge=10, le=100_000)
    # The longest an API transaction waits for a row (or table) lock another transaction holds: then its
    # statement fails and the request is a 409 (retryable). Below PIN_API_POOL_TIMEOUT_SECONDS, so that a
    # request of another tenant always gets a connection while every one is waiting on a held row.
    api_lock_timeout_seconds: float = Field(default=2.0, gt=0, le=60)

    # PendingTtl: how long an agent has to decide on a Pending appointment.
    appointment_pending_ttl_seconds: int = Field(default=PENDING_TTL_SECONDS, gt=0)
    # INV-APT-3: an investor may cancel or reschedule until StartAt minus this many minutes.
    appointment_cancel_cutoff_minutes: int = Field(default=CANCEL_CUTOFF_MINUTES, ge=0)
    # appointment-timeout polling interval (seed 000: 60 s; 1 to 60 s).
    appointment_timeout_interval_seconds: float = Field(
        default=JOB_INTERVAL_SECONDS, ge=JOB_INTERVAL_MIN_SECONDS, le=APPOINTMENT_TIMEOUT_INTERVAL_MAX_SECONDS
    )
    # appointment-timeout BatchSize (seed 000: 200).
    appointment_timeout_batch_size: int = Field(default=JOB_BATCH_SIZE, gt=0, le=10_000)
    # appointment-timeout's time budget per cycle (seed 000: < 30 s): then it claims nothing more until the next tick.
    appointment_timeout_cycle_budget_seconds: float = Field(
        default=CYCLE_BUDGET_MAX_SECONDS, gt=0, le=CYCLE_BUDGET_MAX_SECONDS
    )
    # expire-promotions polling interval (seed 002: 1 to 5 minutes in production; below 1 minute, a warning at start).
    expire_promotions_interval_seconds: float = Field(
        default=JOB_INTERVAL_SECONDS, ge=JOB_INTERVAL_MIN_SECONDS, le=EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS[1]
    )
    # expire-promotions BatchSize (seed 002: 200).
    expire_promotions_batch_size: int = Field(default=JOB_BATCH_SIZE, gt=0, le=10_000)
    # expire-promotions' time budget per cycle (seed 002: < 30 s): then it writes nothing more until the next tick.
    expire_promotions_cycle_budget_seconds: float = Field(
        default=CYCLE_BUDGET_MAX_SECONDS, gt=0, le=CYCLE_BUDGET_MAX_SECONDS
    )

    # Seconds between refreshes of the database-health gauges (pin_db_*: dead tuples, last vacuum, claim index size,
    # oldest transaction, replication slots' WAL), which each worker instance exports: a few bounded statements.
    database_health_refresh_seconds: float = Field(default=30, gt=0)

    # Port of this role's /metrics endpoint; None disables it.
    metrics_port: int | None = Field(default=None, ge=0, le=65_535)
    # Address the /metrics endpoint binds to; "0.0.0.0" lets a Prometheus on another host scrape it.
    metrics_host: str = "127.0.0.1"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # "json" always, "console" always, or "auto": console when stderr is a terminal.
    log_format: Literal["json", "console", "auto"] = "auto"
    # The state folder of `pin up`: embedded database, development secret, and the endpoints other commands read.
    home: str = ".pin"
    # Set by `pin up` for the processes it runs (its own pid): a role stops once that process is gone, so that
    # a `pin up` killed with SIGKILL leaves no role running. Unset: a role runs until it is told to stop.
    up_pid: int | None = Field(default=None, gt=0)

    # Who takes the rows out of the outbox: "relay" (`pin relay` publishes and deletes them) or "cdc" (each row is
    # deleted in the transaction that wrote it; Debezium reads the insert from the WAL: docs/runbooks/outbox-cdc.md).
    # The same in every process of a deployment; `pin relay` refuses to start in cdc mode.
    outbox_mode: Literal["relay", "cdc"] = "relay"
    # cdc mode: the logical replication slot the Debezium connector reads (its slot.name, deploy/debezium/);
    # `pin status` shows the WAL it keeps.
    outbox_cdc_slot: str = Field(default="pin_outbox", pattern=r"^[a-z0-9_]{1,63}$")

    # The relay (`pin relay`); see docs/design/relay.md. Each must be greater than 0.
    # Rows per batch (about: spread evenly over the owned vparts, at least 8 each); one DELETE per batch.
    relay_batch_size: int = 2000
    # Batches handed to the broker and not yet awaited, at most; with the one settling, a kill -9 sends at most
    # (this + 1) x the batch size again. 2: more measured no faster on a local broker (docs/design/relay.md).
    relay_batches_in_flight: int = 2
    # Seconds between reads when no NOTIFY arrives (the fallback: NOTIFY is lost across reconnects).
    relay_poll_interval_seconds: float = 1.0
    # Seconds between lease renewals (and acquisitions of a fair share).
    relay_heartbeat_seconds: float = 1.0
    # Lease lifetime on the database clock: a dead instance's vparts are taken over after at most this.
    relay_lease_ttl_seconds: float = 5.0
    # Failures of a row (broker unavailability not counted) before it is dead-lettered.
    relay_max_attempts: int = 10
    # First retry delay of a failed row; doubles per attempt, with +-20 % jitter.
    relay_backoff_base_seconds: float = 0.5
    # Longest retry delay; also how long a drained broker outage can delay a row after the broker returns.
    relay_backoff_max_seconds: float = 15.0
    # librdkafka message.timeout.ms: a send fails after this, so a batch never hangs on a dead broker.
    relay_message_timeout_ms: int = 10_000
    # A relay that has had batches out this long with no acknowledgement (a broker it cannot reach) stops reading,
    # settles what is out and gives its leases up, so another relay takes its keys; it takes its share back once
    # the broker answers. Greater than message.timeout.ms: none of its sends can land after the new owner's.
    relay_undelivered_give_up_seconds: float = 15.0
    # Seconds between refreshes of the outbox backlog, lag and dead-letter gauges (by the relay and the workers).
    relay_gauge_refresh_seconds: float = 5.0
    # Cap of the dead-letter gauge's count (the backlog and lag gauges count every waiting row, past the floors).
    relay_backlog_count_cap: int = 100_000
    # Contract migrations in progress, by event type (JSON: {"<event type>": {"since": ..., "deadline": ...,
    # "publish": "dual"|"v2", "v2_groups": [...], "force_sunset": false}}): see ContractMigration and
    # docs/runbooks/contract-migration.md. Checked at every role's start (pin.messaging.migrations).
    contract_migrations: dict[str, ContractMigration] = Field(default_factory=dict)

    # Test only, never set in production: `pin relay` freezes at ``after-produce|after-ack[:N]`` (of batch N).
    relay_test_fault: str = ""
    # Test only, never set in production: ``hang-after-effect`` freezes a consumer after its first effect commits.
    consumer_test_fault: str = ""

    @field_validator(
        "relay_batch_size",
        "relay_batches_in_flight",
        "relay_poll_interval_seconds",
        "relay_heartbeat_seconds",
        "relay_lease_ttl_seconds",
        "relay_max_attempts",
        "relay_backoff_base_seconds",
        "relay_backoff_max_seconds",
        "relay_message_timeout_ms",
        "relay_undelivered_give_up_seconds",
        "relay_gauge_refresh_seconds",
        "relay_backlog_count_cap",
        mode="before",
    )
    @classmethod
    def _relay_number(cls, raw: Any, info: ValidationInfo) -> Any:
        """A positive number; an empty variable means the default (ConfigurationError names the variable)."""
        assert info.field_name is not None
        field = cls.model_fields[info.field_name]
        if not isinstance(raw, str):
            return raw
        if raw == "":
            return field.default
        name = f"PIN_{info.field_name.upper()}"
        caster = int if field.annotation is int else float
        try:
            value = caster(raw)
        except ValueError:
            raise ConfigurationError(f"{name}: expected a number, got {raw!r}") from None
        if value <= 0:
            raise ConfigurationError(f"{name}: must be greater than 0")
        return value

    @field_validator(
        "kafka_principal_relay",
        "kafka_principal_crm",
        "kafka_principal_notifications",
        "kafka_principal_catalog",
        "kafka_principal_news",
        "kafka_principal_operator",
    )
    @classmethod
    def _kafka_principal(cls, value: str) -> str:
        """``Type:name`` (``User:pin-relay``), as Kafka's authorizer writes a principal."""
        kind, sep, name = value.partition(":")
        if not sep or not kind.strip() or not name.strip() or value != value.strip():
            raise ValueError("expected a Kafka principal such as User:pin-relay")
        return value

    def wedged_after_seconds(self) -> float:
        """How long a group's live members may hold no partition before `pin status` calls the group wedged."""
        if self.consumer_wedged_after_seconds:
            return self.consumer_wedged_after_seconds
        derived_ms = 2 * self.kafka_session_timeout_ms + max(
            self.kafka_max_poll_interval_ms, self.kafka_session_timeout_ms
        )
        return derived_ms / 1000

    def kafka_principal(self, role: str) -> str:
        """The Kafka principal of ``role`` (relay, a consumer group, operator)."""
        principal: str = getattr(self, f"kafka_principal_{role}")
        return principal

    @model_validator(mode="after")
    def _migration_window_within_the_inbox_dedup_window(self) -> Settings:
        for event_type, migration in self.contract_migrations.items():
            window = (migration.deadline - migration.since).total_seconds()
            if window > self.consumer_inbox_retention_seconds:
                dedup = self.consumer_inbox_retention_seconds
                raise ValueError(
                    f"contract_migrations[{event_type}]: the window since..deadline ({window:.0f} s) exceeds the"
                    f" inbox dedup window PIN_CONSUMER_INBOX_RETENTION_SECONDS ({dedup:.0f} s)"
                )
        return self

    @model_validator(mode="after")
    def _relay_lease_outlives_heartbeats(self) -> Settings:
        if self.relay_lease_ttl_seconds < 2 * self.relay_heartbeat_seconds:
            raise ConfigurationError("PIN_RELAY_LEASE_TTL_SECONDS: must be at least twice the heartbeat")
        return self

    @model_validator(mode="after")
    def _api_lock_wait_below_the_pool_wait(self) -> Settings:
        if self.api_lock_timeout_seconds >= self.api_pool_timeout_seconds:
            raise ConfigurationError("PIN_API_LOCK_TIMEOUT_SECONDS: must be less than PIN_API_POOL_TIMEOUT_SECONDS")
        return self

    @model_validator(mode="after")
    def _relay_gives_up_after_its_sends_expire(self) -> Settings:
        if self.relay_undelivered_give_up_seconds * 1000 <= self.relay_message_timeout_ms:
            raise ConfigurationError(
                "PIN_RELAY_UNDELIVERED_GIVE_UP_SECONDS: must be greater than PIN_RELAY_MESSAGE_TIMEOUT_MS / 1000"
            )
        return self

    @model_validator(mode="after")
    def _jwt_key_is_usable(self) -> Settings:
        if self.jwt_secret is not None and len(self.jwt_secret.get_secret_value().encode()) < JWT_SECRET_MIN_BYTES:
            raise ConfigurationError(
                f"PIN_JWT_SECRET: at least {JWT_SECRET_MIN_BYTES} bytes (an HS256 key as long as its hash, RFC 7518 "
                f"section 3.2); `openssl rand -base64 {JWT_SECRET_MIN_BYTES}` makes one"
            )
        if self.jwt_public_key:
            # a key that cannot be loaded would let the API start and refuse every token: fail at start instead
            try:
                serialization.load_pem_public_key(self.jwt_public_key.encode())
            except (ValueError, TypeError, UnsupportedAlgorithm):
                raise ValueError("PIN_JWT_PUBLIC_KEY must be a PEM public key") from None
        return self

    def require_database_url(self) -> str:
        """The database URL, or a configuration error for roles that cannot start an embedded server."""
        if not self.database_url:
            raise ConfigurationError("PIN_DATABASE_URL is not set (only `pin up` starts an embedded PostgreSQL)")
        return self.database_url

    def require_kafka(self) -> str:
        """The bootstrap servers, or a configuration error for roles that cannot start an embedded broker."""
        if not self.kafka_bootstrap_servers:
            raise ConfigurationError("PIN_KAFKA_BOOTSTRAP_SERVERS is not set (only `pin up` starts an embedded broker)")
        return self.kafka_bootstrap_servers

    def kafka_extra_config(self) -> dict[str, str]:
        """PIN_KAFKA_CLIENT_CONFIG parsed into librdkafka settings."""
        pairs = [item for item in self.kafka_client_config.split(";") if item.strip()]
        config: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigurationError(f"PIN_KAFKA_CLIENT_CONFIG: expected key=value, got {pair!r}")
            config[key.strip()] = value.strip()
        return config


def load_settings(*, from_pin_up: bool = True) -> Settings:
    """Read the settings, turning a validation error into one line that names the variable.

    With ``from_pin_up`` (every command but `pin up` itself), what the environment leaves unset among the
    database, the broker and the JWT secret comes from the `pin up` running in the state folder, if one does.
    """
    try:
        settings = Settings()
        settings.kafka_extra_config()
        if from_pin_up:
            settings = _with_pin_up_endpoints(settings)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else ""
        name = f"PIN_{field.upper()}" if field else "configuration"
        raise ConfigurationError(f"{name}: {error['msg']}") from None
    return settings


def _with_pin_up_endpoints(settings: Settings) -> Settings:
    """``settings`` completed from the endpoints of the running `pin up`, with one line on stderr saying which."""
    unset = {
        "database_url": not settings.database_url,
        "kafka_bootstrap_servers": not settings.kafka_bootstrap_servers,
        "jwt_secret": settings.jwt_secret is None and not settings.jwt_public_key,
    }
    missing = {name for name, is_unset in unset.items() if is_unset}
    if not missing:
        return settings
    home = state_folder_of(settings.home)
    endpoints = running_endpoints(home)
    if endpoints is None:
        return settings
    found: dict[str, str | None] = {
        "database_url": endpoints.database_url,
        "kafka_bootstrap_servers": endpoints.kafka_bootstrap_servers,
        "jwt_secret": read_dev_secret(home, endpoints),
    }
    taken = {name: value for name, value in found.items() if name in missing and value}
    if not taken:
        return settings
    names = ", ".join(f"PIN_{name.upper()}" for name in taken)
    sys.stderr.write(f"pin: {names} from {endpoints.describe(home)}\n")
    return Settings.model_validate(taken)  # the environment still supplies every other field


# The state folder of `pin up` (PIN_HOME, default ``.pin``), as every command reads it. `pin up` holds an exclusive
# lock on UP_LOCK_FILE while it runs (the kernel drops it when the process dies, even by kill -9) and writes
# UP_ENDPOINTS_FILE once everything is started (pin.local.state_folder); a command reads that file only while the
# lock is held, so a file left behind by a `pin up` that is gone is ignored.
UP_LOCK_FILE = "up.lock"
UP_ENDPOINTS_FILE = "endpoints.json"
# What `pin up` printed for a person (its banner; with --demo the sample data, tokens and curl lines), owner-only:
# `pin status --demo` prints it again once the roles' lines have scrolled it away.
UP_BANNER_FILE = "banner.txt"


@dataclass(frozen=True)
class PinUpEndpoints:
    """What a running `pin up` serves, as other commands need it."""

    pid: int
    started_at: str
    api_url: str
    database_url: str
    kafka_bootstrap_servers: str
    # the file (in the state folder) holding the generated development secret, when `pin up` generated one
    jwt_secret_file: str | None

    def describe(self, home: Path) -> str:
        """Which `pin up` this is, in a few words."""
        return f"the `pin up` in {home} (pid {self.pid}, started {self.started_at}, API {self.api_url})"


def state_folder_of(path: str) -> Path:
    """The absolute state folder for the PIN_HOME setting ``path``."""
    return Path(path).expanduser().resolve()


def _is_held(home: Path) -> bool:
    """Whether a `pin up` holds the folder's lock right now."""
    try:
        with (home / UP_LOCK_FILE).open("r") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except OSError:
        return False


def running_endpoints(home: Path) -> PinUpEndpoints | None:
    """The endpoints of the `pin up` running in ``home``, or None when none runs there."""
    path = home / UP_ENDPOINTS_FILE
    if not path.exists() or not _is_held(home):
        return None
    try:
        return PinUpEndpoints(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running_banner(home: Path) -> str | None:
    """What the `pin up` running in ``home`` printed for a person, or None when none runs there."""
    if running_endpoints(home) is None:
        return None
    try:
        return (home / UP_BANNER_FILE).read_text()
    except OSError:
        return None


def read_dev_secret(home: Path, endpoints: PinUpEndpoints) -> str | None:
    """The development secret `pin up` generated, if it did."""
    if endpoints.jwt_secret_file is None:
        return None
    try:
        return (home / endpoints.jwt_secret_file).read_text().strip() or None
    except OSError:
        return None
