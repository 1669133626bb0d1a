-- The outbox's schema changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description.

-- 0002_upgrade --
-- One event may be two rows (a contract migration's v1 and v2, same MessageId): unique per MessageId and topic.
ALTER TABLE outbox.message DROP CONSTRAINT message_message_id_key,
    ADD CONSTRAINT message_message_id_topic_key UNIQUE (message_id, topic);
ALTER TABLE outbox.dead_letter DROP CONSTRAINT dead_letter_message_id_key,
    ADD CONSTRAINT dead_letter_message_id_topic_key UNIQUE (message_id, topic);

-- 0002_downgrade --
-- MessageId alone unique again.
ALTER TABLE outbox.message DROP CONSTRAINT message_message_id_topic_key,
    ADD CONSTRAINT message_message_id_key UNIQUE (message_id);
ALTER TABLE outbox.dead_letter DROP CONSTRAINT dead_letter_message_id_topic_key,
    ADD CONSTRAINT dead_letter_message_id_key UNIQUE (message_id);

-- 0003_upgrade --
-- Where the broker acknowledged the relay's sends: per topic and partition, the highest offset of a settled batch,
-- stamped in the transaction that deleted its rows (docs/design/consumer-waits.md). Appended, never updated;
-- pruned to the marks some group still needs (outbox/waiting.sql: acked_position_prune).
CREATE TABLE outbox.acked_position (
    topic            text        NOT NULL,
    kafka_partition  integer     NOT NULL CHECK (kafka_partition >= 0),
    last_offset      bigint      NOT NULL CHECK (last_offset >= 0),
    acked_at         timestamptz NOT NULL DEFAULT now(),  -- the settle's transaction: at or after the acknowledgement
    PRIMARY KEY (topic, kafka_partition, last_offset)
);

-- 0003_downgrade --
-- No acknowledged positions.
DROP TABLE outbox.acked_position;
