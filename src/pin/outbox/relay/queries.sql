-- The relay's statements. Each starts with a "-- name --" line and a one-line description; see
-- docs/design/relay.md for why they are shaped as they are.

-- outbox_read_owned --
-- Due rows of the vparts whose unexpired lease we hold, behind no waiting row of their key, in id order per vpart.
-- No FOR UPDATE: the lease is the claim (a row lock cannot be held across a broker flush).
SELECT m.id, m.message_id::text, m.vpart::int, l.epoch, m.topic, m.message_key, m.event_type, m.contract_version,
       m.value,
       CASE WHEN m.value IS NULL THEN m.payload::text END, m.headers::text, m.attempts
FROM outbox.relay_lease l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m
    WHERE m.vpart = l.vpart
      AND m.id <> ALL(%(in_flight)s::bigint[])
      AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())
      AND NOT EXISTS (
          SELECT 1 FROM outbox.message e
          WHERE e.message_key = m.message_key AND e.id < m.id AND e.next_attempt_at > now()
      )
      AND NOT EXISTS (SELECT 1 FROM outbox.dead_letter d WHERE d.message_key = m.message_key)
    ORDER BY m.id
    LIMIT %(per_vpart)s
) m
WHERE l.owner = %(owner)s AND l.expires_at > now()
ORDER BY m.id
LIMIT %(limit)s

-- outbox_delete_published --
-- Delete the rows the broker acknowledged, strictly by primary key; their topic and commit -> delete latency. The same
-- statement records where the broker acknowledged them, per topic and partition the highest offset (a mark of
-- outbox.acked_position, which what waits for each consumer group is read against: pin/outbox/waiting.py).
WITH marked AS (
    INSERT INTO outbox.acked_position (topic, kafka_partition, last_offset)
    SELECT * FROM unnest(%(topics)s::text[], %(partitions)s::int[], %(offsets)s::bigint[])
    ON CONFLICT DO NOTHING
)
DELETE FROM outbox.message WHERE id = ANY(%(ids)s::bigint[])
RETURNING topic, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8 AS latency

-- outbox_delete_published_free --
-- At a stop: delete the acknowledged rows no other transaction holds, without waiting (the held ones are sent again);
-- marks where the broker acknowledged them as outbox_delete_published does.
WITH marked AS (
    INSERT INTO outbox.acked_position (topic, kafka_partition, last_offset)
    SELECT * FROM unnest(%(topics)s::text[], %(partitions)s::int[], %(offsets)s::bigint[])
    ON CONFLICT DO NOTHING
)
DELETE FROM outbox.message
WHERE id IN (SELECT id FROM outbox.message WHERE id = ANY(%(ids)s::bigint[]) FOR UPDATE SKIP LOCKED)
RETURNING topic, EXTRACT(EPOCH FROM clock_timestamp() - created_at)::float8 AS latency

-- outbox_mark_failed --
-- One more attempt and a backoff for a failed row, while its lease (owner and epoch) is still ours.
UPDATE outbox.message m
SET attempts = m.attempts + 1,
    next_attempt_at = now() + make_interval(secs => %(delay)s),
    last_error = %(error)s
FROM outbox.relay_lease l
WHERE m.id = %(id)s
  AND l.vpart = m.vpart AND l.owner = %(owner)s AND l.epoch = %(epoch)s AND l.expires_at > now()
RETURNING m.attempts

-- outbox_dead_letter --
-- Move a row to outbox.dead_letter with its error in one statement, while its lease is still ours.
-- {moved_columns}: the row's columns a dead letter keeps (outbox/writer.py: MOVED_COLUMNS), its value included.
WITH moved AS (
    DELETE FROM outbox.message m USING outbox.relay_lease l
    WHERE m.id = %(id)s
      AND l.vpart = m.vpart AND l.owner = %(owner)s AND l.epoch = %(epoch)s AND l.expires_at > now()
    RETURNING m.*
)
INSERT INTO outbox.dead_letter ({moved_columns}, attempts, error, permanent)
SELECT {moved_columns}, attempts + 1, %(error)s, %(permanent)s
FROM moved
RETURNING id

-- relay_instance_heartbeat --
-- Register this instance, or push its expiry on.
INSERT INTO outbox.relay_instance (instance_id, expires_at)
VALUES (%(owner)s, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (instance_id) DO UPDATE SET expires_at = EXCLUDED.expires_at

-- relay_instance_purge --
-- Forget the instances that stopped heartbeating a while ago.
DELETE FROM outbox.relay_instance WHERE expires_at < now() - interval '1 minute'

-- relay_instance_count_live --
-- The instances alive now: the fair share of each is the vparts divided by this.
SELECT count(*) AS live FROM outbox.relay_instance WHERE expires_at > now()

-- relay_instance_delete --
-- Unregister this instance (graceful stop).
DELETE FROM outbox.relay_instance WHERE instance_id = %(owner)s

-- relay_lease_renew --
-- Renew our unexpired leases; one that already expired is not renewed (another instance may hold it by now).
UPDATE outbox.relay_lease SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE owner = %(owner)s AND expires_at > now()
RETURNING vpart, epoch

-- relay_lease_acquire_free --
-- Take free or expired leases up to the limit, each with a new epoch (the fencing token).
WITH free AS (
    SELECT vpart FROM outbox.relay_lease
    WHERE owner IS NULL OR expires_at <= now()
    ORDER BY vpart
    LIMIT %(limit)s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE outbox.relay_lease l
SET owner = %(owner)s, epoch = l.epoch + 1, expires_at = now() + make_interval(secs => %(ttl)s),
    acquired_at = now()
FROM free
WHERE l.vpart = free.vpart
RETURNING l.vpart, l.epoch

-- relay_lease_release --
-- Give back some of our leases, free at once for the other instances.
UPDATE outbox.relay_lease SET owner = NULL, expires_at = '-infinity'
WHERE owner = %(owner)s AND vpart = ANY(%(vparts)s)
