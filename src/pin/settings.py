"""Typed configuration from the environment (SPEC section 9), in sections: ``settings.relay.batch_size``.

Every setting is one ``PIN_*`` variable, named on its field (``validation_alias``) exactly as operators set it: the
sections group the fields for the code, never the names (not the default nesting's ``PIN_RELAY__<FIELD>``). A bad
value stops the process at start with exit code 2 and one line naming the variable (:func:`load_settings`); a
``PIN_*`` variable that is neither a setting nor one of :data:`OTHER_VARIABLES` gets one warning line naming the
closest setting. Code builds settings by variable too: ``Settings.model_validate({"relay_batch_size": 500})``.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, NamedTuple

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
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

# The bounds the seeds set on the polling jobs' settings, and the defaults both jobs share: BatchSize 200 (seed 000:
# AppointmentTimeoutOptions.BatchSize; seed 002), a tick every 60 s when no deadline is nearer, at least 1 s apart;
# appointment-timeout's at most 60 s apart (seed 000's SLO: expired by its deadline + 60 s + one cycle);
# expire-promotions' 1 to 5 minutes in production (seed 002: below the range it starts with a warning, above it it
# is refused); a cycle's budget at most 30 s (seeds 000 and 002: < 30 s per cycle), the budget's default too.
JOB_BATCH_SIZE = 200
JOB_INTERVAL_SECONDS = 60
JOB_INTERVAL_MIN_SECONDS = 1
APPOINTMENT_TIMEOUT_INTERVAL_MAX_SECONDS = 60
EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS = (60, 300)
CYCLE_BUDGET_MAX_SECONDS = 30
# The consumer groups (seeds 002 and 003); their topics and group ids derive from these names (pin.messaging.topics).
# Here, at the bottom, because settings name them: a principal per group, a contract migration's v2_groups.
CONSUMER_GROUPS = ("crm", "notifications", "catalog", "news")
# The shortest HS256 secret the API accepts: as many bytes as SHA-256's output (RFC 7518 section 3.2), which is also
# the length below which PyJWT warns on every token it checks.
JWT_SECRET_MIN_BYTES = 32

# The PIN_* variables that are not settings, and who reads them: never warned about (a role inherits the environment
# of whoever started it: `PIN_TEST_DATABASE_URL=... make test` runs roles too).
OTHER_VARIABLES: Mapping[str, str] = {
    "PIN_TEST_DATABASE_URL": "the tests: a PostgreSQL server to use instead of an embedded one",
    "PIN_TEST_ROLE_SOURCE": "the tests: run the roles from an older source tree",
    "PIN_TEST_INTERRUPTED_MARKER": "tests/foundation/test_interrupted_run.py's child run",
    "PIN_TEST_RECORD_CONSUMER_SERIES": "tests/ops/test_consumer_sla_prometheus.py: record what Prometheus scraped",
    "PIN_SOAK_FAULT_SECONDS": "the soak test: how long each fault lasts",
    "PIN_SCREENSHOTS_DIR": "tests/console/screenshots.py: where the console's screenshots go",
    "PIN_BENCH_DURABLE_DATABASE_URL": "bench/pressure.py: a durable server to run on",
    "PIN_BENCH_DURABLE_STOP_COMMAND": "bench/pressure.py: stops that server",
    "PIN_BENCH_DURABLE_START_COMMAND": "bench/pressure.py: starts that server",
    "PIN_BENCH_PROFILE_CLOCK": "bench/where_time_goes.py: a profiled role's clock (thread)",
    "PIN_BENCH_PROFILE_UNPROFILED_ITEMS": "bench/where_time_goes.py: items run unprofiled",
    "PIN_CDC_DATABASE_HOST": "the Debezium connector (deploy/debezium/): the database it reads",
    "PIN_CDC_DATABASE_PASSWORD": "the Debezium connector (deploy/debezium/): its password",
}


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


# A role's statement_timeout, in milliseconds: 100 ms to an hour.
StatementTimeoutMs = Annotated[int, Field(ge=100, le=3_600_000)]


class Section(BaseModel):
    """A group of settings; each field's ``validation_alias`` is its variable. ``Section()`` holds the defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)


class DatabaseSettings(Section):
    """PostgreSQL: where it is, how every role's connections detect a dead peer, each role's statement timeout."""

    # PostgreSQL URL; None means `pin up` starts an embedded server (other roles require it).
    url: str | None = Field(default=None, validation_alias="PIN_DATABASE_URL")
    # A network that drops packets (docs/operations.md, "A network that drops packets"): every connection of
    # every role detects a dead peer within about keepalives_idle + keepalives_interval x keepalives_count seconds
    # when idle, and within tcp_user_timeout when it has sent something unanswered. A URL's own parameters win.
    # Seconds libpq waits for a new connection (connect_timeout).
    connect_timeout_seconds: int = Field(
        default=5, ge=1, le=300, validation_alias="PIN_DATABASE_CONNECT_TIMEOUT_SECONDS"
    )
    # Seconds of silence before the first TCP keepalive probe, on both ends (libpq and the server's session).
    keepalives_idle_seconds: int = Field(
        default=5, ge=1, le=7_200, validation_alias="PIN_DATABASE_KEEPALIVES_IDLE_SECONDS"
    )
    # Seconds between unanswered keepalive probes, on both ends.
    keepalives_interval_seconds: int = Field(
        default=2, ge=1, le=600, validation_alias="PIN_DATABASE_KEEPALIVES_INTERVAL_SECONDS"
    )
    # Unanswered probes after which the connection is dead, on both ends.
    keepalives_count: int = Field(default=3, ge=1, le=100, validation_alias="PIN_DATABASE_KEEPALIVES_COUNT")
    # Milliseconds sent data may stay unacknowledged before the connection is dead (TCP_USER_TIMEOUT), both ends.
    tcp_user_timeout_ms: int = Field(
        default=10_000, ge=1_000, le=3_600_000, validation_alias="PIN_DATABASE_TCP_USER_TIMEOUT_MS"
    )
    # The server ends a session idle inside a transaction this long (its locks and leases go with it).
    idle_in_transaction_timeout_ms: int = Field(
        default=10_000, ge=1_000, le=3_600_000, validation_alias="PIN_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS"
    )
    # How often the server checks, while running a query, that the client is still there (0 disables).
    client_connection_check_interval_ms: int = Field(
        default=2_000, ge=0, le=600_000, validation_alias="PIN_DATABASE_CLIENT_CONNECTION_CHECK_INTERVAL_MS"
    )
    # The longest a pool's check of an idle connection waits for its answer before discarding it.
    check_timeout_seconds: float = Field(
        default=2.0, gt=0, le=60, validation_alias="PIN_DATABASE_CHECK_TIMEOUT_SECONDS"
    )
    # statement_timeout of the API's sessions: a request's statement that runs longer fails (503).
    api_statement_timeout_ms: StatementTimeoutMs = Field(default=5_000, validation_alias="PIN_API_STATEMENT_TIMEOUT_MS")
    # statement_timeout of the workers' sessions (an item's or a batch's statement; expire-promotions SETs its
    # own 60 s per batch transaction).
    worker_statement_timeout_ms: StatementTimeoutMs = Field(
        default=10_000, validation_alias="PIN_WORKER_STATEMENT_TIMEOUT_MS"
    )
    # statement_timeout of the relay's sessions (its reads, deletes and lease statements).
    relay_statement_timeout_ms: StatementTimeoutMs = Field(
        default=10_000, validation_alias="PIN_RELAY_STATEMENT_TIMEOUT_MS"
    )
    # statement_timeout of the consumers' sessions (a batch's statements).
    consumer_statement_timeout_ms: StatementTimeoutMs = Field(
        default=30_000, validation_alias="PIN_CONSUMER_STATEMENT_TIMEOUT_MS"
    )
    # statement_timeout of the one-shot commands (pin status, pin dlq, pin outbox); migrations have none.
    command_statement_timeout_ms: StatementTimeoutMs = Field(
        default=30_000, validation_alias="PIN_COMMAND_STATEMENT_TIMEOUT_MS"
    )
    # Seconds between refreshes of the database-health gauges (pin_db_*: dead tuples, last vacuum, claim index size,
    # oldest transaction, replication slots' WAL), which each worker instance exports: a few bounded statements.
    health_refresh_seconds: float = Field(default=30, gt=0, validation_alias="PIN_DATABASE_HEALTH_REFRESH_SECONDS")

    def require_url(self) -> str:
        """The database URL, or a configuration error for roles that cannot start an embedded server."""
        if not self.url:
            raise ConfigurationError("PIN_DATABASE_URL is not set (only `pin up` starts an embedded PostgreSQL)")
        return self.url


class KafkaSettings(Section):
    """The broker: where it is, how every client talks to it, the topics' partitions, each role's principal."""

    # Kafka bootstrap servers, comma separated; None means `pin up` starts an embedded broker.
    bootstrap_servers: str | None = Field(default=None, validation_alias="PIN_KAFKA_BOOTSTRAP_SERVERS")
    # Extra librdkafka settings passed through verbatim (SASL, TLS), ";"-separated key=value pairs,
    # e.g. "security.protocol=SASL_SSL;sasl.mechanism=PLAIN".
    client_config: str = Field(default="", validation_alias="PIN_KAFKA_CLIENT_CONFIG")
    # Consumer group session timeout; also how long a group join waits for members.
    session_timeout_ms: int = Field(
        default=10_000, ge=1_000, le=300_000, validation_alias="PIN_KAFKA_SESSION_TIMEOUT_MS"
    )
    # The largest record the dead-letter producer sends (its message.max.bytes, headers included); a consumed value
    # larger than this is unreadable. A dead letter that does not fit is sent cut, its full bytes in the database.
    max_message_bytes: int = Field(
        default=1_000_000, ge=16_384, le=100_000_000, validation_alias="PIN_KAFKA_MAX_MESSAGE_BYTES"
    )
    # Consumers only (librdkafka fetch.wait.max.ms; producers never see it): the longest the broker holds a fetch
    # that found nothing new. An idle consumer sends about 1000/N fetch requests per second to each broker it reads
    # from; a broker that answers an empty fetch only at this deadline (the embedded one) delays a new message by up
    # to N ms. Measured end to end (bench e2e, 2,000 deadlines): the consumers' hop p50/p99 was 132/260 ms at
    # librdkafka's 500, 21/64 at 100, 16/37 at 50 and 4/50 at 10. 50 keeps the end-to-end p99 under 150 ms for
    # 20 idle fetches per second; 10 would save about 12 ms at the median for five times the requests.
    consumer_fetch_wait_max_ms: int = Field(
        default=50, ge=1, le=60_000, validation_alias="PIN_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS"
    )
    # librdkafka socket.timeout.ms: the longest a request to a silent broker waits for its answer (every client;
    # TCP keepalives are on too). librdkafka's 60 s would let a cut link hold a relay's batch that long.
    socket_timeout_ms: int = Field(default=10_000, ge=1_000, le=300_000, validation_alias="PIN_KAFKA_SOCKET_TIMEOUT_MS")
    # librdkafka request.timeout.ms of the producers: the longest a produce request waits for the broker's ack
    # (then it is retried within the relay's message.timeout.ms).
    request_timeout_ms: int = Field(
        default=5_000, ge=1_000, le=300_000, validation_alias="PIN_KAFKA_REQUEST_TIMEOUT_MS"
    )
    # Consumers only (librdkafka max.poll.interval.ms): a member that does not come back to poll within this is
    # removed from its group, so one stuck member cannot hold a rebalance longer. Above the longest a batch can
    # take (its statements each bounded by PIN_CONSUMER_STATEMENT_TIMEOUT_MS, a dead database found within
    # seconds) and never below the session timeout.
    max_poll_interval_ms: int = Field(
        default=60_000, ge=10_000, le=3_600_000, validation_alias="PIN_KAFKA_MAX_POLL_INTERVAL_MS"
    )
    # Partitions of each topic the system creates (`pin topics`, `pin up`, a role creating a missing topic): the
    # most busy consumers of a group per topic. Never changes an existing topic (docs/operations.md: changing it).
    topic_partitions: int = Field(default=3, ge=1, le=10_000, validation_alias="PIN_KAFKA_TOPIC_PARTITIONS")
    # The Kafka principal of each role, as the cluster's authorizer names it (`pin acls` grants exactly what that
    # role's code calls); each role's process authenticates as it through its own PIN_KAFKA_CLIENT_CONFIG.
    principal_relay: str = Field(default="User:pin-relay", validation_alias="PIN_KAFKA_PRINCIPAL_RELAY")
    # The principal of the crm consumer group's instances.
    principal_crm: str = Field(default="User:pin-crm", validation_alias="PIN_KAFKA_PRINCIPAL_CRM")
    # The principal of the notifications consumer group's instances.
    principal_notifications: str = Field(
        default="User:pin-notifications", validation_alias="PIN_KAFKA_PRINCIPAL_NOTIFICATIONS"
    )
    # The principal of the catalog consumer group's instances.
    principal_catalog: str = Field(default="User:pin-catalog", validation_alias="PIN_KAFKA_PRINCIPAL_CATALOG")
    # The principal of the news consumer group's instances.
    principal_news: str = Field(default="User:pin-news", validation_alias="PIN_KAFKA_PRINCIPAL_NEWS")
    # The principal of the operator's commands: `pin topics`, `pin dlq list|replay`, `pin status`.
    principal_operator: str = Field(default="User:pin-operator", validation_alias="PIN_KAFKA_PRINCIPAL_OPERATOR")

    @field_validator(
        "principal_relay",
        "principal_crm",
        "principal_notifications",
        "principal_catalog",
        "principal_news",
        "principal_operator",
    )
    @classmethod
    def _kafka_principal(cls, value: str) -> str:
        """``Type:name`` (``User:pin-relay``), as Kafka's authorizer writes a principal."""
        kind, sep, name = value.partition(":")
        if not sep or not kind.strip() or not name.strip() or value != value.strip():
            raise ValueError("expected a Kafka principal such as User:pin-relay")
        return value

    @model_validator(mode="after")
    def _client_config_parses(self) -> KafkaSettings:
        self.extra_config()
        return self

    def principal(self, role: str) -> str:
        """The Kafka principal of ``role`` (relay, a consumer group, operator)."""
        principal: str = getattr(self, f"principal_{role}")
        return principal

    def require_bootstrap_servers(self) -> str:
        """The bootstrap servers, or a configuration error for roles that cannot start an embedded broker."""
        if not self.bootstrap_servers:
            raise ConfigurationError("PIN_KAFKA_BOOTSTRAP_SERVERS is not set (only `pin up` starts an embedded broker)")
        return self.bootstrap_servers

    def extra_config(self) -> dict[str, str]:
        """PIN_KAFKA_CLIENT_CONFIG parsed into librdkafka settings."""
        pairs = [item for item in self.client_config.split(";") if item.strip()]
        config: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ConfigurationError(f"PIN_KAFKA_CLIENT_CONFIG: expected key=value, got {pair!r}")
            config[key.strip()] = value.strip()
        return config


class ConsumerSettings(Section):
    """The consumer groups' instances (`pin consume <group>`); docs/design/consumers.md."""

    # How often each instance records its membership of its group (its row of messaging.consumer_member:
    # partitions held, heartbeat); a row 3 intervals old is not a member. One upsert per interval, never per message.
    membership_heartbeat_seconds: float = Field(
        default=5.0, ge=0.1, le=600, validation_alias="PIN_CONSUMER_MEMBERSHIP_HEARTBEAT_SECONDS"
    )
    # Lanes per partition. Messages are dealt to lanes by key (one key's in offset order in one lane) and the lanes
    # apply their batches concurrently, each on its own connection; a message in retry holds back only the later
    # messages of its key. 1: the partition is one lane, handled by the loop (a retry holds the partition).
    # 1 by default (docs/design/consumers.md, "Lanes": the measurement, and why not 2 yet).
    lanes: int = Field(default=1, ge=1, le=64, validation_alias="PIN_CONSUMER_LANES")
    # How many messages of a partition may be in hand past its committed offset (the lowest offset not yet
    # applied) before the partition is paused until the lanes catch up; bounds a key held in retry's memory.
    max_ahead: int = Field(default=10_000, ge=1, le=1_000_000, validation_alias="PIN_CONSUMER_MAX_AHEAD")
    # Attempts at a message that cannot be read or does not satisfy its contract before it goes to the group's
    # dead-letter topic (at least 2: one more read, after a short back-off). Nothing else is dead-lettered by
    # itself: every other failure is retried without limit (pin.faults.TREATMENTS).
    unreadable_attempts: int = Field(default=3, ge=2, le=100, validation_alias="PIN_CONSUMER_UNREADABLE_ATTEMPTS")
    # `pin status`: a group whose live members have held no partition for longer than this is wedged (0: derived,
    # 2 x PIN_KAFKA_SESSION_TIMEOUT_MS + PIN_KAFKA_MAX_POLL_INTERVAL_MS, the longest a healthy rebalance waits).
    wedged_after_seconds: float = Field(
        default=0.0, ge=0, le=86_400, validation_alias="PIN_CONSUMER_WEDGED_AFTER_SECONDS"
    )
    # How long a group's inbox keeps a MessageId (its dedup window: 14 days): a redelivery or a copy on another
    # topic (a contract migration's v2 row) within it is skipped; the runtime prunes older rows.
    inbox_retention_seconds: float = Field(
        default=14 * 86_400, ge=3_600, le=366 * 86_400, validation_alias="PIN_CONSUMER_INBOX_RETENTION_SECONDS"
    )


class RelaySettings(Section):
    """The relay (`pin relay`); see docs/design/relay.md. Each must be greater than 0."""

    # Rows per batch (about: spread evenly over the owned vparts, at least 8 each); one DELETE per batch.
    batch_size: int = Field(default=2000, validation_alias="PIN_RELAY_BATCH_SIZE")
    # Batches handed to the broker and not yet awaited, at most; with the one settling, a kill -9 sends at most
    # (this + 1) x the batch size again. 2: more measured no faster on a local broker (docs/design/relay.md).
    batches_in_flight: int = Field(default=2, validation_alias="PIN_RELAY_BATCHES_IN_FLIGHT")
    # Seconds between reads when no NOTIFY arrives (the fallback: NOTIFY is lost across reconnects).
    poll_interval_seconds: float = Field(default=1.0, validation_alias="PIN_RELAY_POLL_INTERVAL_SECONDS")
    # Seconds between lease renewals (and acquisitions of a fair share).
    heartbeat_seconds: float = Field(default=1.0, validation_alias="PIN_RELAY_HEARTBEAT_SECONDS")
    # Lease lifetime on the database clock: a dead instance's vparts are taken over after at most this.
    lease_ttl_seconds: float = Field(default=5.0, validation_alias="PIN_RELAY_LEASE_TTL_SECONDS")
    # Failures of a row (broker unavailability not counted) before it is dead-lettered.
    max_attempts: int = Field(default=10, validation_alias="PIN_RELAY_MAX_ATTEMPTS")
    # First retry delay of a failed row; doubles per attempt, with +-20 % jitter.
    backoff_base_seconds: float = Field(default=0.5, validation_alias="PIN_RELAY_BACKOFF_BASE_SECONDS")
    # Longest retry delay; also how long a drained broker outage can delay a row after the broker returns.
    backoff_max_seconds: float = Field(default=15.0, validation_alias="PIN_RELAY_BACKOFF_MAX_SECONDS")
    # librdkafka message.timeout.ms: a send fails after this, so a batch never hangs on a dead broker.
    message_timeout_ms: int = Field(default=10_000, validation_alias="PIN_RELAY_MESSAGE_TIMEOUT_MS")
    # A relay that has had batches out this long with no acknowledgement (a broker it cannot reach) stops reading,
    # settles what is out and gives its leases up, so another relay takes its keys; it takes its share back once
    # the broker answers. Greater than message.timeout.ms: none of its sends can land after the new owner's.
    undelivered_give_up_seconds: float = Field(default=15.0, validation_alias="PIN_RELAY_UNDELIVERED_GIVE_UP_SECONDS")
    # Seconds between refreshes of the outbox backlog, lag and dead-letter gauges (by the relay and the workers).
    gauge_refresh_seconds: float = Field(default=5.0, validation_alias="PIN_RELAY_GAUGE_REFRESH_SECONDS")
    # Cap of the dead-letter gauge's count (the backlog and lag gauges count every waiting row, past the floors).
    backlog_count_cap: int = Field(default=100_000, validation_alias="PIN_RELAY_BACKLOG_COUNT_CAP")

    @field_validator("*", mode="before")
    @classmethod
    def _positive_number(cls, raw: Any, info: ValidationInfo) -> Any:
        """A positive number; an empty variable means the default (ConfigurationError names the variable)."""
        assert info.field_name is not None
        field = cls.model_fields[info.field_name]
        if not isinstance(raw, str):
            return raw
        if raw == "":
            return field.default
        name = field.validation_alias
        caster = int if field.annotation is int else float
        try:
            value = caster(raw)
        except ValueError:
            raise ConfigurationError(f"{name}: expected a number, got {raw!r}") from None
        if value <= 0:
            raise ConfigurationError(f"{name}: must be greater than 0")
        return value

    @model_validator(mode="after")
    def _lease_outlives_heartbeats(self) -> RelaySettings:
        if self.lease_ttl_seconds < 2 * self.heartbeat_seconds:
            raise ConfigurationError("PIN_RELAY_LEASE_TTL_SECONDS: must be at least twice the heartbeat")
        return self

    @model_validator(mode="after")
    def _gives_up_after_its_sends_expire(self) -> RelaySettings:
        if self.undelivered_give_up_seconds * 1000 <= self.message_timeout_ms:
            raise ConfigurationError(
                "PIN_RELAY_UNDELIVERED_GIVE_UP_SECONDS: must be greater than PIN_RELAY_MESSAGE_TIMEOUT_MS / 1000"
            )
        return self


class OutboxSettings(Section):
    """How rows leave the outbox, and the contract migrations the producers follow."""

    # Who takes the rows out of the outbox: "relay" (`pin relay` publishes and deletes them) or "cdc" (each row is
    # deleted in the transaction that wrote it; Debezium reads the insert from the WAL: docs/runbooks/outbox-cdc.md).
    # The same in every process of a deployment; `pin relay` refuses to start in cdc mode.
    mode: Literal["relay", "cdc"] = Field(default="relay", validation_alias="PIN_OUTBOX_MODE")
    # cdc mode: the logical replication slot the Debezium connector reads (its slot.name, deploy/debezium/);
    # `pin status` shows the WAL it keeps.
    cdc_slot: str = Field(default="pin_outbox", pattern=r"^[a-z0-9_]{1,63}$", validation_alias="PIN_OUTBOX_CDC_SLOT")
    # Contract migrations in progress, by event type (JSON: {"<event type>": {"since": ..., "deadline": ...,
    # "publish": "dual"|"v2", "v2_groups": [...], "force_sunset": false}}): see ContractMigration and
    # docs/runbooks/contract-migration.md. Checked at every role's start (pin.messaging.migrations).
    contract_migrations: dict[str, ContractMigration] = Field(
        default_factory=dict, validation_alias="PIN_CONTRACT_MIGRATIONS"
    )


class JobSettings(Section):
    """The polling jobs (`pin worker appointment-timeout`, `pin worker expire-promotions`)."""

    # appointment-timeout polling interval (seed 000: 60 s; 1 to 60 s).
    appointment_timeout_interval_seconds: float = Field(
        default=JOB_INTERVAL_SECONDS,
        ge=JOB_INTERVAL_MIN_SECONDS,
        le=APPOINTMENT_TIMEOUT_INTERVAL_MAX_SECONDS,
        validation_alias="PIN_APPOINTMENT_TIMEOUT_INTERVAL_SECONDS",
    )
    # appointment-timeout BatchSize (seed 000: 200).
    appointment_timeout_batch_size: int = Field(
        default=JOB_BATCH_SIZE, gt=0, le=10_000, validation_alias="PIN_APPOINTMENT_TIMEOUT_BATCH_SIZE"
    )
    # appointment-timeout's time budget per cycle (seed 000: < 30 s): then it claims nothing more until the next tick.
    appointment_timeout_cycle_budget_seconds: float = Field(
        default=CYCLE_BUDGET_MAX_SECONDS,
        gt=0,
        le=CYCLE_BUDGET_MAX_SECONDS,
        validation_alias="PIN_APPOINTMENT_TIMEOUT_CYCLE_BUDGET_SECONDS",
    )
    # expire-promotions polling interval (seed 002: 1 to 5 minutes in production; below 1 minute, a warning at start).
    expire_promotions_interval_seconds: float = Field(
        default=JOB_INTERVAL_SECONDS,
        ge=JOB_INTERVAL_MIN_SECONDS,
        le=EXPIRE_PROMOTIONS_INTERVAL_RANGE_SECONDS[1],
        validation_alias="PIN_EXPIRE_PROMOTIONS_INTERVAL_SECONDS",
    )
    # expire-promotions BatchSize (seed 002: 200).
    expire_promotions_batch_size: int = Field(
        default=JOB_BATCH_SIZE, gt=0, le=10_000, validation_alias="PIN_EXPIRE_PROMOTIONS_BATCH_SIZE"
    )
    # expire-promotions' time budget per cycle (seed 002: < 30 s): then it writes nothing more until the next tick.
    expire_promotions_cycle_budget_seconds: float = Field(
        default=CYCLE_BUDGET_MAX_SECONDS,
        gt=0,
        le=CYCLE_BUDGET_MAX_SECONDS,
        validation_alias="PIN_EXPIRE_PROMOTIONS_CYCLE_BUDGET_SECONDS",
    )


class CalendarSettings(Section):
    """The calendar's configurable rules."""

    # PendingTtl: how long an agent has to decide on a Pending appointment (24 h).
    pending_ttl_seconds: int = Field(default=86_400, gt=0, validation_alias="PIN_APPOINTMENT_PENDING_TTL_SECONDS")
    # INV-APT-3: an investor may cancel or reschedule until StartAt minus this many minutes.
    cancel_cutoff_minutes: int = Field(default=60, ge=0, validation_alias="PIN_APPOINTMENT_CANCEL_CUTOFF_MINUTES")


class ApiSettings(Section):
    """The HTTP API (`pin api`): its database waits and its bearer tokens."""

    # Seconds a request waits for a pooled connection before it is answered 503 (the database is unreachable).
    pool_timeout_seconds: float = Field(default=5.0, gt=0, le=60, validation_alias="PIN_API_POOL_TIMEOUT_SECONDS")
    # The longest an API transaction waits for a row (or table) lock another transaction holds: then its
    # statement fails and the request is a 409 (retryable). Below PIN_API_POOL_TIMEOUT_SECONDS, so that a
    # request of another tenant always gets a connection while every one is waiting on a held row.
    lock_timeout_seconds: float = Field(default=2.0, gt=0, le=60, validation_alias="PIN_API_LOCK_TIMEOUT_SECONDS")
    # HS256 secret for bearer tokens (at least JWT_SECRET_MIN_BYTES).
    jwt_secret: SecretStr | None = Field(default=None, validation_alias="PIN_JWT_SECRET")
    # RS256 public key (PEM) for bearer tokens; takes precedence over the secret when both are set.
    jwt_public_key: str | None = Field(default=None, validation_alias="PIN_JWT_PUBLIC_KEY")
    # The longest a bearer token may live: a token whose exp is further than this from now (or from its iat)
    # is refused, so that a leaked token cannot be minted to last for ever.
    jwt_max_lifetime_seconds: int = Field(
        default=86_400, gt=0, le=31_536_000, validation_alias="PIN_JWT_MAX_LIFETIME_SECONDS"
    )

    @model_validator(mode="after")
    def _lock_wait_below_the_pool_wait(self) -> ApiSettings:
        if self.lock_timeout_seconds >= self.pool_timeout_seconds:
            raise ConfigurationError("PIN_API_LOCK_TIMEOUT_SECONDS: must be less than PIN_API_POOL_TIMEOUT_SECONDS")
        return self

    @model_validator(mode="after")
    def _jwt_key_is_usable(self) -> ApiSettings:
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


class HttpSettings(Section):
    """The API's HTTP server: what it buffers, how long it waits, how many connections it serves."""

    # The most bytes of a request line and headers the HTTP server buffers (h11's max_incomplete_event_size);
    # a larger head is answered 431. At least 16 KiB: the API itself refuses a bearer token above 8 KiB.
    max_header_bytes: int = Field(default=65_536, ge=16_384, le=1_048_576, validation_alias="PIN_HTTP_MAX_HEADER_BYTES")
    # The most bytes of a request body the API reads; a larger one is answered 413 before (Content-Length) or as
    # soon as (chunked) it passes the limit. The largest body of the API is a few KiB: 64 KiB leaves room.
    max_body_bytes: int = Field(default=65_536, ge=1_024, le=16_777_216, validation_alias="PIN_HTTP_MAX_BODY_BYTES")
    # How long a client may take to send a whole request head, from the connection's start (or, on a kept-alive
    # connection, from the next request's first byte): a connection that sends nothing, or trickles its head, is
    # closed after this (408 when it sent part of a head).
    head_timeout_seconds: float = Field(default=10.0, gt=0, le=300, validation_alias="PIN_HTTP_HEAD_TIMEOUT_SECONDS")
    # How long an idle keep-alive connection stays open after a response before the server closes it. Longer than
    # the idle expiry of common client pools (httpx 5 s, aiohttp 15 s) and load balancers (60 s): a client that
    # reuses a connection the server is closing sees its request dropped.
    keep_alive_timeout_seconds: float = Field(
        default=65.0, gt=0, le=600, validation_alias="PIN_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"
    )
    # The most open client connections the API serves; a request on a connection beyond it is a 503 problem
    # document and the connection is closed. The process's open-files limit is raised to this plus headroom.
    max_connections: int = Field(default=1_000, ge=10, le=100_000, validation_alias="PIN_HTTP_MAX_CONNECTIONS")


class ConsoleSettings(Section):
    """The operator console (pin/console/)."""

    # Its Prometheus (its base URL, e.g. http://prometheus:9090): the pages link their charts there; unset, they
    # say that there are none.
    prometheus_url: str | None = Field(default=None, validation_alias="PIN_CONSOLE_PROMETHEUS_URL")
    # The most dead letters a replay job sends per second, per job and relay instance (pin/console/replay_jobs.py).
    replay_rate: int = Field(default=100, ge=1, le=10_000, validation_alias="PIN_CONSOLE_REPLAY_RATE")


class FaultInjection(Section):
    """Test only, never set in production: where the crash tests freeze a role."""

    # `pin relay` freezes at ``after-produce|after-ack[:N]`` (of batch N).
    relay: str = Field(default="", validation_alias="PIN_RELAY_TEST_FAULT")
    # ``hang-after-effect`` freezes a consumer after its first effect commits.
    consumer: str = Field(default="", validation_alias="PIN_CONSUMER_TEST_FAULT")


class Settings(BaseSettings):
    """Every setting of every role, by section; read once, at start, in the composition root."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", validate_by_name=True, validate_by_alias=True)

    database: DatabaseSettings = DatabaseSettings()
    kafka: KafkaSettings = KafkaSettings()
    consumers: ConsumerSettings = ConsumerSettings()
    relay: RelaySettings = RelaySettings()
    outbox: OutboxSettings = OutboxSettings()
    jobs: JobSettings = JobSettings()
    calendar: CalendarSettings = CalendarSettings()
    api: ApiSettings = ApiSettings()
    http: HttpSettings = HttpSettings()
    console: ConsoleSettings = ConsoleSettings()
    fault_injection: FaultInjection = FaultInjection()

    # What every process has: how it stops, where it serves its metrics, how it logs, `pin up`'s state folder.
    # Seconds a role may take to stop after SIGTERM before it exits anyway (a call blocked on a dead connection;
    # what it did not commit the server rolls back).
    stop_timeout_seconds: float = Field(default=15.0, gt=0, le=600, validation_alias="PIN_STOP_TIMEOUT_SECONDS")
    # Port of this role's /metrics endpoint; None disables it.
    metrics_port: int | None = Field(default=None, ge=0, le=65_535, validation_alias="PIN_METRICS_PORT")
    # Address the /metrics endpoint binds to; "0.0.0.0" lets a Prometheus on another host scrape it.
    metrics_host: str = Field(default="127.0.0.1", validation_alias="PIN_METRICS_HOST")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", validation_alias="PIN_LOG_LEVEL")
    # "json" always, "console" always, or "auto": console when stderr is a terminal.
    log_format: Literal["json", "console", "auto"] = Field(default="auto", validation_alias="PIN_LOG_FORMAT")
    # The state folder of `pin up`: embedded database, development secret, and the endpoints other commands read.
    home: str = Field(default=".pin", validation_alias="PIN_HOME")
    # Set by `pin up` for the processes it runs (its own pid): a role stops once that process is gone, so that
    # a `pin up` killed with SIGKILL leaves no role running. Unset: a role runs until it is told to stop.
    up_pid: int | None = Field(default=None, gt=0, validation_alias="PIN_UP_PID")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """What the code passes, then the environment's PIN_* variables (no .env file, no secrets directory)."""
        return init_settings, _Variables(settings_cls)

    def __init__(self, **values: Any) -> None:
        """``values`` by variable (``relay_batch_size=500``, or ``PIN_RELAY_BATCH_SIZE``) or by section; the
        environment supplies the rest."""
        super().__init__(**_into_sections(values))

    @model_validator(mode="after")
    def _migration_window_within_the_inbox_dedup_window(self) -> Settings:
        for event_type, migration in self.outbox.contract_migrations.items():
            window = (migration.deadline - migration.since).total_seconds()
            if window > self.consumers.inbox_retention_seconds:
                dedup = self.consumers.inbox_retention_seconds
                raise ValueError(
                    f"contract_migrations[{event_type}]: the window since..deadline ({window:.0f} s) exceeds the"
                    f" inbox dedup window PIN_CONSUMER_INBOX_RETENTION_SECONDS ({dedup:.0f} s)"
                )
        return self

    def wedged_after_seconds(self) -> float:
        """How long a group's live members may hold no partition before `pin status` calls the group wedged."""
        if self.consumers.wedged_after_seconds:
            return self.consumers.wedged_after_seconds
        derived_ms = 2 * self.kafka.session_timeout_ms + max(
            self.kafka.max_poll_interval_ms, self.kafka.session_timeout_ms
        )
        return derived_ms / 1000

    def with_values(self, **values: Any) -> Settings:
        """These settings with ``values`` (by variable: ``relay_batch_size=500``), checked again as at start."""
        current = {place.field.validation_alias: _value_at(self, place) for place in _PLACES.values()}
        return Settings.model_validate({**current, **values})

    @staticmethod
    def variables() -> frozenset[str]:
        """The name of every setting's variable (``PIN_RELAY_BATCH_SIZE``)."""
        return frozenset(f"PIN_{name.upper()}" for name in _PLACES)

    @staticmethod
    def variable_default(variable: str) -> Any:
        """The default of the setting ``variable`` names (its section's, written there once)."""
        place = _PLACES[variable.lower().removeprefix("pin_")]
        holder = Settings.model_fields[place.section].default if place.section else Settings.model_construct()
        return getattr(holder, place.attr)


class _Place(NamedTuple):
    """Where the setting of one variable is: its section (None: on Settings itself) and its field there."""

    section: str | None
    attr: str
    field: FieldInfo


def _places() -> dict[str, _Place]:
    """Each variable's place, by its name without ``PIN_`` in lower case (``relay_batch_size``)."""
    places: dict[str, _Place] = {}
    for name, field in Settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, Section):
            members = [_Place(name, attr, inner) for attr, inner in section.model_fields.items()]
        else:
            members = [_Place(None, name, field)]
        for place in members:
            assert isinstance(place.field.validation_alias, str), f"{name}.{place.attr}: no variable"
            places[place.field.validation_alias.removeprefix("PIN_").lower()] = place
    return places


_SECTIONS = frozenset(name for name, field in Settings.model_fields.items() if isinstance(field.default, Section))
_PLACES = _places()


def _value_at(settings: Settings, place: _Place) -> Any:
    return getattr(getattr(settings, place.section) if place.section else settings, place.attr)


def _into_sections(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values``, given by variable (``relay_batch_size`` or ``PIN_RELAY_BATCH_SIZE``) or by section, as Settings
    reads them: each variable's value under its name, in its section; any other key as it is."""
    given: dict[str, Any] = {}
    for key, value in values.items():
        place = _PLACES.get(key.lower().removeprefix("pin_")) if key not in _SECTIONS else None
        if key in _SECTIONS:
            given[key] = {**given.get(key, {}), **_by_variable(key, value)}
        elif place is None:
            given[key] = value
        elif place.section is None:
            given[str(place.field.validation_alias)] = value
        else:
            given[place.section] = {**given.get(place.section, {}), str(place.field.validation_alias): value}
    return given


def _by_variable(section: str, value: Section | Mapping[str, Any]) -> dict[str, Any]:
    """A section given whole (a model, or its fields by name or by variable), by variable."""
    fields = Settings.model_fields[section].default.model_fields
    items = value.items() if isinstance(value, Mapping) else ((attr, getattr(value, attr)) for attr in fields)
    return {(fields[attr].validation_alias if attr in fields else attr): item for attr, item in items}


class _Variables(EnvSettingsSource):
    """The environment's PIN_* settings, each in its section (:func:`_into_sections`)."""

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, place in _PLACES.items():
            raw = self.env_vars.get(f"pin_{name}")  # the environment's names in lower case: any case matches
            if raw is None:
                continue
            try:
                values[name] = self.prepare_field_value(name, place.field, raw, self.field_is_complex(place.field))
            except ValueError:
                raise ConfigurationError(f"PIN_{name.upper()}: expected JSON") from None
        return _into_sections(values)


def unknown_variables(environ: Mapping[str, str]) -> str | None:
    """One line naming each PIN_* variable of ``environ`` that nothing reads, with the setting it may mean."""
    known = Settings.variables()
    unknown = sorted(name for name in environ if name.upper().startswith("PIN_") and name.upper() not in known)
    unknown = [name for name in unknown if name.upper() not in OTHER_VARIABLES]
    if not unknown:
        return None
    named = [_with_guess(name, difflib.get_close_matches(name.upper(), known, n=1)) for name in unknown]
    return f"pin: ignoring {', '.join(named)}: not a setting (docs/operations.md, Configuration)"


def _with_guess(name: str, guesses: list[str]) -> str:
    return f"{name} (did you mean {guesses[0]}?)" if guesses else name


def load_settings(more: Callable[[Settings], Mapping[str, str]] | None = None) -> Settings:
    """Read the settings, turning a validation error into one line that names the variable.

    ``more`` (the settings read) gives values for variables the environment leaves unset (pin.local.state_folder:
    those of the running `pin up`). A PIN_* variable that is not a setting gets one line on stderr, once: not
    again in the roles `pin up` runs.
    """
    if "PIN_UP_PID" not in os.environ and (line := unknown_variables(os.environ)):
        sys.stderr.write(line + "\n")
    try:
        settings = Settings()
        taken = more(settings) if more is not None else {}
        return Settings.model_validate(taken) if taken else settings  # the environment still supplies every other field
    except ValidationError as exc:
        error = exc.errors()[0]
        names = [str(part) for part in error["loc"] if str(part).startswith("PIN_")]
        name = names[0] if names else "configuration"
        raise ConfigurationError(f"{name}: {error['msg']}") from None
