-- The rows of messaging.dead_letter: a consumer group's dead letters kept with their original bytes (store.py).
-- Each starts with a "-- name --" line and a one-line description; loaded by pin.db.load_queries.

-- dead_letter_store --
-- Keep a message's original bytes, one row per origin: storing it again (a retried publish, a redelivery) updates it.
INSERT INTO messaging.dead_letter AS d
    (consumer_group, topic, "partition", "offset", original_timestamp_ms, message_key, message_value,
     header_names, header_values, value_size, value_sha256, disposition, error_type, error, attempts)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (consumer_group, topic, "partition", "offset") DO UPDATE
SET disposition = EXCLUDED.disposition, error_type = EXCLUDED.error_type, error = EXCLUDED.error,
    attempts = EXCLUDED.attempts, failed_at = now()
RETURNING d.id

-- dead_letters_read --
-- The stored letters with these ids, and the parked letters (those the dead-letter topic never took) of these groups;
-- oldest first.
SELECT id, consumer_group, topic, "partition", "offset", original_timestamp_ms, message_key, message_value,
       header_names, header_values, value_size, value_sha256, disposition, error_type, error, attempts, failed_at
FROM messaging.dead_letter
WHERE id = ANY(%(ids)s::uuid[]) OR (consumer_group = ANY(%(groups)s::text[]) AND disposition = 'parked')
ORDER BY failed_at, id

-- held_to_park --
-- The held messages of a group's topic that `pin dlq park` names (by partition and offset, or by key; not parked yet),
-- locked until the park is recorded.
SELECT topic, "partition", "offset", message_id, member, fault, error_type, attempts, since
FROM messaging.held_message
WHERE consumer_group = %(group)s AND topic = %(topic)s AND park_audit_id IS NULL
    AND (%(partition)s::integer IS NULL OR "partition" = %(partition)s::integer)
    AND (%(offset)s::bigint IS NULL OR "offset" = %(offset)s::bigint)
    AND (%(key)s::bytea IS NULL OR message_key = %(key)s::bytea)
ORDER BY "partition", "offset"
FOR UPDATE

-- held_park --
-- Mark held messages with the operator's audit record: their holders dead-letter them at their next attempt.
UPDATE messaging.held_message AS h SET park_audit_id = %(audit_id)s
FROM unnest(%(partitions)s::integer[], %(offsets)s::bigint[]) AS p("partition", "offset")
WHERE h.consumer_group = %(group)s AND h.topic = %(topic)s AND h."partition" = p."partition"
    AND h."offset" = p."offset"

-- held_parked_left --
-- How many messages a park marked are still held (not yet dead-lettered by their holders).
SELECT count(*) AS held FROM messaging.held_message WHERE park_audit_id = %(audit_id)s
