-- The calendar's statements: the repository's reads, locks and the one write of a cluster (repository.py), and
-- appointment-timeout's claim and bookkeeping (claims.py). Each starts with a "-- name --" line and a one-line
-- description; loaded by pin.db.load_queries. A {columns} field is a table's column list from rows.py (the one
-- place it is written); the fragments are the parts repository.cluster_write_sql and claims.py put together.

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

-- appointment_claim --
-- appointment-timeout's claim of one due appointment after the cycle's keyset cursor (the first claim starts at
-- the head), taken SKIP LOCKED, and the due rows before it that SKIP LOCKED passed over (passed_over, last, and
-- the earliest of their deadlines, passed_over_from, before it: the claim floor stays there). A
-- template: {which} is the pass, {cluster_locks} the rest of its cluster locked by the same statement, or nothing
-- (the claim alone); claims.py fills them in (docs/design/claims.md).
WITH claimed AS MATERIALIZED (
    SELECT {claimed_columns}
      FROM calendar.appointment AS a
     WHERE {due} AND (a.pending_expires_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
           coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000')) AND {which}
     ORDER BY a.pending_expires_at, a.id
     LIMIT 1
       FOR NO KEY UPDATE OF a SKIP LOCKED
),
passed_over AS MATERIALIZED (
    SELECT a.id, a.pending_expires_at
      FROM calendar.appointment AS a
     WHERE {due} AND (a.pending_expires_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
           coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000')) AND {which}
       AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = a.id)
       AND a.pending_expires_at <= coalesce((SELECT c.pending_expires_at FROM claimed AS c), %(as_of)s)
       AND (NOT EXISTS (SELECT 1 FROM claimed)
            OR (a.pending_expires_at, a.id) < (SELECT c.pending_expires_at, c.id FROM claimed AS c))
     ORDER BY a.pending_expires_at, a.id
     LIMIT {cap}
){cluster_locks}
SELECT {columns},
       (SELECT min(p.pending_expires_at) FROM passed_over AS p) AS passed_over_from,
       (SELECT coalesce(array_agg(p.id), '{{}}'::uuid[]) FROM passed_over AS p) AS passed_over
  FROM (SELECT) AS one
  LEFT JOIN claimed AS c ON true{joins}

-- appointment_claim_cluster_locks --
-- A fragment of appointment_claim: the rest of the claimed appointment's cluster, locked in the calendar's lock
-- order (slot, event, reminders), each lock's key read from the rows the previous lock returned, so the order
-- holds whatever the plan.
,
slot_locked AS MATERIALIZED (
    SELECT {slot_columns}
      FROM calendar.availability_slot AS s WHERE s.id = (SELECT c.slot_id FROM claimed AS c)
       FOR NO KEY UPDATE OF s
),
event_locked AS MATERIALIZED (
    SELECT {event_columns}
      FROM calendar.calendar_event AS e
     WHERE e.id = (SELECT c.calendar_event_id FROM claimed AS c JOIN slot_locked AS s ON s.id = c.slot_id)
       FOR NO KEY UPDATE OF e
),
reminders_locked AS MATERIALIZED (
    SELECT {reminder_columns}
      FROM calendar.event_reminder AS r WHERE r.calendar_event_id = (SELECT e.id FROM event_locked AS e)
     ORDER BY r.id
       FOR NO KEY UPDATE OF r
)

-- appointment_claim_cluster_columns --
-- A fragment of appointment_claim: the locked cluster's columns, the appointment's under their own names, the
-- slot's and the event's prefixed (s_, e_), the reminders as three arrays (repository.cluster_from_locked_row
-- reads them by position).
c.*, {slot_columns}, {event_columns},
       (SELECT array_agg(r.id ORDER BY r.id) FROM reminders_locked AS r) AS r_ids,
       (SELECT array_agg(r.remind_at ORDER BY r.id) FROM reminders_locked AS r) AS r_remind_ats,
       (SELECT array_agg(r.status ORDER BY r.id) FROM reminders_locked AS r) AS r_statuses

-- appointment_claim_cluster_joins --
-- A fragment of appointment_claim: the locked slot and event beside the claimed appointment.

  LEFT JOIN slot_locked AS s ON true LEFT JOIN event_locked AS e ON true

-- pass_fresh --
-- A predicate of appointment_claim: the first pass claims appointments without a failure record.
NOT {has_failure}

-- pass_poison --
-- A predicate of appointment_claim: the second pass claims the poison ones that did not fail in this cycle.
{has_failure} AND a.id <> ALL(%(failed)s::uuid[])

-- appointments_due --
-- The due appointments, poison ones included: the count of a cycle's batch and the backlog gauge.
SELECT 1 FROM calendar.appointment AS a WHERE {due}

-- appointments_due_count --
-- How many appointments a cycle may claim, counting at most count_limit: the due ones from the worker's claim
-- floor on (NULL: from the head; a bounded scan of the partial index that starts at the floor) that are not
-- poison, and the poison ones, found from their failure records wherever their deadlines are (docs/design/claims.md).
SELECT least(%(count_limit)s,
       (SELECT count(*) FROM ({appointments_due} AND a.pending_expires_at >= coalesce(%(floor)s::timestamptz,
            '-infinity') AND NOT {has_failure} LIMIT %(count_limit)s) AS fresh)
       + (SELECT count(*) FROM (SELECT 1 FROM jobs.item_failure AS f
            JOIN calendar.appointment AS a ON a.id = f.item_id
           WHERE f.job = %(job)s AND {due} LIMIT %(count_limit)s) AS poison)) AS n

-- appointment_next_deadline --
-- The earliest PendingExpiresAt from the claim floor on (NULL: from the head) of a Pending appointment that is
-- not poison (a poison one never wakes the worker).
SELECT a.pending_expires_at AS at FROM calendar.appointment AS a
 WHERE a.status = 'Pending' AND a.pending_expires_at >= coalesce(%(floor)s::timestamptz, '-infinity')
   AND NOT {has_failure}
 ORDER BY a.pending_expires_at, a.id LIMIT 1

-- appointment_still_pending --
-- A predicate over f.item_id: a poison appointment's failure record is kept while the appointment still waits.
-- OFFSET 0 keeps it a lookup by primary key per failure record (never an anti-join over every Pending one).
EXISTS (SELECT 1 FROM calendar.appointment AS a WHERE a.id = f.item_id AND a.status = 'Pending' OFFSET 0)

-- lock_timeout_set --
-- The item lock timeout of a cycle's connection, set once for the session.
SELECT set_config('lock_timeout', %(lock_timeout)s, false)

-- lock_timeout_reset --
-- The cycle's lock timeout taken off its connection before it goes back to the pool.
RESET lock_timeout

-- statement_timeout_restore --
-- The session's statement timeout as it was before the cycle capped it.
SELECT set_config('statement_timeout', %(statement_timeout)s, false)
