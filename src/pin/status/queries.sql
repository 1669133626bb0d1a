-- The statements of `pin status` (database.py): bounded reads, each count stopping at a cap. They are templates:
-- database.py fills {count_cap} and {shown_poison_items} from its constants, once, and a
-- job's {due} items (due_oldest_first, from the job's DueItems) into due_backlog.
-- Each statement starts with a "-- name --" line and its description; loaded by pin.db.load_queries.

-- clock --
-- The database's now(): the moment the snapshot describes.
SELECT now() AS now

-- due_oldest_first --
-- A job's due items, oldest first (as the claim takes them), with their id and due time; binds %(as_of)s.
SELECT {a}.id, {a}.{due_at} AS due_at FROM {table} AS {a} WHERE {condition} ORDER BY {a}.{due_at}, {a}.id

-- due_backlog --
-- One job's backlog: its due items up to the cap, and the oldest of them (the claim's AsOf: now()).
SELECT count(*) AS count, count(*) = {count_cap} AS capped, min(due_at) AS oldest_due_at,
       EXTRACT(EPOCH FROM now() - min(due_at))::float8 AS oldest_overdue_seconds,
       (SELECT oldest.id::text FROM ({due} LIMIT 1) AS oldest) AS oldest_id
FROM ({due} LIMIT {count_cap}) AS due

-- job_cycles --
-- The last cycle of every instance of every job, the most recent first.
SELECT job, instance, run_id::text AS run_id, as_of, finished_at, duration_ms, counters, succeeded,
       EXTRACT(EPOCH FROM now() - finished_at)::float8 AS seconds_ago
FROM jobs.cycle ORDER BY job, finished_at DESC

-- poison_per_job --
-- Every job's poison items: how many, how often tried, since when.
SELECT job, count(*) AS items, max(attempts) AS max_attempts, min(first_failed_at) AS failing_since,
       max(last_failed_at) AS last_failed_at
FROM jobs.item_failure GROUP BY job

-- poison_longest_failing --
-- The longest failing few poison items of each job.
SELECT job, item_id::text AS id, attempts, last_error, first_failed_at AS failing_since, last_failed_at
FROM (SELECT f.*, row_number() OVER (PARTITION BY job ORDER BY first_failed_at, item_id) AS n
      FROM jobs.item_failure AS f) AS ranked
WHERE n <= {shown_poison_items} ORDER BY job, n

-- outbox_per_topic --
-- The outbox rows waiting per topic, up to the cap %(cap)s (`pin status`'s, or the console's smaller one): read past
-- each vpart's floor (outbox.unpublished), never through the dead rows a held horizon keeps.
SELECT topic, count(*) AS rows, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_seconds,
       count(*) FILTER (WHERE next_attempt_at > now()) AS backing_off, max(attempts) AS max_attempts
FROM (SELECT topic, created_at, next_attempt_at, attempts FROM outbox.unpublished LIMIT %(cap)s) AS m
GROUP BY topic ORDER BY topic

-- outbox_lag --
-- The age of the oldest outbox row waiting (0 when none waits): the first row of each vpart past its floor (the
-- parts of outbox.unpublished, {{past}} read in id order; ids are taken in creation order), never a walk of the dead rows.
SELECT coalesce((
    SELECT EXTRACT(EPOCH FROM now() - w.created_at)::float8
    FROM outbox.relay_floor l
    CROSS JOIN LATERAL (
        (SELECT m.id, m.created_at FROM outbox.message m WHERE {past} ORDER BY m.id LIMIT 1)
        UNION ALL
        (SELECT m.id, m.created_at FROM {since} AS m)
        UNION ALL
        (SELECT m.id, m.created_at FROM {running} AS m)
    ) w
    ORDER BY w.id
    LIMIT 1
), 0.0) AS seconds

-- outbox_dead_letters_per_topic --
-- The outbox's dead letters per topic, up to the cap.
SELECT topic, count(*) AS rows, min(dead_lettered_at) AS first_at, max(dead_lettered_at) AS last_at
FROM (SELECT topic, dead_lettered_at FROM outbox.dead_letter LIMIT {count_cap}) AS d
GROUP BY topic ORDER BY topic

-- relay_leases_per_owner --
-- The relay instances holding live leases (their instance row unexpired: outbox.relay_lease_state), how many vparts
-- each, and when its instance row expires unless renewed.
SELECT owner, count(*) AS vparts, EXTRACT(EPOCH FROM min(expires_at) - now())::float8 AS expires_in_seconds
FROM outbox.relay_lease_state WHERE live
GROUP BY owner ORDER BY owner

-- cdc_slot --
-- The replication slot %(slot)s: whether it exists, whether a reader streams from it, the WAL it keeps.
SELECT %(slot)s AS slot, count(s.slot_name) > 0 AS exists, bool_or(s.active) AS active,
       max(pg_current_wal_lsn() - s.restart_lsn)::float8 AS retained_wal_bytes, max(s.wal_status) AS wal_status
FROM (SELECT 1) AS one LEFT JOIN pg_replication_slots s ON s.slot_name = %(slot)s

-- inbox_of_group --
-- Per group: an index range over (consumer_group, processed_at), never a scan of the inbox.
SELECT max(processed_at) AS last_processed_at,
       EXTRACT(EPOCH FROM now() - max(processed_at))::float8 AS last_processed_seconds_ago,
       (SELECT count(*) FROM (SELECT 1 FROM messaging.inbox i
         WHERE i.consumer_group = %(group)s AND i.processed_at > now() - interval '5 minutes'
         LIMIT {count_cap}) s) AS processed_last_5_min,
       (SELECT count(*) FROM (SELECT 1 FROM messaging.dead_letter d
         WHERE d.consumer_group = %(group)s AND d.disposition = 'parked'
         LIMIT {count_cap}) p) AS parked_letters,
       -- the SLA's measure over the latest events of the window (at most COUNT_CAP of them): OccurredAt to the
       -- effect's transaction, both on the database clock, as pin_consumer_event_age_seconds observes it
       (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY r.age) FROM (
          SELECT EXTRACT(EPOCH FROM i.processed_at - i.occurred_at)::float8 AS age FROM messaging.inbox i
          WHERE i.consumer_group = %(group)s AND i.processed_at > now() - make_interval(secs => %(window)s)
            AND i.occurred_at IS NOT NULL
          ORDER BY i.processed_at DESC LIMIT {count_cap}) r) AS recent_p99_age_seconds,
       %(sla)s::float8 AS sla_seconds
FROM messaging.inbox WHERE consumer_group = %(group)s

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
