-- The outbox writer's statements. Each starts with a "-- name --" line and a one-line description; the column
-- lists in braces are filled in from the writer's one column tuple (outbox/writer.py: _COLUMNS, MOVED_COLUMNS).

-- outbox_insert_values --
-- A few rows given as parameters, in the order given (per key, id order is commit order): the unit of work's insert,
-- and the fragment a statement writing a few rows embeds as a data-modifying CTE (the calendar cluster's write).
INSERT INTO outbox.message ({columns})
VALUES {rows}

-- outbox_insert_unnest --
-- A batch given as one binary array per column, kept when {where} holds, in the order given: the fragment a
-- set-based statement embeds (the expire-promotions batch, keeping the rows of the purchases it changed).
INSERT INTO outbox.message ({columns})
SELECT {values}
  FROM unnest({arrays}) WITH ORDINALITY AS m({columns}, n)
 WHERE {where}
 ORDER BY m.n

-- outbox_delete_captured --
-- cdc mode: the rows this transaction inserted, by their MessageId (both rows of a dual-published event).
DELETE FROM outbox.message WHERE message_id = ANY(%s::uuid[])

-- outbox_put_back --
-- A dead letter back into the outbox under its own id (smaller than every later row of its key: first again).
INSERT INTO outbox.message ({moved_columns}) OVERRIDING SYSTEM VALUE VALUES ({placeholders})

-- dead_letter_list --
-- The oldest dead letters, each with how many rows of its key wait behind it.
SELECT d.id, d.message_id, d.topic, d.message_key, d.event_type, d.attempts, d.permanent, d.error,
       d.created_at, d.dead_lettered_at,
       (SELECT count(*) FROM outbox.message m WHERE m.message_key = d.message_key) AS held_back
FROM outbox.dead_letter d
ORDER BY d.id
LIMIT %(limit)s

-- dead_letter_take --
-- Take one dead letter (or all, or all of a topic) out, oldest first, with what the outbox row needs back (the
-- writer's moved columns, the payload as text); the writer puts each back under its original id, which (smaller
-- than every later row of its key) puts it back at the head of its key.
WITH moved AS (
    DELETE FROM outbox.dead_letter
     WHERE (%(message_id)s::uuid IS NULL OR message_id = %(message_id)s)
       AND (%(topic)s::text IS NULL OR topic = %(topic)s)
    RETURNING *
)
SELECT {moved_columns}
FROM moved
ORDER BY id

-- dead_letter_discard --
-- Discard one dead letter: out of outbox.dead_letter (its key's later rows flow), kept in outbox.dead_letter_discarded.
WITH gone AS (
    DELETE FROM outbox.dead_letter
     WHERE message_id = %(message_id)s AND (%(topic)s::text IS NULL OR topic = %(topic)s)
    RETURNING *
)
INSERT INTO outbox.dead_letter_discarded
SELECT gone.* FROM gone
RETURNING message_id

-- dead_letter_topics --
-- The topics of a MessageId's dead letters.
SELECT topic FROM outbox.dead_letter WHERE message_id = %(message_id)s ORDER BY topic

-- outbox_plan_by_index --
-- For the rest of this transaction, plan the floors' parts along their indexes whatever the statistics say: a table
-- nothing analyzed yet (or analyzed while empty) otherwise gets a bitmap scan and a sort of a whole vpart, a scan of
-- the primary key filtered by vpart, or a scan of the whole table, dead rows included, instead of an index scan that
-- stops after its share of rows.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)

-- outbox_floor_past --
-- Fragment, a condition: a row m of vpart l past its floor id (along (vpart, id), in id order: the row comparison is
-- a condition of that index only, never of the primary key's). With the two that follow, the rows that may be
-- waiting, in three disjoint parts (docs/design/outbox-storage.md; the view outbox.unpublished is the same).
m.vpart = l.vpart AND (m.vpart, m.id) > (l.vpart, l.floor_id)

-- outbox_floor_since --
-- Fragment, a row source: the rows of vpart l at or below its floor id whose transaction began after the floor's
-- snapshot (along (vpart, xid), a range from the snapshot's xmax). "IS NOT TRUE" keeps a test that only makes the
-- parts disjoint from ever being an index condition; the fence (OFFSET 0) keeps the caller's order by id from
-- making this a walk of the vpart along (vpart, id).
(SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND m.xid >= l.floor_xmax AND m.id > l.floor_id IS NOT TRUE
 OFFSET 0)

-- outbox_floor_running --
-- Fragment, a row source: the rows of vpart l at or below its floor id whose transaction was running at the floor's
-- snapshot: one probe of (vpart, xid) per transaction of its list, each a fenced lateral subquery (as "= ANY" or a
-- semi-join, some plans scan the whole vpart and filter); never a range from the snapshot's xmin.
(SELECT m.* FROM unnest(l.floor_xip) AS r (xid)
 CROSS JOIN LATERAL (
     SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND m.xid = r.xid AND m.id > l.floor_id IS NOT TRUE
     OFFSET 0
 ) AS m)
