-- The messaging schema's changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description. (Not to be
-- confused with pin/messaging/migrations.py, the contract migrations at run time.)

-- 0004_upgrade --
-- The messages consumers hold in retry (pin/messaging/consumer/held.py): what a console shows and `pin dlq park` marks.
CREATE TABLE messaging.held_message (
    consumer_group  text        NOT NULL,
    topic           text        NOT NULL,
    "partition"     integer     NOT NULL,
    "offset"        bigint      NOT NULL,
    -- the message's key as read (a hostile key may hold any byte) and its MessageId (null: unreadable)
    message_key     bytea,
    message_id      uuid,
    -- the instance holding it: host:pid, as in messaging.consumer_member
    member          text        NOT NULL,
    -- pin.faults: contended, infrastructure, poison or unreadable (only this one ends in the dead letters by itself)
    fault           text        NOT NULL,
    -- the last failure: its type and its first line, bounded and scrubbed of row values (never a payload)
    error_type      text        NOT NULL,
    error           text        NOT NULL,
    attempts        integer     NOT NULL,
    -- held since (its first failure) and its last failed attempt, database clock; its next attempt, expected
    since           timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL,
    -- set by `pin dlq park` (the operator's row in operations.audit): the holder dead-letters it at its next attempt
    park_audit_id   bigint,
    PRIMARY KEY (consumer_group, topic, "partition", "offset"),
    CONSTRAINT held_message_fault CHECK (fault IN ('contended', 'infrastructure', 'poison', 'unreadable'))
);

-- 0004_downgrade --
-- No record of held messages (development only).
DROP TABLE IF EXISTS messaging.held_message;

-- 0005_upgrade --
-- The consumers' hot tables vacuumed by a fixed number of dead rows, never by a fraction of the table.
-- messaging.inbox: one row per message every group processed, kept for the dedup window and pruned oldest first in
-- batches; a fraction of a table of two weeks of messages would wait for millions of dead rows. Vacuum after
-- 10,000 dead rows, and after 10,000 inserted ones too (the visibility map and freezing keep up with the
-- inserts instead of one long vacuum of the whole table at the freeze age).
ALTER TABLE messaging.inbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);
-- messaging.consumer_member: one row per consumer instance, rewritten at every heartbeat: a single row rewritten
-- constantly. HOT updates (no indexed column changes) with half of each page free for them, and a vacuum after
-- 100 dead versions.
ALTER TABLE messaging.consumer_member SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0
);

-- 0005_downgrade --
-- The consumers' hot tables back on the server's autovacuum settings.
ALTER TABLE messaging.inbox RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_insert_scale_factor,
    autovacuum_vacuum_insert_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE messaging.consumer_member RESET (
    fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);

-- 0007_upgrade --
-- The index of the consumer groups' dead letters (pin/messaging/consumer/dead_letters/index.py): a row per letter,
-- written before the letter is published, so the console never reads a dead-letter topic.
CREATE TABLE messaging.dead_letter_index (
    -- keyset order of the console's lists: newest first by id
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group    text        NOT NULL,
    -- where the message was read (its origin), one row per origin
    topic             text        NOT NULL,
    "partition"       integer     NOT NULL,
    "offset"          bigint      NOT NULL,
    -- the key as read (a hostile key may hold any byte), and as UTF-8 text bounded to 200 characters for filters
    message_key       bytea,
    key_text          text,
    -- the MessageId (header, else the envelope's): null when the message has none that can be read
    message_id        uuid,
    -- the value and headers as read; the value is null when messaging.dead_letter (stored_id) keeps the full bytes
    message_value     bytea,
    header_names      bytea[]     NOT NULL,
    header_values     bytea[]     NOT NULL,
    value_size        integer     NOT NULL,
    error_type        text        NOT NULL,
    error             text        NOT NULL,
    attempts          integer     NOT NULL,
    failed_at         timestamptz NOT NULL DEFAULT now(),
    -- whole: in the dead-letter topic whole; truncated or parked: the full bytes are messaging.dead_letter's row
    disposition       text        NOT NULL DEFAULT 'whole',
    stored_id         uuid,
    -- an operator's resolution: replayed (sent back to its topic) or discarded (kept, hidden by default)
    resolution        text,
    resolved_at       timestamptz,
    resolved_audit_id bigint,
    CONSTRAINT dead_letter_index_origin UNIQUE (consumer_group, topic, "partition", "offset"),
    CONSTRAINT dead_letter_index_disposition CHECK (disposition IN ('whole', 'truncated', 'parked')),
    CONSTRAINT dead_letter_index_resolution CHECK (resolution IN ('replayed', 'discarded'))
);
CREATE INDEX dead_letter_index_group ON messaging.dead_letter_index (consumer_group, id);
CREATE INDEX dead_letter_index_key ON messaging.dead_letter_index (key_text, id);
CREATE INDEX dead_letter_index_message ON messaging.dead_letter_index (message_id);
CREATE INDEX dead_letter_index_failed ON messaging.dead_letter_index (failed_at, id);

-- 0007_downgrade --
-- No index of the groups' dead letters (development only).
DROP TABLE IF EXISTS messaging.dead_letter_index;

-- 0009_upgrade --
-- Each consumer instance's row names its partitions and its lanes (pin/messaging/consumer/membership.py), for the
-- console: still one row per instance rewritten at its heartbeat (the table's settings of 0005 hold: HOT updates,
-- vacuumed after 100 dead versions). Bounded: the partitions of the topics its group reads, and at most 20 held
-- scopes (pin.messaging.consumer.lanes.HELD_SHOWN; the total is counted).
ALTER TABLE messaging.consumer_member
    -- the partitions it holds, as librdkafka's rebalance callbacks gave them: {"topic": [0, 1, 2], ...}
    ADD COLUMN assignment       jsonb   NOT NULL DEFAULT '{}',
    -- PIN_CONSUMER_LANES of the instance (1: each partition is one lane, handled by the loop)
    ADD COLUMN lanes            integer NOT NULL DEFAULT 1,
    -- what its lanes hold in retry as of the heartbeat: [{"lane", "topic", "partition", "offset", "whole", "key",
    -- "behind"}, ...] (whole: a retry that holds the partition; else the key's later messages only)
    ADD COLUMN lanes_held       jsonb   NOT NULL DEFAULT '[]',
    ADD COLUMN lanes_held_total integer NOT NULL DEFAULT 0;

-- 0009_downgrade --
-- The instances' rows back to a partition count (development only).
ALTER TABLE messaging.consumer_member
    DROP COLUMN IF EXISTS assignment, DROP COLUMN IF EXISTS lanes, DROP COLUMN IF EXISTS lanes_held,
    DROP COLUMN IF EXISTS lanes_held_total;
