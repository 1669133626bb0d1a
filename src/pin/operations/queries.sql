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
