-- The audit trail's statements (audit.py). Each starts with a "-- name --" line and a one-line description; loaded by
-- pin.db.load_queries.

-- audit_record --
-- One operator action; returns its id and time (database clock).
INSERT INTO operations.audit (actor, action, target, counts, reason)
VALUES (%(actor)s, %(action)s, %(target)s, %(counts)s, %(reason)s)
RETURNING id, at

-- audit_recent --
-- The latest actions, newest first, optionally of one action only; bounded by the caller's limit.
SELECT id, at, actor, action, target, counts, reason
FROM operations.audit
WHERE %(action)s::text IS NULL OR action = %(action)s::text
ORDER BY at DESC, id DESC
LIMIT %(limit)s

-- pause_set --
-- Pause a job or a group for the whole cluster (a pause already held keeps its first author); true when it was new.
INSERT INTO operations.pause (kind, name, actor, reason, audit_id)
VALUES (%(kind)s, %(name)s, %(actor)s, %(reason)s, %(audit_id)s)
ON CONFLICT (kind, name) DO NOTHING
RETURNING true AS paused

-- pause_clear --
-- Resume a paused job or group; true when it was paused.
DELETE FROM operations.pause WHERE kind = %(kind)s AND name = %(name)s
RETURNING true AS resumed

-- pause_list --
-- Every pause in force, the oldest first (a handful of rows).
SELECT kind, name, actor, reason, since, audit_id FROM operations.pause ORDER BY since, kind, name

-- pause_held --
-- Whether one job or group is paused (what every instance reads every few seconds: a primary-key probe).
SELECT EXISTS (SELECT 1 FROM operations.pause WHERE kind = %(kind)s AND name = %(name)s) AS paused
