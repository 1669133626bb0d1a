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
