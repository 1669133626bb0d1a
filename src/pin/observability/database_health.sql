-- The database-health gauges' statements (pin/observability/database_health.py). Each reads a statistics view
-- or catalog filtered to a fixed list, or a view bounded by the server's own limits (max_connections,
-- max_replication_slots): never a scan of a table.

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

-- xmin_horizon_holders --
-- Everything that holds this database's xmin horizon back, by kind: a transaction (a client session of this
-- database with an xid or a snapshot, or a prepared transaction of it; another database's sessions do not hold
-- its tables), a replication slot (its xmin: a physical slot with hot_standby_feedback) or a standby
-- streaming without a slot whose feedback reports an xmin. Per holder: its pid, application, name (the slot's, or
-- the prepared transaction's gid), how many transactions old its xmin is, how long it has been open (transactions
-- only: a slot's or a standby's xmin carries no time) and the xmin itself. The views are bounded by max_connections,
-- max_prepared_transactions, max_replication_slots and max_wal_senders.
SELECT 'transaction' AS holder, a.pid, a.application_name AS application, NULL::text AS name,
       GREATEST(age(a.backend_xid), age(a.backend_xmin))::float8 AS xids,
       EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start)::float8 AS seconds,
       COALESCE(a.backend_xmin, a.backend_xid)::text AS xmin
FROM pg_stat_activity a
WHERE a.backend_type = 'client backend' AND (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
  AND a.pid <> pg_backend_pid() AND a.datname = current_database()
UNION ALL
SELECT 'transaction', NULL, 'prepared transaction', p.gid, age(p.transaction)::float8,
       EXTRACT(EPOCH FROM clock_timestamp() - p.prepared)::float8, p.transaction::text
FROM pg_prepared_xacts p WHERE p.database = current_database()
UNION ALL
SELECT 'slot', s.active_pid, NULL, s.slot_name, age(s.xmin)::float8, NULL, s.xmin::text
FROM pg_replication_slots s WHERE s.xmin IS NOT NULL AND (s.database IS NULL OR s.database = current_database())
UNION ALL
SELECT 'standby', r.pid, r.application_name, NULL, age(r.backend_xmin)::float8, NULL, r.backend_xmin::text
FROM pg_stat_replication r WHERE r.backend_xmin IS NOT NULL
ORDER BY xids DESC

-- xmin_horizon_hold_record --
-- The slots and standbys holding the horizon now (holder, name, xmin): a new one is recorded as held since now, one
-- whose xmin moved is held since now at its new xmin (a row unchanged is not rewritten), one gone is forgotten.
WITH held AS (
    SELECT * FROM unnest(%(holders)s::text[], %(names)s::text[], %(xmins)s::text[]) AS c(holder, name, xmin)
), gone AS (
    DELETE FROM operations.xmin_horizon_hold h
    WHERE NOT EXISTS (SELECT 1 FROM held c WHERE c.holder = h.holder AND c.name = h.name)
)
INSERT INTO operations.xmin_horizon_hold AS h (holder, name, held_xmin)
SELECT holder, name, xmin FROM held
ON CONFLICT (holder, name) DO UPDATE SET held_xmin = EXCLUDED.held_xmin, since = now()
WHERE h.held_xmin <> EXCLUDED.held_xmin

-- xmin_horizon_hold_read --
-- How long each of these slots and standbys has held the horizon at its xmin, from the record (none: not recorded
-- at that xmin yet, no worker's refresh has seen it).
SELECT h.holder, h.name, EXTRACT(EPOCH FROM clock_timestamp() - h.since)::float8 AS seconds
FROM unnest(%(holders)s::text[], %(names)s::text[], %(xmins)s::text[]) AS c(holder, name, xmin)
JOIN operations.xmin_horizon_hold h ON h.holder = c.holder AND h.name = c.name AND h.held_xmin = c.xmin
