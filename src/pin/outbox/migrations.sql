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
