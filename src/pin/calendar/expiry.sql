-- appointment-timeout's statements (seed 000): the claim, the count of a cycle's batch, the backlog, the next
-- deadline and the poison predicate (expiry.py). Each starts with a "-- name --" line and a one-line description;
-- loaded by pin.db.load_queries. Each is whole: only the tables' column lists are filled in, from rows.py (the one
-- place they are written), as {slot_columns}; the pass and whether the cluster is locked are bound parameters
-- (each execution is planned on its parameters: the pass's EXISTS a filter on the walk of the partial index).
-- Why they are shaped so: docs/design/claims.md (the claim, the keyset cursor, the claim floor, SkippedLocked) and
-- docs/design/poison-items.md (the two passes).

-- appointment_claim --
-- The claim of one due appointment of the pass (poison false: without a failure record; true: with one, and not
-- failed in this cycle already, failed), after the cycle's keyset cursor (the first claim starts at the claim floor
-- or the head), taken SKIP LOCKED, and the due rows before it that SKIP LOCKED passed over (passed_over, last, at
-- most passed_over_cap, and the earliest of their deadlines, passed_over_from, before it: the claim floor stays
-- there). With lock_cluster its slot, event and reminders are locked by the same statement, in the calendar's lock
-- order (each lock's key read from the rows the previous lock returned, so the order holds whatever the plan);
-- without, the claim alone (the slot's and the event's columns NULL). The slot's and the event's columns are
-- prefixed (s_, e_), the reminders three arrays (repository.cluster_from_locked_row reads them by position).
WITH claimed AS MATERIALIZED (
    SELECT {appointment_columns}
      FROM calendar.appointment AS a
     WHERE a.status = 'Pending' AND a.pending_expires_at < %(as_of)s
       AND (a.pending_expires_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
           coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000'))
       AND EXISTS (SELECT FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = a.id) = %(poison)s
       AND a.id <> ALL(%(failed)s::uuid[])
     ORDER BY a.pending_expires_at, a.id
     LIMIT 1
       FOR NO KEY UPDATE OF a SKIP LOCKED
),
passed_over AS MATERIALIZED (
    SELECT a.id, a.pending_expires_at
      FROM calendar.appointment AS a
     WHERE a.status = 'Pending' AND a.pending_expires_at < %(as_of)s
       AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = a.id)
       AND (a.pending_expires_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
           coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000'))
       AND EXISTS (SELECT FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = a.id) = %(poison)s
       AND a.id <> ALL(%(failed)s::uuid[])
       AND a.pending_expires_at <= coalesce((SELECT c.pending_expires_at FROM claimed AS c), %(as_of)s)
       AND (NOT EXISTS (SELECT 1 FROM claimed)
            OR (a.pending_expires_at, a.id) < (SELECT c.pending_expires_at, c.id FROM claimed AS c))
     ORDER BY a.pending_expires_at, a.id
     LIMIT %(passed_over_cap)s
),
slot_locked AS MATERIALIZED (
    SELECT {slot_columns}
      FROM calendar.availability_slot AS s
     WHERE %(lock_cluster)s AND s.id = (SELECT c.slot_id FROM claimed AS c)
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
SELECT c.*, {slot_columns_prefixed}, {event_columns_prefixed},
       (SELECT array_agg(r.id ORDER BY r.id) FROM reminders_locked AS r) AS r_ids,
       (SELECT array_agg(r.remind_at ORDER BY r.id) FROM reminders_locked AS r) AS r_remind_ats,
       (SELECT array_agg(r.status ORDER BY r.id) FROM reminders_locked AS r) AS r_statuses,
       (SELECT min(p.pending_expires_at) FROM passed_over AS p) AS passed_over_from,
       (SELECT coalesce(array_agg(p.id), '{{}}'::uuid[]) FROM passed_over AS p) AS passed_over
  FROM (SELECT) AS one
  LEFT JOIN claimed AS c ON true
  LEFT JOIN slot_locked AS s ON true LEFT JOIN event_locked AS e ON true

-- appointments_due --
-- The due appointments (seed 000: Status = Pending && PendingExpiresAt < AsOf), poison ones included: the backlog
-- gauge's rows.
SELECT 1 FROM calendar.appointment AS a WHERE a.status = 'Pending' AND a.pending_expires_at < %(as_of)s

-- appointments_due_count --
-- How many appointments a cycle may claim, counting at most count_limit: the due ones from the worker's claim
-- floor on (NULL: from the head; a bounded scan of the partial index that starts at the floor) that are not
-- poison, and the poison ones, found from their failure records wherever their deadlines are (docs/design/claims.md).
SELECT least(%(count_limit)s,
       (SELECT count(*) FROM (SELECT 1 FROM calendar.appointment AS a
           WHERE a.status = 'Pending' AND a.pending_expires_at < %(as_of)s
             AND a.pending_expires_at >= coalesce(%(floor)s::timestamptz, '-infinity')
             AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = a.id)
           LIMIT %(count_limit)s) AS fresh)
       + (SELECT count(*) FROM (SELECT 1 FROM jobs.item_failure AS f
            JOIN calendar.appointment AS a ON a.id = f.item_id
           WHERE f.job = %(job)s AND a.status = 'Pending' AND a.pending_expires_at < %(as_of)s
           LIMIT %(count_limit)s) AS poison)) AS n

-- appointment_next_deadline --
-- The earliest PendingExpiresAt from the claim floor on (NULL: from the head) of a Pending appointment that is
-- not poison (a poison one never wakes the worker).
SELECT a.pending_expires_at AS at FROM calendar.appointment AS a
 WHERE a.status = 'Pending' AND a.pending_expires_at >= coalesce(%(floor)s::timestamptz, '-infinity')
   AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = a.id)
 ORDER BY a.pending_expires_at, a.id LIMIT 1

-- appointment_still_pending --
-- A predicate over f.item_id: a poison appointment's failure record is kept while the appointment still waits.
-- OFFSET 0 keeps it a lookup by primary key per failure record (never an anti-join over every Pending one).
EXISTS (SELECT 1 FROM calendar.appointment AS a WHERE a.id = f.item_id AND a.status = 'Pending' OFFSET 0)

-- appointment_is_due --
-- A predicate, not a statement: due (seed 000: Status = Pending && PendingExpiresAt < AsOf), on
-- calendar.appointment AS a, as the statements above write it; pin status's oldest due items read it.
a.status = 'Pending' AND a.pending_expires_at < %(as_of)s
