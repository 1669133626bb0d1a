-- The consumer runtime's statements: the group's inbox (inbox.py) and an instance's own row of
-- messaging.consumer_member (membership.py). Each starts with a "-- name --" line and a one-line description;
-- loaded by pin.db.load_queries.

-- inbox_insert --
-- The inbox rows of one partition's messages (a lone message is a batch of one); returns the ids not there before,
-- with the transaction's time (the same on every row): the event's age is measured from it, on the database clock.
INSERT INTO messaging.inbox (consumer_group, message_id, topic, "partition", "offset", occurred_at)
SELECT %s, m.message_id, %s, %s, m."offset", m.occurred_at
FROM unnest(%b::uuid[], %b::bigint[], %b::timestamptz[]) AS m(message_id, "offset", occurred_at)
ON CONFLICT (consumer_group, message_id) DO NOTHING
RETURNING message_id, processed_at

-- inbox_prune --
-- A bounded prune of a group's rows older than the dedup window, oldest first: never long locks, never a whole scan.
WITH old AS (
    SELECT consumer_group, message_id FROM messaging.inbox
    WHERE consumer_group = %s AND processed_at < now() - make_interval(secs => %s)
    ORDER BY processed_at
    LIMIT %s
)
DELETE FROM messaging.inbox AS i USING old
WHERE i.consumer_group = old.consumer_group AND i.message_id = old.message_id

-- member_beat --
-- The instance is alive with these partitions (the assignment: each topic's partition numbers) and its lanes holding
-- these messages in retry: one upsert of one row; the assignment's time moves only when the assignment changed.
INSERT INTO messaging.consumer_member AS m (
    consumer_group, member, partitions, assignment, lanes, lanes_held, lanes_held_total, stale_after_seconds
)
VALUES (
    %(group)s, %(member)s, %(partitions)s, %(assignment)s, %(lanes)s, %(lanes_held)s, %(lanes_held_total)s,
    %(stale_after_seconds)s
)
ON CONFLICT (consumer_group, member) DO UPDATE
SET partitions = EXCLUDED.partitions,
    assignment = EXCLUDED.assignment,
    assignment_changed_at = CASE WHEN m.assignment = EXCLUDED.assignment THEN m.assignment_changed_at ELSE now() END,
    lanes = EXCLUDED.lanes,
    lanes_held = EXCLUDED.lanes_held,
    lanes_held_total = EXCLUDED.lanes_held_total,
    heartbeat_at = now(),
    stale_after_seconds = EXCLUDED.stale_after_seconds

-- member_leave --
-- The instance stopped and left its group.
DELETE FROM messaging.consumer_member WHERE consumer_group = %(group)s AND member = %(member)s

-- members_prune --
-- Rows of instances gone for a day (killed, never stopped cleanly): bounded by the group's key.
DELETE FROM messaging.consumer_member
WHERE consumer_group = %(group)s AND heartbeat_at < now() - interval '1 day'

-- held_failed --
-- A message's attempt failed and it is held for a retry (held.py): one upsert per failed attempt, which backs off;
-- returns the operator's park mark, if any (`pin dlq park` set it: the holder dead-letters the message).
INSERT INTO messaging.held_message AS h (
    consumer_group, topic, "partition", "offset", message_key, message_id, member, fault, error_type, error, attempts,
    next_attempt_at
)
VALUES (
    %(group)s, %(topic)s, %(partition)s, %(offset)s, %(key)s, %(message_id)s, %(member)s, %(fault)s, %(error_type)s,
    %(error)s, %(attempts)s, now() + make_interval(secs => %(retry_in)s)
)
ON CONFLICT (consumer_group, topic, "partition", "offset") DO UPDATE
SET message_key = EXCLUDED.message_key,
    message_id = coalesce(EXCLUDED.message_id, h.message_id),
    member = EXCLUDED.member,
    fault = EXCLUDED.fault,
    error_type = EXCLUDED.error_type,
    error = EXCLUDED.error,
    attempts = greatest(h.attempts + 1, EXCLUDED.attempts),
    last_attempt_at = now(),
    next_attempt_at = EXCLUDED.next_attempt_at
RETURNING park_audit_id

-- held_release --
-- In a held message's retry transaction, before its effect: its row goes with the effect (rolled back with it); a
-- park mark found here means the operator parked it meanwhile, and the attempt stops.
DELETE FROM messaging.held_message
WHERE consumer_group = %(group)s AND topic = %(topic)s AND "partition" = %(partition)s AND "offset" = %(offset)s
RETURNING park_audit_id, error_type, error

-- held_forget --
-- A held message is no longer held (dead-lettered, or parked and dead-lettered): its row goes.
DELETE FROM messaging.held_message
WHERE consumer_group = %(group)s AND topic = %(topic)s AND "partition" = %(partition)s AND "offset" = %(offset)s

-- held_forget_partitions --
-- This instance gives partitions up (a revoke, a stop): its rows of them go, but not those an operator parked
-- (the next holder finds the mark at its first failed attempt and dead-letters the message).
DELETE FROM messaging.held_message AS h
USING unnest(%(topics)s::text[], %(partitions)s::integer[]) AS p(topic, "partition")
WHERE h.consumer_group = %(group)s AND h.member = %(member)s AND h.park_audit_id IS NULL
    AND h.topic = p.topic AND h."partition" = p."partition"

-- held_prune --
-- Rows of messages the group applied since (an instance killed while holding one, whose successor applied it at
-- once): bounded by the group's key and the inbox's primary key.
DELETE FROM messaging.held_message AS h
WHERE h.consumer_group = %(group)s AND h.message_id IS NOT NULL
    AND EXISTS (
        SELECT 1 FROM messaging.inbox AS i WHERE i.consumer_group = h.consumer_group AND i.message_id = h.message_id
    )
