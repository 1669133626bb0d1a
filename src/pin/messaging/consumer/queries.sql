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
-- The instance is alive with this many partitions: one upsert of one row; the assignment's time moves only when the
-- count changed.
INSERT INTO messaging.consumer_member AS m (consumer_group, member, partitions, stale_after_seconds)
VALUES (%(group)s, %(member)s, %(partitions)s, %(stale_after_seconds)s)
ON CONFLICT (consumer_group, member) DO UPDATE
SET partitions = EXCLUDED.partitions,
    assignment_changed_at = CASE WHEN m.partitions = EXCLUDED.partitions THEN m.assignment_changed_at ELSE now() END,
    heartbeat_at = now(),
    stale_after_seconds = EXCLUDED.stale_after_seconds

-- member_leave --
-- The instance stopped and left its group.
DELETE FROM messaging.consumer_member WHERE consumer_group = %(group)s AND member = %(member)s

-- members_prune --
-- Rows of instances gone for a day (killed, never stopped cleanly): bounded by the group's key.
DELETE FROM messaging.consumer_member
WHERE consumer_group = %(group)s AND heartbeat_at < now() - interval '1 day'
