-- The calendar repository's statements: reads, locks and the one write of a cluster (repository.py). Each
-- starts with a "-- name --" line and a one-line description; loaded by pin.db.load_queries. A {columns} field
-- is a table's column list from rows.py (the one place it is written); the fragments at the end are the parts
-- repository.cluster_write_sql puts together, the one statement here whose text depends on what it writes.

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

-- appointment_is_due --
-- A predicate, not a statement: due for appointment-timeout (seed 000: Status = Pending && PendingExpiresAt <
-- AsOf), on calendar.appointment AS a.
a.status = 'Pending' AND a.pending_expires_at < %(as_of)s

-- cluster_write --
-- The one write of an appointment cluster and its outbox rows: each part inserted (new) or written by its guarded
-- UPDATE (loaded: matches no row when its id is NULL, nothing to write), the new reminders inserted and the
-- changed ones written under their own guard, then the outbox rows; returns how many rows each write matched.
WITH a_written AS (
{appointment}
),
s_written AS (
{slot}
),
e_written AS (
{event}
),
r_inserted AS (
    INSERT INTO calendar.event_reminder (id, calendar_event_id, remind_at, status, created_at, updated_at)
    SELECT u.id, %(r_event_id)s, u.remind_at, u.status, %(r_updated_at)s, %(r_updated_at)s
      FROM unnest(%(r_new_ids)s::uuid[], %(r_new_remind_ats)s::timestamptz[], %(r_new_statuses)s::text[])
           AS u (id, remind_at, status)
    RETURNING 1
),
r_written AS (
    UPDATE calendar.event_reminder AS r
       SET status = u.status, updated_at = %(r_updated_at)s
      FROM unnest(%(r_ids)s::uuid[], %(r_statuses)s::text[], %(r_expected_statuses)s::text[])
           AS u (id, status, expected_status)
     WHERE r.id = u.id AND r.status = u.expected_status
    RETURNING 1
){outbox}
SELECT (SELECT count(*) FROM a_written) AS a, (SELECT count(*) FROM s_written) AS s,
       (SELECT count(*) FROM e_written) AS e, (SELECT count(*) FROM r_inserted) + (SELECT count(*) FROM r_written) AS r

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
