-- A consumer instance's own row of messaging.consumer_member (pin/messaging/consumer/membership.py).

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
