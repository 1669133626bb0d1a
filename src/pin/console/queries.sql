-- The console's reads (pages.py): every one bounded by a LIMIT or by a small table (leases, members, pauses). Each
-- starts with a "-- name --" line and a one-line description; loaded by pin.db.load_queries.

-- console_outbox_waiting --
-- One page of the outbox rows waiting, oldest first after the keyset cursor %(after)s (an id), of one topic or all:
-- the rows of outbox.unpublished read as the relay reads them, per vpart past its floor ({{past}} in id order, each
-- vpart's first %(limit)s only; {{since}} and {{running}}, the few rows of late transactions), then merged. Never a
-- walk of outbox.message by id (the dead rows a held horizon keeps are below the floors).
SELECT w.id, w.message_id, w.vpart, w.topic, w.message_key, w.event_type, w.created_at, w.attempts,
       w.next_attempt_at, w.last_error
FROM outbox.relay_floor l
CROSS JOIN LATERAL (
    (SELECT m.* FROM outbox.message m
     WHERE m.vpart = l.vpart AND (m.vpart, m.id) > (l.vpart, GREATEST(l.floor_id, %(after)s::bigint))
       AND (%(topic)s::text IS NULL OR m.topic = %(topic)s::text)
     ORDER BY m.id LIMIT %(limit)s)
    UNION ALL
    (SELECT m.* FROM {since} AS m
     WHERE (%(after)s::bigint IS NULL OR m.id > %(after)s::bigint)
       AND (%(topic)s::text IS NULL OR m.topic = %(topic)s::text))
    UNION ALL
    (SELECT m.* FROM {running} AS m
     WHERE (%(after)s::bigint IS NULL OR m.id > %(after)s::bigint)
       AND (%(topic)s::text IS NULL OR m.topic = %(topic)s::text))
) w
ORDER BY w.id
LIMIT %(limit)s

-- console_lease_map --
-- Every vpart's lease (outbox.relay_lease_state: live while its owner's instance row is unexpired): its owner, epoch,
-- the owner's expiry, and its stored floor (outbox.relay_floor, docs/design/outbox-storage.md): the id below which
-- nothing waits and when its owner last stored it (only when it moved, at most every few seconds). An owned vpart
-- whose owner's heartbeat stopped for %(stale_after)s seconds (its instance row expired that long ago) is stale.
-- 64 rows.
SELECT l.vpart, l.owner, l.epoch, CASE WHEN isfinite(l.expires_at) THEN l.expires_at END AS expires_at,
       l.acquired_at, l.live, f.floor_id, f.floor_at,
       EXTRACT(EPOCH FROM now() - f.floor_at)::float8 AS floor_age_seconds,
       coalesce(l.owner IS NOT NULL AND NOT l.live
                AND coalesce(l.expires_at, '-infinity') < now() - make_interval(secs => %(stale_after)s), false)
           AS floor_stale
FROM outbox.relay_lease_state l
JOIN outbox.relay_floor f USING (vpart)
ORDER BY l.vpart

-- console_relay_dead_letters --
-- One page of the relay's dead letters, newest first before the keyset cursor %(before)s (an outbox id); each filter
-- optional.
SELECT id, message_id, topic, message_key, event_type, attempts, permanent, error, created_at, dead_lettered_at
FROM outbox.dead_letter
WHERE (%(before)s::bigint IS NULL OR id < %(before)s::bigint)
  AND (%(topic)s::text IS NULL OR topic = %(topic)s::text)
  AND (%(key)s::text IS NULL OR message_key = %(key)s::text)
  AND (%(error)s::text IS NULL OR strpos(lower(error), lower(%(error)s::text)) > 0)
  AND (%(since)s::timestamptz IS NULL OR dead_lettered_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR dead_lettered_at < %(until)s::timestamptz)
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
ORDER BY id DESC
LIMIT %(limit)s

-- console_relay_dead_letter_one --
-- One of the relay's dead letters, whole (payload and headers), with the rows of its key it holds back.
SELECT d.*, (SELECT count(*) FROM (SELECT 1 FROM outbox.message m WHERE m.message_key = d.message_key
                                   LIMIT 10001) AS behind) AS held_back
FROM outbox.dead_letter d
WHERE d.id = %(id)s

-- console_held --
-- The messages consumers hold in retry, of one group or all, of one key or all; the longest held first.
SELECT consumer_group, topic, "partition", "offset", message_key, message_id,
       member, fault, error_type, error, attempts, since, last_attempt_at, next_attempt_at, park_audit_id
FROM messaging.held_message
WHERE (%(group)s::text IS NULL OR consumer_group = %(group)s::text)
  AND (%(key)s::bytea IS NULL OR message_key = %(key)s::bytea)
ORDER BY since, consumer_group, topic, "partition", "offset"
LIMIT %(limit)s

-- console_poison --
-- The workers' poison items, of one job or all, of one item or all; the longest failing first.
SELECT job, item_id, attempts, last_error, first_failed_at, last_failed_at
FROM jobs.item_failure
WHERE (%(job)s::text IS NULL OR job = %(job)s::text) AND (%(item)s::uuid IS NULL OR item_id = %(item)s::uuid)
ORDER BY first_failed_at, item_id
LIMIT %(limit)s

-- console_cycles --
-- The last cycle of every worker instance, the most recent first.
SELECT job, instance, as_of, finished_at, duration_ms, counters, succeeded,
       EXTRACT(EPOCH FROM now() - finished_at)::float8 AS seconds_ago
FROM jobs.cycle
ORDER BY finished_at DESC
LIMIT %(limit)s

-- console_outbox_of_key --
-- A key's rows waiting in the outbox, oldest first (the index on message_key, id).
SELECT id, message_id, topic, event_type, created_at, attempts, next_attempt_at, last_error
FROM outbox.message
WHERE message_key = %(key)s
ORDER BY id
LIMIT %(limit)s

-- console_members --
-- The consumer instances of one group or all, live or not (a heartbeat within its bound), as each records itself:
-- which partitions it holds and since when, its lanes and what they held in retry at its last heartbeat, and how
-- many messages it holds in retry now (messaging.held_message, a handful per group).
SELECT m.consumer_group, m.member, m.partitions, m.assignment, m.assignment_changed_at, m.lanes, m.lanes_held,
       m.lanes_held_total, m.heartbeat_at, m.stale_after_seconds,
       m.heartbeat_at > now() - make_interval(secs => m.stale_after_seconds) AS live,
       (SELECT count(*) FROM messaging.held_message h
        WHERE h.consumer_group = m.consumer_group AND h.member = m.member) AS held
FROM messaging.consumer_member m
WHERE %(group)s::text IS NULL OR m.consumer_group = %(group)s::text
ORDER BY m.consumer_group, m.member

-- console_open_group_letters --
-- Per consumer group, its open dead letters (those not replayed nor discarded), each count stopping at 10 001.
SELECT g.consumer_group,
       (SELECT count(*) FROM (SELECT 1 FROM messaging.dead_letter_index i
         WHERE i.consumer_group = g.consumer_group AND i.resolution IS NULL LIMIT 10001) AS open) AS open_letters
FROM unnest(%(groups)s::text[]) AS g(consumer_group)

-- console_inbox_holds --
-- Which of these MessageIds a group's inbox already holds (applied: a replay of them would be skipped).
SELECT message_id FROM messaging.inbox WHERE consumer_group = %(group)s AND message_id = ANY(%(ids)s::uuid[])

-- console_purchase_versions --
-- The newest Version a context stored of these purchases (its boost's Version guard); {schema} is the context's.
SELECT purchase_id, version FROM {schema}.purchase WHERE purchase_id = ANY(%(ids)s::uuid[])

-- replay_job_start --
-- A job (a replay or a discard), running from now on; returns its id.
INSERT INTO operations.replay_job (audit_id, filter, total, action)
VALUES (%(audit_id)s, %(filter)s, %(total)s, %(action)s)
RETURNING id

-- replay_job_count --
-- How many open letters a job's filter matches when it starts (stops counting at 1 000 001).
SELECT count(*) AS letters FROM (SELECT 1 FROM messaging.dead_letter_index
  WHERE resolution IS NULL AND (%(group)s::text IS NULL OR consumer_group = %(group)s::text)
    AND (%(topic)s::text IS NULL OR topic = %(topic)s::text) AND (%(key)s::text IS NULL OR key_text = %(key)s::text)
    AND (%(error)s::text IS NULL OR strpos(lower(error_type || ': ' || error), lower(%(error)s::text)) > 0)
    AND (%(since)s::timestamptz IS NULL OR failed_at >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR failed_at < %(until)s::timestamptz)
    AND (%(message_id)s::uuid IS NULL OR message_id = %(message_id)s::uuid)
  LIMIT 1000001) AS matched

-- replay_job_count_relay --
-- How many of the relay's dead letters a job's filter matches when it starts: {{letters}} is console_relay_dead_letters
-- (with no cursor and a limit of 1 000 001), counted.
SELECT count(*) AS letters FROM ({letters}) AS matched

-- replay_job_claim --
-- The oldest running job (a replay or a discard) no other relay is working on now, locked for this turn.
SELECT id, filter, audit_id, action FROM operations.replay_job WHERE state = 'running'
ORDER BY id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED

-- replay_job_progress --
-- A turn's progress; the job ends (done) when the turn found nothing left.
UPDATE operations.replay_job
SET replayed = replayed + %(replayed)s, apply = apply + %(apply)s, skip = skip + %(skip)s, refuse = refuse + %(refuse)s,
    state = CASE WHEN %(finished)s THEN 'done' ELSE state END, updated_at = now()
WHERE id = %(id)s

-- replay_job_fail --
-- A job the broker or the database keeps failing: stopped with its error.
UPDATE operations.replay_job SET state = 'failed', error = %(error)s, updated_at = now() WHERE id = %(id)s

-- replay_job_cancel --
-- Cancel a running job; true when it was running.
UPDATE operations.replay_job SET state = 'cancelled', updated_at = now()
WHERE id = %(id)s AND state = 'running'
RETURNING true AS cancelled

-- replay_job_recent --
-- The latest jobs (replays and discards), newest first.
SELECT id, created_at, updated_at, audit_id, filter, action, state, total, replayed, apply, skip, refuse, error
FROM operations.replay_job ORDER BY id DESC LIMIT %(limit)s
