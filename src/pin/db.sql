-- The statements of pin.db's plumbing. Each starts with a "-- name --" line and its description; loaded by
-- pin.db.load_queries.

-- limits_set --
-- A transaction's limits (local) or its session's: lock_timeout and idle_in_transaction_session_timeout as given,
-- statement_timeout capped (a lower one already set stays; 0, none, is capped), each in milliseconds and left as it
-- is when NULL; returns the three as they were, to restore.
SELECT b.lock_timeout, b.statement_timeout, b.idle_in_transaction_session_timeout,
       set_config('lock_timeout', coalesce(%(lock_timeout_ms)s::bigint::text, b.lock_timeout), %(local)s) AS l,
       set_config('statement_timeout', CASE WHEN %(statement_timeout_ms)s::bigint IS NULL THEN b.statement_timeout
                  WHEN b.statement_ms = 0 OR b.statement_ms > %(statement_timeout_ms)s::bigint
                  THEN %(statement_timeout_ms)s::bigint::text ELSE b.statement_timeout END, %(local)s) AS s,
       set_config('idle_in_transaction_session_timeout',
                  coalesce(%(idle_ms)s::bigint::text, b.idle_in_transaction_session_timeout), %(local)s) AS i
  FROM (SELECT current_setting('lock_timeout') AS lock_timeout, current_setting('statement_timeout') AS statement_timeout,
               current_setting('idle_in_transaction_session_timeout') AS idle_in_transaction_session_timeout,
               (SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout') AS statement_ms) AS b

-- limits_restore --
-- The three limits put back as limits_set returned them.
SELECT set_config('lock_timeout', %(lock_timeout)s, %(local)s) AS l,
       set_config('statement_timeout', %(statement_timeout)s, %(local)s) AS s,
       set_config('idle_in_transaction_session_timeout', %(idle_in_transaction_session_timeout)s, %(local)s) AS i
