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
