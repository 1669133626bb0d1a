-- messaging context schema (owned by the messaging context)
CREATE SCHEMA IF NOT EXISTS messaging;

-- The inbox of every consumer group: one row per message whose effect committed. The row is inserted in the
-- same transaction as the effect, so "processed" and "recorded as processed" cannot diverge; a redelivered
-- message conflicts on the key and is skipped (SPEC section 7: idempotent by MessageId).
CREATE TABLE IF NOT EXISTS messaging.inbox (
    consumer_group text        NOT NULL,
    message_id     uuid        NOT NULL,
    topic          text        NOT NULL,
    "partition"    integer     NOT NULL,
    "offset"       bigint      NOT NULL,
    -- the effect's transaction time on the database clock (now(): the effect and this row commit together)
    processed_at   timestamptz NOT NULL DEFAULT now(),
    -- the message's OccurredAt (null when the producer sent none): processed_at - occurred_at is the event's age
    -- at its effect, which `pin status` compares with the group's SLA (pin.messaging.groups.SLA_SECONDS)
    occurred_at    timestamptz,
    PRIMARY KEY (consumer_group, message_id)
);

-- Retention: the runtime prunes rows older than its dedup window, oldest first.
CREATE INDEX IF NOT EXISTS inbox_processed_at ON messaging.inbox (consumer_group, processed_at);

-- Dead letters the dead-letter topic cannot carry whole: the original key, value and headers of a message
-- (messaging/consumer/dead_letters/store.py). 'truncated': the topic holds a copy cut to the dead-letter producer's bound,
-- whose dlt-stored-id header names this row; 'parked': the topic refused it on every attempt, this row is the
-- dead letter. One row per origin: storing the same message again updates it.
CREATE TABLE IF NOT EXISTS messaging.dead_letter (
    id                    uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    consumer_group        text        NOT NULL,
    topic                 text        NOT NULL,
    "partition"           integer     NOT NULL,
    "offset"              bigint      NOT NULL,
    original_timestamp_ms bigint      NOT NULL,
    message_key           bytea,
    message_value         bytea,
    -- header names as UTF-8 bytes (a hostile name may hold NUL, which text cannot)
    header_names          bytea[]     NOT NULL,
    header_values         bytea[]     NOT NULL,
    value_size            integer     NOT NULL,
    value_sha256          text        NOT NULL,
    disposition           text        NOT NULL,
    error_type            text        NOT NULL,
    error                 text        NOT NULL,
    attempts              integer     NOT NULL,
    failed_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letter_disposition CHECK (disposition IN ('truncated', 'parked')),
    CONSTRAINT dead_letter_origin UNIQUE (consumer_group, topic, "partition", "offset")
);

-- Who is in each consumer group, as its instances say (pin/messaging/consumer/membership.py): the embedded broker
-- answers DescribeGroups with no members, so `pin status` reads membership here to tell a wedged group (members,
-- and none of them has held a partition for longer than PIN_CONSUMER_WEDGED_AFTER_SECONDS). Written on the loop's
-- timer (one upsert per heartbeat interval, and once after a rebalance callback changed the assignment); a row
-- whose heartbeat is older than 3 heartbeat intervals is not a member (a killed instance); a stopped one deletes it.
CREATE TABLE IF NOT EXISTS messaging.consumer_member (
    consumer_group        text        NOT NULL,
    -- host:pid of the instance: no PII
    member                text        NOT NULL,
    -- partitions assigned to it now (0: joining, rebalancing, or wedged)
    partitions            integer     NOT NULL,
    -- when that count last changed (or the instance joined), database clock
    assignment_changed_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at          timestamptz NOT NULL DEFAULT now(),
    -- how old a heartbeat may be while the instance still counts as a member (3 heartbeat intervals)
    stale_after_seconds   float8      NOT NULL,
    PRIMARY KEY (consumer_group, member)
);
