-- The statements of the jobs' shared bookkeeping. Each starts with a "-- name --" line and a one-line
-- description; see docs/design/poison-items.md and docs/design/claims.md for why. The last three are templates
-- that wrap what a job supplies (its predicate, its deadline or due query): bookkeeping.py fills their {fields}
-- in, the one place a job's SQL and this shared SQL are put together.

-- item_failure_record --
-- One more failed attempt of a job's item (database clock), its last error kept; returns its attempts so far.
INSERT INTO jobs.item_failure AS f (job, item_id, attempts, last_error, last_failed_at)
VALUES (%(job)s, %(item_id)s, 1, %(error)s, statement_timestamp())
ON CONFLICT (job, item_id) DO UPDATE
   SET attempts = f.attempts + 1, last_error = excluded.last_error, last_failed_at = statement_timestamp()
RETURNING attempts

-- item_failure_clear --
-- Forget the failures of items that finally succeeded.
DELETE FROM jobs.item_failure WHERE job = %s AND item_id = ANY(%s)

-- cycle_record --
-- Upsert the last cycle of a job instance (for pin status and liveness).
INSERT INTO jobs.cycle AS c (job, instance, run_id, as_of, duration_ms, counters, succeeded)
VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s)
ON CONFLICT (job, instance) DO UPDATE
   SET run_id = excluded.run_id, as_of = excluded.as_of, finished_at = clock_timestamp(),
       duration_ms = excluded.duration_ms, counters = excluded.counters, succeeded = excluded.succeeded

-- item_failures_of_job --
-- The poison items of a job (its rows of jobs.item_failure), counted by backlog_count.
SELECT 1 FROM jobs.item_failure AS f WHERE f.job = %(job)s

-- item_failure_prune --
-- Delete the failures of items that are no longer waiting; {still_pending} is true over f.item_id while it waits.
DELETE FROM jobs.item_failure AS f WHERE f.job = %(job)s AND NOT ({still_pending})

-- seconds_until --
-- Seconds from the database clock to the deadline {deadline} returns (column at).
SELECT EXTRACT(EPOCH FROM (d.at - clock_timestamp()))::float8 AS seconds FROM ({deadline}) AS d

-- backlog_count --
-- How many rows {due} returns, counting at most {cap}.
SELECT count(*) AS n FROM ({due} LIMIT {cap}) AS due
