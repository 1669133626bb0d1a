-- The messaging schema's changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description.

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
