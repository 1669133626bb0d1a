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
    processed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, message_id)
);

-- Retention: the runtime prunes rows older than its dedup window, oldest first.
CREATE INDEX IF NOT EXISTS inbox_processed_at ON messaging.inbox (consumer_group, processed_at);
