-- The database-health gauges' statements (pin/observability/database_health.py). Each reads a statistics view
-- or catalog filtered to a fixed list, or a view bounded by the server's own limits (max_connections,
-- max_replication_slots): never a scan of a table.

-- refresh_statement_timeout --
-- The refresh transaction's statement timeout (SET LOCAL): a statement slower than this is cancelled.
SELECT set_config('statement_timeout', %(ms)s::text, true)

-- table_health_read --
-- Live and dead tuples and the last (auto)vacuum of each hot table, by the name it was asked under.
SELECT t.name, s.n_live_tup::float8 AS live, s.n_dead_tup::float8 AS dead,
       COALESCE(EXTRACT(EPOCH FROM GREATEST(s.last_vacuum, s.last_autovacuum)), 0)::float8 AS last_vacuum
FROM unnest(%(tables)s::text[]) AS t(name)
JOIN pg_stat_all_tables s ON s.relid = to_regclass(t.name)

-- index_health_read --
-- Size on disk and entries (the estimate of the last vacuum or analyze) of each claim index.
SELECT i.name, pg_relation_size(c.oid)::float8 AS bytes, GREATEST(c.reltuples, 0)::float8 AS tuples
FROM unnest(%(indexes)s::text[]) AS i(name)
JOIN pg_class c ON c.oid = to_regclass(i.name)

-- transaction_oldest_age --
-- Seconds since the oldest open transaction (client sessions, prepared transactions) began: the xmin horizon
-- that keeps vacuum from removing dead tuples. 0 when none is open.
SELECT GREATEST(
    (SELECT EXTRACT(EPOCH FROM clock_timestamp() - min(xact_start)) FROM pg_stat_activity
      WHERE xact_start IS NOT NULL AND backend_type = 'client backend' AND pid <> pg_backend_pid()),
    (SELECT EXTRACT(EPOCH FROM clock_timestamp() - min(prepared)) FROM pg_prepared_xacts),
    0
)::float8 AS age

-- replication_slot_retained_wal --
-- Each replication slot, whether a client streams from it, and the WAL it keeps (bytes behind the current LSN).
SELECT slot_name, active,
       COALESCE(pg_current_wal_lsn() - restart_lsn, 0)::float8 AS retained
FROM pg_replication_slots
