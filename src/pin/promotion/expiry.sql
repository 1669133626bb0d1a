-- expire-promotions' statements (seed 002, UC-PRM-003): the claim (the pass a parameter), the set-based write, the
-- backlog, the next deadline and the poison predicate (expiry.py). Each starts with a "-- name --" line and a
-- one-line description; loaded by pin.db.load_queries. Each is whole but for the purchase's read shape
-- ({purchase_columns} and {purchase_targets}, written once in queries.sql) and the batch write's outbox insert
-- ({outbox_insert}, pin.outbox.writer's); docs/rendered-statements.md holds the batch write as the database
-- receives it.

-- purchase_claim_due --
-- The claim of a pass (seed 002, step 2): Active, EndsAt <= AsOf, without a failure record (poison false) or with
-- one (true), EndsAt asc, at most batch_size, locked FOR NO KEY UPDATE SKIP LOCKED, with the count of due rows SKIP
-- LOCKED passed over (at most skipped_cap) (docs/design/claims.md).
WITH claimed AS MATERIALIZED (
    SELECT p.id, p.ends_at
      FROM promotion.purchase AS p
     WHERE p.status = 'Active' AND p.ends_at <= %(as_of)s
       AND EXISTS (SELECT FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = p.id) = %(poison)s
     ORDER BY p.ends_at, p.id
     LIMIT %(batch_size)s
       FOR NO KEY UPDATE OF p SKIP LOCKED
),
last_claimed AS (
    SELECT c.ends_at, c.id FROM claimed AS c ORDER BY c.ends_at DESC, c.id DESC LIMIT 1
),
horizon AS (
    -- When the batch was full, a skipped row can only sort before the last claimed one: that bounds the
    -- index range scanned below. Otherwise (NULL) every due row up to AsOf was a candidate.
    SELECT CASE WHEN (SELECT count(*) FROM claimed) >= %(batch_size)s THEN l.ends_at END AS ends_at, l.id
      FROM last_claimed AS l
),
skipped AS (
    SELECT count(*) AS n FROM (
        SELECT 1
          FROM promotion.purchase AS p
         WHERE p.status = 'Active' AND p.ends_at <= %(as_of)s
           AND EXISTS (SELECT FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = p.id) = %(poison)s
           AND p.ends_at <= coalesce((SELECT h.ends_at FROM horizon AS h), %(as_of)s)
           AND (NOT EXISTS (SELECT 1 FROM horizon AS h WHERE h.ends_at IS NOT NULL)
                OR (p.ends_at, p.id) < (SELECT h.ends_at, h.id FROM horizon AS h))
           AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = p.id)
         LIMIT %(skipped_cap)s
    ) AS s
)
SELECT s.n AS skipped_locked, due.*
  FROM skipped AS s
  LEFT JOIN (
      SELECT {purchase_columns}
        FROM claimed AS c JOIN promotion.purchase AS p ON p.id = c.id {purchase_targets}
  ) AS due ON true
 ORDER BY due.ends_at, due.id

-- purchase_expire_many --
-- The set-based write of a batch (seed 002, steps 3 and 4): the domain's new status, Version and UpdatedAt as
-- arrays (binary), guarded row by row as purchase_update_status is, and the outbox rows of exactly the rows it
-- changed, in the order given; returns the ids it changed. The rows are found by primary key (id = ANY), each
-- one's values taken from the arrays by its position, and the status guarded by a parameter (Active): joined to the
-- arrays, or with the literal status of ix_purchase_active_ends_at's predicate, a plan cached while the table was
-- empty walked every Active purchase (docs/design/claims.md, "Plans that do not rot").
WITH changed AS (
    UPDATE promotion.purchase AS p
       SET status = (%(statuses)b::text[])[array_position(%(ids)b::uuid[], p.id)],
           version = (%(versions)b::integer[])[array_position(%(ids)b::uuid[], p.id)],
           updated_at = (%(updated_at)b::timestamptz[])[array_position(%(ids)b::uuid[], p.id)]
     WHERE p.id = ANY(%(ids)b::uuid[]) AND p.status = %(expected_status)b::text
       AND p.version = (%(expected_versions)b::integer[])[array_position(%(ids)b::uuid[], p.id)]
    RETURNING p.id
),
written AS (
{outbox_insert}
)
SELECT c.id FROM changed AS c

-- purchases_due --
-- The backlog (Active with EndsAt passed, not processed yet, poison purchases included), bounded by the caller.
SELECT 1 FROM promotion.purchase AS p WHERE p.status = 'Active' AND p.ends_at <= %(as_of)s

-- purchase_next_deadline --
-- The earliest EndsAt among Active purchases that are not poison (a poison one never wakes the worker early).
SELECT p.ends_at AS at FROM promotion.purchase AS p
 WHERE p.status = 'Active'
   AND NOT EXISTS (SELECT 1 FROM jobs.item_failure AS f WHERE f.job = %(job)s AND f.item_id = p.id)
 ORDER BY p.ends_at, p.id LIMIT 1

-- purchase_still_active --
-- A predicate over f.item_id: a poison purchase's failure record is kept while it still waits its turn. OFFSET 0
-- keeps it a lookup by primary key per failure record (never an anti-join over every Active purchase).
EXISTS (SELECT 1 FROM promotion.purchase AS p WHERE p.id = f.item_id AND p.status = 'Active' OFFSET 0)

-- purchase_is_due --
-- A predicate, not a statement: due (seed 002: Status = Active && EndsAt <= AsOf), on promotion.purchase AS p, as
-- the statements above write it; pin status's oldest due items read it.
p.status = 'Active' AND p.ends_at <= %(as_of)s
