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

-- dead_letter_index_write --
-- Index a consumer group's dead letter, one row per origin: writing it again (a retried dead letter, a cut or parked
-- one) updates it and opens it again.
INSERT INTO messaging.dead_letter_index AS d
    (consumer_group, topic, "partition", "offset", message_key, key_text, message_id, message_value, header_names,
     header_values, value_size, error_type, error, attempts, disposition, stored_id)
VALUES (%(group)s, %(topic)s, %(partition)s, %(offset)s, %(key)s, %(key_text)s, %(message_id)s, %(value)s,
        %(header_names)s, %(header_values)s, %(value_size)s, %(error_type)s, %(error)s, %(attempts)s,
        %(disposition)s, %(stored_id)s)
ON CONFLICT (consumer_group, topic, "partition", "offset") DO UPDATE
SET message_value = EXCLUDED.message_value, error_type = EXCLUDED.error_type, error = EXCLUDED.error,
    attempts = EXCLUDED.attempts, disposition = EXCLUDED.disposition, stored_id = EXCLUDED.stored_id,
    failed_at = now(), resolution = NULL, resolved_at = NULL, resolved_audit_id = NULL
RETURNING d.id

-- dead_letter_index_page --
-- One page of the groups' dead letters, newest first, after the keyset cursor %(before)s (an id); each filter is
-- optional. Bounded by the caller's limit.
SELECT id, consumer_group, topic, "partition", "offset", key_text, message_id, error_type, error, attempts,
       failed_at, disposition, resolution, resolved_at, value_size
FROM messaging.dead_letter_index
WHERE (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
  AND (%(group)s::text IS NULL OR consumer_group = %(group)s::text)
  AND (%(topic)s::text IS NULL OR topic = %(topic)s::text)
  AND (%(key)s::text IS NULL OR key_text = %(key)s::text)
  AND (%(error)s::text IS NULL OR strpos(lower(error_type || ': ' || error), lower(%(error)s::text)) > 0)
  AND (%(since)s::timestamptz IS NULL OR failed_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR failed_at < %(until)s::timestamptz)
  AND (%(resolved)s::boolean OR resolution IS NULL)
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(message_id)s::uuid IS NULL OR message_id = %(message_id)s::uuid)
ORDER BY id DESC
LIMIT %(limit)s

-- dead_letter_index_one --
-- One indexed dead letter with its bytes (the full ones from messaging.dead_letter when the row keeps them).
SELECT i.id, i.consumer_group, i.topic, i."partition", i."offset", i.message_key, i.key_text, i.message_id,
       coalesce(s.message_value, i.message_value) AS message_value, i.header_names, i.header_values, i.value_size,
       i.error_type, i.error, i.attempts, i.failed_at, i.disposition, i.stored_id, i.resolution, i.resolved_at,
       i.resolved_audit_id
FROM messaging.dead_letter_index i
LEFT JOIN messaging.dead_letter s ON s.id = i.stored_id
WHERE i.id = %(id)s

-- dead_letter_index_resolve --
-- Mark open dead letters resolved (replayed or discarded) by an operator's action; returns the ids marked.
UPDATE messaging.dead_letter_index
SET resolution = %(resolution)s, resolved_at = now(), resolved_audit_id = %(audit_id)s
WHERE id = ANY(%(ids)s::bigint[]) AND resolution IS NULL
RETURNING id
