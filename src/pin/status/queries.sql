-- `pin status`'s named statements (pin/status/database.py).

-- group_members --
-- Per consumer group, its live members (rows of messaging.consumer_member whose heartbeat is within the bound each
-- instance wrote), the partitions they hold, and whether the group is wedged: live members, none holding a
-- partition, and none whose assignment changed (or who joined) within %(wedged_after)s seconds. One index range
-- per group: a handful of rows.
SELECT g.consumer_group AS group_name,
       count(m.member) AS live_members,
       coalesce(sum(m.partitions), 0)::int AS partitions,
       CASE WHEN count(m.member) > 0 AND coalesce(sum(m.partitions), 0) = 0
            THEN EXTRACT(EPOCH FROM now() - max(m.assignment_changed_at))::float8 END AS unassigned_seconds,
       %(wedged_after)s::float8 AS wedged_after_seconds,
       (count(m.member) > 0 AND coalesce(sum(m.partitions), 0) = 0
        AND max(m.assignment_changed_at) < now() - make_interval(secs => %(wedged_after)s)) AS wedged
FROM unnest(%(groups)s::text[]) AS g(consumer_group)
LEFT JOIN messaging.consumer_member m
       ON m.consumer_group = g.consumer_group AND m.heartbeat_at > now() - make_interval(secs => m.stale_after_seconds)
GROUP BY g.consumer_group
