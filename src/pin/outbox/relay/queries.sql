-- The relay's statements. Each starts with a "-- name --" line and a one-line description; see
-- docs/design/relay.md for why they are shaped as they are.

-- outbox_read_owned --
-- Due rows of the vparts whose live lease we hold, behind no waiting row of their key, in id order per vpart, read
-- past the floors this instance keeps ({given}: {past}, {since}, {running}: docs/design/outbox-storage.md), never
-- from a vpart's head. Each part filters before its limit, so the read stops after a share of rows whatever the
-- backlog. The lease is judged here, on the database: ours (owner), at the epoch returned, and live ({live}).
-- No FOR UPDATE: the lease is the claim (a row lock cannot be held across a broker flush).
SELECT m.id, m.message_id::text, m.vpart::int, o.epoch, m.topic, m.message_key, m.event_type, m.contract_version,
       m.value,
       CASE WHEN m.value IS NULL THEN m.payload::text END, m.headers::text, m.attempts
FROM {given} AS l
JOIN outbox.relay_lease o ON o.vpart = l.vpart AND o.owner = %(owner)s
CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT * FROM outbox.message m WHERE {past} AND {sendable} ORDER BY m.id LIMIT %(per_vpart)s)
        UNION ALL
        (SELECT * FROM {since} AS m WHERE {sendable})
        UNION ALL
        (SELECT * FROM {running} AS m WHERE {sendable})
    ) m
    ORDER BY m.id
    LIMIT %(per_vpart)s
) m
WHERE {live}
ORDER BY m.id
LIMIT %(limit)s

-- outbox_read_sendable --
-- Fragment: row m may be sent now: not in flight, due, behind no row of its key in back-off nor a dead letter. The
-- back-off guard is fenced (OFFSET 0: a subplan, never an anti-join), so that it stays a probe of its key along
-- ix_outbox_message_backoff: as an anti-join, some statistics (a table analyzed while its rows were all dead) make it
-- a scan of the whole index, once per row read, filtered by key, and every row ever in back-off that a held horizon
-- keeps dead is walked (docs/design/outbox-storage.md).
m.id <> ALL(%(in_flight)s::bigint[])
AND (m.next_attempt_at IS NULL OR m.next_attempt_at <= now())
AND NOT EXISTS (
    SELECT 1 FROM outbox.message e
    WHERE e.message_key = m.message_key AND e.id < m.id AND e.next_attempt_at > now()
    OFFSET 0
)
AND NOT EXISTS (SELECT 1 FROM outbox.dead_letter d WHERE d.message_key = m.message_key)

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
-- One more attempt and a backoff for a failed row, while its lease (owner and epoch) is still ours and live.
UPDATE outbox.message m
SET attempts = m.attempts + 1,
    next_attempt_at = now() + make_interval(secs => %(delay)s),
    last_error = %(error)s
FROM outbox.relay_lease o
WHERE m.id = %(id)s
  AND o.vpart = m.vpart AND o.owner = %(owner)s AND o.epoch = %(epoch)s AND {live}
RETURNING m.attempts

-- outbox_dead_letter --
-- Move a row to outbox.dead_letter with its error in one statement, while its lease is still ours and live.
-- {moved_columns}: the row's columns a dead letter keeps (outbox/writer.py: MOVED_COLUMNS), its value included.
WITH moved AS (
    DELETE FROM outbox.message m USING outbox.relay_lease o
    WHERE m.id = %(id)s
      AND o.vpart = m.vpart AND o.owner = %(owner)s AND o.epoch = %(epoch)s AND {live}
    RETURNING m.*
)
INSERT INTO outbox.dead_letter ({moved_columns}, attempts, error, permanent)
SELECT {moved_columns}, attempts + 1, %(error)s, %(permanent)s
FROM moved
RETURNING id

-- relay_lease_live --
-- Fragment, a condition: our leases (o.owner = %(owner)s, which the statement also requires) are live, our instance
-- row unexpired (the heartbeat renews that one row; the view outbox.relay_lease_state applies the same rule for
-- operators). Not correlated with o, so it is one probe a statement, not one a vpart: under a held horizon that
-- row keeps a version a heartbeat which every probe steps over.
EXISTS (SELECT 1 FROM outbox.relay_instance i WHERE i.instance_id = %(owner)s AND i.expires_at > now())

-- relay_floors_given --
-- Fragment, a row source: the floors this instance keeps in memory (outbox/floors.py: Floors), one row per vpart, in
-- the shape of an outbox.relay_floor row (floor_xip given as the text of a bigint[] each).
(SELECT f.vpart, f.floor_id, f.floor_xmax, f.floor_xip::bigint[] AS floor_xip
 FROM unnest(%(vparts)s::smallint[], %(floor_ids)s::bigint[], %(floor_xmaxs)s::bigint[], %(floor_xips)s::text[])
      AS f (vpart, floor_id, floor_xmax, floor_xip))

-- relay_instance_renew --
-- Push this instance's expiry on, and with it every lease it holds; only while it has not expired: an expired
-- instance's leases may be another's by now, so it gives them all up and registers again (the next two). Judged on
-- the clock when the row is updated (clock_timestamp, not the transaction's start), also after waiting for a
-- relay that is taking its leases over (relay_lease_acquire_free locks an expired instance's row).
UPDATE outbox.relay_instance SET expires_at = clock_timestamp() + make_interval(secs => %(ttl)s)
WHERE instance_id = %(owner)s AND expires_at > clock_timestamp()
RETURNING instance_id

-- relay_lease_give_up_expired --
-- This instance expired (or was never registered): the leases still in its name are given up, so that whoever takes
-- them, this instance included, does so at a new epoch (a batch read before the expiry can no longer be settled).
UPDATE outbox.relay_lease SET owner = NULL WHERE owner = %(owner)s RETURNING vpart

-- relay_instance_register --
-- Register this instance, with no lease yet.
INSERT INTO outbox.relay_instance (instance_id, expires_at)
VALUES (%(owner)s, clock_timestamp() + make_interval(secs => %(ttl)s))
ON CONFLICT (instance_id) DO UPDATE SET expires_at = EXCLUDED.expires_at, started_at = clock_timestamp()

-- relay_instance_purge --
-- Forget the instances that stopped heartbeating a while ago (never waiting on a row another transaction holds).
DELETE FROM outbox.relay_instance
WHERE instance_id IN (
    SELECT instance_id FROM outbox.relay_instance WHERE expires_at < now() - interval '1 minute'
    FOR UPDATE SKIP LOCKED
)

-- relay_instance_count_live --
-- The instances alive now: the fair share of each is the vparts divided by this.
SELECT count(*) AS live FROM outbox.relay_instance WHERE expires_at > now()

-- relay_instance_delete --
-- Unregister this instance (graceful stop).
DELETE FROM outbox.relay_instance WHERE instance_id = %(owner)s

-- relay_lease_owned --
-- The vparts this instance holds, and the epoch of each (reads the lease rows, writes nothing).
SELECT vpart, epoch FROM outbox.relay_lease WHERE owner = %(owner)s

-- relay_lease_acquire_free --
-- Take free leases, or those of an instance that expired (or is gone), up to the limit, each with a new epoch (the
-- fencing token). The expired instances' rows are locked (FOR SHARE) until this transaction ends, so that a renewal
-- of theirs racing with the take-over waits and then finds it expired; one being renewed now (locked: skipped) is
-- not taken over. A lease whose epoch moved since this statement's snapshot (its owner gave it up and took it
-- again) is skipped when it is locked. The instance rows are read once a statement (hashed), not once a vpart.
WITH dead AS (
    SELECT instance_id FROM outbox.relay_instance WHERE expires_at <= now() FOR SHARE SKIP LOCKED
), takeable AS (
    SELECT l.vpart, l.epoch FROM outbox.relay_lease l
    WHERE l.owner IS NULL
       OR l.owner IN (SELECT instance_id FROM dead)
       OR l.owner NOT IN (SELECT instance_id FROM outbox.relay_instance)
), free AS (
    SELECT l.vpart FROM outbox.relay_lease l JOIN takeable t ON t.vpart = l.vpart AND t.epoch = l.epoch
    ORDER BY l.vpart
    LIMIT %(limit)s
    FOR NO KEY UPDATE OF l SKIP LOCKED
)
UPDATE outbox.relay_lease l
SET owner = %(owner)s, epoch = l.epoch + 1, acquired_at = now()
FROM free
WHERE l.vpart = free.vpart
RETURNING l.vpart, l.epoch

-- relay_lease_release --
-- Give back some of our leases, free at once for the other instances.
UPDATE outbox.relay_lease SET owner = NULL
WHERE owner = %(owner)s AND vpart = ANY(%(vparts)s)

-- relay_floor_load --
-- The stored floors of vparts this instance just took (written by their previous owner, or older: any stored floor
-- is valid). A floor whose snapshot is ahead of the server's (a restore into another cluster: new transaction ids)
-- starts over from id 0 before any read.
SELECT f.vpart,
       CASE WHEN f.floor_xmax > pg_snapshot_xmax(pg_current_snapshot())::text::bigint THEN 0
            ELSE f.floor_id END AS floor_id,
       least(f.floor_xmax, pg_snapshot_xmax(pg_current_snapshot())::text::bigint) AS floor_xmax,
       f.floor_xip
FROM outbox.relay_floor f
WHERE f.vpart = ANY(%(vparts)s::smallint[])

-- relay_floor_advance --
-- The floors this instance keeps ({given}), each moved up to just below its oldest waiting row as this statement's
-- snapshot sees it ({past}, {since}, {running}), or to the last id taken when none waits; docs/design/outbox-storage.md
-- proves that no row is ever left below it. Reads only: the floors stay in the relay's memory (relay_floor_write).
SELECT l.vpart,
       CASE WHEN l.floor_xmax > pg_snapshot_xmax(pg_current_snapshot())::text::bigint THEN 0 ELSE coalesce(
           least(
               (SELECT m.id FROM outbox.message m WHERE {past} ORDER BY m.id LIMIT 1),
               (SELECT min(m.id) FROM {since} AS m),
               (SELECT min(m.id) FROM {running} AS m)
           ) - 1,
           greatest(l.floor_id, pg_sequence_last_value(pg_get_serial_sequence('outbox.message', 'id')::regclass))
       ) END AS floor_id,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS floor_xmax,
       ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(pg_current_snapshot()) AS x) AS floor_xip
FROM {given} AS l

-- relay_plan_advance --
-- For the rest of the heartbeat's transaction (after outbox_plan_by_index), no sort: the advance's first part
-- (ORDER BY id LIMIT 1) stays a walk of (vpart, id) from the floor, in id order, stopped at its first row. Free to
-- sort, on a table analyzed while all its rows were dead (an automatic analyze under a held horizon: many pages, no
-- rows) it read the whole vpart along (vpart, xid) and sorted it: every dead row, at every heartbeat. The advance and
-- the floors' write that follows it need no sort.
SELECT set_config('enable_sort', 'off', true)

-- relay_floor_write --
-- Store some of the floors this instance keeps ({given}) for the other readers (outbox.unpublished, the gauges, the
-- next owner), of the vparts it still holds: a stale owner's floor would be valid too, only older.
UPDATE outbox.relay_floor f
SET floor_id = l.floor_id, floor_xmax = l.floor_xmax, floor_xip = l.floor_xip, floor_at = now()
FROM {given} AS l
WHERE f.vpart = l.vpart
  AND EXISTS (SELECT 1 FROM outbox.relay_lease o WHERE o.vpart = l.vpart AND o.owner = %(owner)s)
