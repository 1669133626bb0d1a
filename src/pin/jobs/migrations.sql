-- The jobs' schema changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description.

-- 0005_upgrade --
-- The jobs' tables vacuumed by a small fixed number of dead rows, never by a fraction of the table.
-- jobs.cycle: a few rows (one per job instance) each rewritten after every cycle, about once a second per worker
-- under load: 8,100 dead versions in 5 minutes of a held horizon. A fraction of a few rows is a handful, but
-- autovacuum's own 50-row floor plus the default 20 % would still let the versions pile up between naps; the
-- updates are HOT (no indexed column changes), so half of each page is left free for the new version beside the
-- old one, where the next update's pruning removes it without a vacuum once the horizon moves.
ALTER TABLE jobs.cycle SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0
);
-- jobs.item_failure: the poison items, a handful of rows inserted, updated on every failed attempt and deleted when
-- the item succeeds or stops waiting; every claim's first pass probes it for each candidate, so its dead rows are
-- on the claims' path: vacuum after 100 of them.
ALTER TABLE jobs.item_failure SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0
);

-- 0005_downgrade --
-- The jobs' tables back on the server's autovacuum settings.
ALTER TABLE jobs.cycle RESET (
    fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE jobs.item_failure RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
