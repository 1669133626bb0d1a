-- The calendar's statements: the repository's reads, locks and the one write of a cluster (repository.py);
-- appointment-timeout's are in expiry.sql. Each starts with a "-- name --" line and a one-line description; loaded
-- by pin.db.load_queries. A {columns} field is a table's column list from rows.py (the one place it is written); the
-- fragments are the parts repository.cluster_write_sql puts together, per shape of the cluster: every statement it
-- renders is in docs/rendered-statements.md, which a test renders again and compares.

-- slot_get --
-- A slot without locking it.
SELECT {slot_columns} FROM calendar.availability_slot WHERE id = %s

-- slot_lock --
-- A slot, row-locked until the end of the transaction (booking: INV-SLT-3).
SELECT {slot_columns} FROM calendar.availability_slot WHERE id = %s FOR NO KEY UPDATE

-- slots_lock --
-- The slots of a cluster (a reschedule's two), locked in id order.
SELECT {slot_columns} FROM calendar.availability_slot WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE

-- appointment_get --
-- An appointment without locking it.
SELECT {appointment_columns} FROM calendar.appointment WHERE id = %s

-- appointment_lock --
-- An appointment, the root of its cluster, locked first.
SELECT {appointment_columns} FROM calendar.appointment WHERE id = %s FOR NO KEY UPDATE

-- appointment_lock_skip_locked --
-- An appointment, locked unless another transaction holds it (then no row).
SELECT {appointment_columns} FROM calendar.appointment WHERE id = %s FOR NO KEY UPDATE SKIP LOCKED

-- event_get --
-- A calendar event without locking it.
SELECT {event_columns} FROM calendar.calendar_event WHERE id = %s

-- event_lock --
-- A calendar event, locked after its slot.
SELECT {event_columns} FROM calendar.calendar_event WHERE id = %s FOR NO KEY UPDATE

-- reminders_get --
-- An event's reminders without locking them.
SELECT {reminder_columns} FROM calendar.event_reminder WHERE calendar_event_id = %s ORDER BY id

-- reminders_lock --
-- An event's reminders, locked last, in id order.
SELECT {reminder_columns} FROM calendar.event_reminder WHERE calendar_event_id = %s ORDER BY id FOR NO KEY UPDATE

-- cluster_write --
-- The one write of an appointment cluster and its outbox rows: each part inserted (new) or written by its guarded
-- UPDATE (loaded: matches no row when its id is NULL, nothing to write), the new reminders inserted and the
-- changed ones written under their own guard, then the outbox rows; returns how many rows each write matched.
-- The changed reminders are found by their primary key (id = ANY), each one's values taken from the arrays by its
-- position, not joined to the arrays: a join's plan depends on the statistics, and a plan cached while the table
-- was empty hash-joined a sequential scan of every reminder (docs/design/claims.md, "Plans that do not rot").
WITH a_written AS (
{appointment}
),
s_written AS (
{slot}
),
e_written AS (
{event}
),{reminders_inserted}
r_written AS (
    UPDATE calendar.event_reminder AS r
       SET status = (%(r_statuses)s::text[])[array_position(%(r_ids)s::uuid[], r.id)], updated_at = %(r_updated_at)s
     WHERE r.id = ANY(%(r_ids)s::uuid[])
       AND r.status = (%(r_expected_statuses)s::text[])[array_position(%(r_ids)s::uuid[], r.id)]
    RETURNING 1
){outbox}
SELECT (SELECT count(*) FROM a_written) AS a, (SELECT count(*) FROM s_written) AS s,
       (SELECT count(*) FROM e_written) AS e, {reminders_inserted_count}(SELECT count(*) FROM r_written) AS r

-- reminders_insert --
-- A fragment of cluster_write, when the event has new reminders: they are inserted, given as arrays, stamped with
-- the event's UpdatedAt.
r_inserted AS (
    INSERT INTO calendar.event_reminder (id, calendar_event_id, remind_at, status, created_at, updated_at)
    SELECT u.id, %(r_event_id)s, u.remind_at, u.status, %(r_updated_at)s, %(r_updated_at)s
      FROM unnest(%(r_new_ids)s::uuid[], %(r_new_remind_ats)s::timestamptz[], %(r_new_statuses)s::text[])
           AS u (id, remind_at, status)
    RETURNING 1
),

-- reminders_inserted_count --
-- A fragment of cluster_write, with reminders_insert: the new reminders count with the changed ones.
(SELECT count(*) FROM r_inserted) +

-- row_insert --
-- A fragment of cluster_write (and the slot's own insert): a new row, each column bound by its name.
    INSERT INTO {table} ({columns})
    VALUES ({values})
    RETURNING 1

-- row_update_guarded --
-- A fragment of cluster_write: a loaded row's changes, only while it is at the Version and status it was read at.
    UPDATE {table}
       SET {assignments}
     WHERE id = %({prefix}_id)s AND version = %({prefix}_expected_version)s AND status = %({prefix}_expected_status)s
    RETURNING 1
