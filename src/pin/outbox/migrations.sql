-- The outbox's schema changes after its schema.sql (applied by the initial migration), one pair per revision of
-- src/pin/migrations/versions/. Each starts with a "-- name --" line and a one-line description.

-- 0002_upgrade --
-- One event may be two rows (a contract migration's v1 and v2, same MessageId): unique per MessageId and topic.
ALTER TABLE outbox.message DROP CONSTRAINT message_message_id_key,
    ADD CONSTRAINT message_message_id_topic_key UNIQUE (message_id, topic);
ALTER TABLE outbox.dead_letter DROP CONSTRAINT dead_letter_message_id_key,
    ADD CONSTRAINT dead_letter_message_id_topic_key UNIQUE (message_id, topic);

-- 0002_downgrade --
-- MessageId alone unique again.
ALTER TABLE outbox.message DROP CONSTRAINT message_message_id_topic_key,
    ADD CONSTRAINT message_message_id_key UNIQUE (message_id);
ALTER TABLE outbox.dead_letter DROP CONSTRAINT dead_letter_message_id_topic_key,
    ADD CONSTRAINT dead_letter_message_id_key UNIQUE (message_id);

-- 0003_upgrade --
-- Where the broker acknowledged the relay's sends: per topic and partition, the highest offset of a settled batch,
-- stamped in the transaction that deleted its rows (docs/design/consumer-waits.md). Appended, never updated;
-- pruned to the marks some group still needs (outbox/waiting.sql: acked_position_prune).
CREATE TABLE outbox.acked_position (
    topic            text        NOT NULL,
    kafka_partition  integer     NOT NULL CHECK (kafka_partition >= 0),
    last_offset      bigint      NOT NULL CHECK (last_offset >= 0),
    acked_at         timestamptz NOT NULL DEFAULT now(),  -- the settle's transaction: at or after the acknowledgement
    PRIMARY KEY (topic, kafka_partition, last_offset)
);

-- 0003_downgrade --
-- No acknowledged positions.
DROP TABLE outbox.acked_position;

-- 0006_upgrade --
-- Every reader starts each vpart at its floor, not at its head (docs/design/outbox-storage.md); autovacuum per table.
-- The inserting transaction of each row (bigint, for Debezium's connector); the rows already there were all
-- committed long ago: 0, seen as ended by every snapshot.
ALTER TABLE outbox.message ADD COLUMN xid bigint NOT NULL DEFAULT 0;
ALTER TABLE outbox.message ALTER COLUMN xid SET DEFAULT pg_current_xact_id()::text::bigint;
-- the rows of the transactions still running when a floor was taken: a range from its xmax, a probe per xip
CREATE INDEX ix_outbox_message_vpart_xid ON outbox.message (vpart, xid);
-- The floor of each vpart: an id, and the snapshot (xmax and transactions in progress) it was taken under. The
-- owner advances it in the lease renewal (relay/queries.sql: relay_lease_renew), which rewrites the row anyway.
ALTER TABLE outbox.relay_lease
    ADD COLUMN floor_id bigint NOT NULL DEFAULT 0,
    ADD COLUMN floor_xmax bigint NOT NULL DEFAULT 0,
    ADD COLUMN floor_xip bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN floor_at timestamptz;
-- Every row waiting for the relay, read past each vpart's floor (the gauges, `pin status`, an operator's console):
-- the live rows and the few dead ones published since the floor last moved, never the dead rows a held horizon
-- keeps below it. Three disjoint parts per vpart, as the relay reads them (outbox/queries.sql: outbox_floor_*):
-- the rows past the floor id along (vpart, id); at or below it, those whose transaction began after the floor's
-- snapshot (a range along (vpart, xid) from its xmax) and those whose transaction was running then (a probe per
-- transaction), never a range from its xmin.
CREATE VIEW outbox.unpublished AS
SELECT m.*
FROM outbox.relay_lease l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND (m.vpart, m.id) > (l.vpart, l.floor_id)
    UNION ALL
    SELECT * FROM outbox.message m
     WHERE m.vpart = l.vpart AND m.xid >= l.floor_xmax AND m.id > l.floor_id IS NOT TRUE
    UNION ALL
    SELECT m.* FROM unnest(l.floor_xip) AS r (xid)
    CROSS JOIN LATERAL (
        SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND m.xid = r.xid AND m.id > l.floor_id IS NOT TRUE
        OFFSET 0
    ) AS m
) m;
-- Autovacuum per table, each by a fixed number of dead rows (a fraction of a small table is too few, of a grown
-- one too many); none can remove anything while the horizon is held, so these matter once it moves.
-- message: a queue whose every row dies within seconds; vacuum at full speed so the backlog of dead rows a held
-- horizon left goes at once when it moves.
ALTER TABLE outbox.message SET (autovacuum_vacuum_cost_delay = 0);
-- dead_letter: a few rows, deleted all at once by a replay or a discard; listed whole by the operator.
ALTER TABLE outbox.dead_letter SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100);
-- relay_lease: 64 rows, each rewritten at every heartbeat (64 versions a second); half of each page left free so
-- that a renewal stays on its page (HOT, no index entry) and is pruned there by the next reader.
ALTER TABLE outbox.relay_lease SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_cost_delay = 0
);
-- relay_instance: one row per relay, rewritten at every heartbeat.
ALTER TABLE outbox.relay_instance SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 100,
    autovacuum_vacuum_cost_delay = 0
);
-- acked_position: a mark appended at every settle, the old ones pruned to what some group still needs.
ALTER TABLE outbox.acked_position SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
-- the floors start from the migration's snapshot, at id 0: every row is read from its vpart's head once
UPDATE outbox.relay_lease SET floor_xmax = pg_snapshot_xmax(pg_current_snapshot())::text::bigint;

-- 0006_downgrade --
-- Back to reads from each vpart's head, and the default autovacuum of the four tables.
DROP VIEW outbox.unpublished;
ALTER TABLE outbox.relay_instance RESET (
    fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE outbox.relay_lease RESET (
    fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE outbox.acked_position RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE outbox.dead_letter RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE outbox.message RESET (autovacuum_vacuum_cost_delay);
ALTER TABLE outbox.relay_lease DROP COLUMN floor_id, DROP COLUMN floor_xmax, DROP COLUMN floor_xip,
    DROP COLUMN floor_at;
DROP INDEX outbox.ix_outbox_message_vpart_xid;
ALTER TABLE outbox.message DROP COLUMN xid;

-- 0007_upgrade --
-- The relay's dead letters an operator discarded (pin outbox dead-letters discard, the console): kept as they were,
-- with when; out of outbox.dead_letter, so they no longer hold back their key nor count in the alerts.
CREATE TABLE outbox.dead_letter_discarded (LIKE outbox.dead_letter INCLUDING DEFAULTS);
ALTER TABLE outbox.dead_letter_discarded ADD COLUMN discarded_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX dead_letter_discarded_key ON outbox.dead_letter_discarded (message_key);

-- 0007_downgrade --
-- Discarded letters dropped (development only).
DROP TABLE IF EXISTS outbox.dead_letter_discarded;

-- 0008_upgrade --
-- A heartbeat writes one row version per relay instance, not one per vpart (docs/design/relay.md, "Leases"): a
-- lease is live while its owner's instance row (outbox.relay_instance) is unexpired, so the heartbeat renews only
-- that row, and a vpart's lease row is written only when its owner changes (taken, given back, taken over). The
-- floors leave the lease rows for a table of their own, written by their owner only when they moved, at most every
-- few seconds (outbox/relay/kept_floors.py: FLOOR_WRITE_SECONDS); the relay reads past the floors it keeps in memory.
-- A relay of the previous release still running when this runs cannot read, renew, mark nor dead-letter any more
-- (each of those statements names a column dropped here and fails); its instance row then expires within its TTL
-- and the new relays take its vparts over, at the next epoch (docs/design/relay.md, "Upgrading to 0008").
CREATE TABLE outbox.relay_floor (
    vpart       smallint    PRIMARY KEY CHECK (vpart >= 0),
    floor_id    bigint      NOT NULL DEFAULT 0,
    floor_xmax  bigint      NOT NULL DEFAULT 0,
    floor_xip   bigint[]    NOT NULL DEFAULT '{}',
    floor_at    timestamptz                                   -- when its owner last wrote it (it had moved)
);
INSERT INTO outbox.relay_floor (vpart, floor_id, floor_xmax, floor_xip, floor_at)
SELECT vpart, floor_id, floor_xmax, floor_xip, floor_at FROM outbox.relay_lease;
-- the same three parts as in 0006, past the floors of their own table
CREATE OR REPLACE VIEW outbox.unpublished AS
SELECT m.*
FROM outbox.relay_floor l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND (m.vpart, m.id) > (l.vpart, l.floor_id)
    UNION ALL
    SELECT * FROM outbox.message m
     WHERE m.vpart = l.vpart AND m.xid >= l.floor_xmax AND m.id > l.floor_id IS NOT TRUE
    UNION ALL
    SELECT m.* FROM unnest(l.floor_xip) AS r (xid)
    CROSS JOIN LATERAL (
        SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND m.xid = r.xid AND m.id > l.floor_id IS NOT TRUE
        OFFSET 0
    ) AS m
) m;
ALTER TABLE outbox.relay_lease DROP COLUMN floor_id, DROP COLUMN floor_xmax, DROP COLUMN floor_xip,
    DROP COLUMN floor_at, DROP COLUMN expires_at;
-- Every vpart's lease as operators and tests read it: live while its owner's instance row is unexpired (the rule
-- the relay's statements apply, relay/queries.sql: relay_lease_live), the owner's expiry beside it.
CREATE VIEW outbox.relay_lease_state AS
SELECT l.vpart, l.owner, l.epoch, l.acquired_at, i.expires_at, coalesce(i.expires_at > now(), false) AS live
FROM outbox.relay_lease l
LEFT JOIN outbox.relay_instance i ON i.instance_id = l.owner;
-- relay_lease: 64 rows, each rewritten only when its owner changes (a start, a stop, a take-over): a few versions a
-- minute; half of each page left free so that a change stays on its page (HOT) and is pruned there.
ALTER TABLE outbox.relay_lease SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 50,
    autovacuum_vacuum_cost_delay = 0
);
-- relay_instance: one row per relay, rewritten at every heartbeat (one version a second each): the one row the
-- leases' liveness costs; kept on its page (fillfactor) and vacuumed after a minute of heartbeats of one relay.
ALTER TABLE outbox.relay_instance SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 60,
    autovacuum_vacuum_cost_delay = 0
);
-- relay_floor: 64 rows, each rewritten at most every FLOOR_WRITE_SECONDS while its vpart has traffic (at most
-- 6.4 versions a second in all); half of each page free for HOT updates, vacuumed after a minute or so of them.
ALTER TABLE outbox.relay_floor SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 400,
    autovacuum_vacuum_cost_delay = 0
);

-- 0008_downgrade --
-- The floors and the expiry back in the lease rows (each lease expiring with its owner's instance row).
ALTER TABLE outbox.relay_lease RESET (
    fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay
);
ALTER TABLE outbox.relay_lease SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 500,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE outbox.relay_instance SET (autovacuum_vacuum_threshold = 100);
DROP VIEW outbox.relay_lease_state;
ALTER TABLE outbox.relay_lease
    ADD COLUMN expires_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN floor_id bigint NOT NULL DEFAULT 0,
    ADD COLUMN floor_xmax bigint NOT NULL DEFAULT 0,
    ADD COLUMN floor_xip bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN floor_at timestamptz;
UPDATE outbox.relay_lease l
SET expires_at = coalesce((SELECT i.expires_at FROM outbox.relay_instance i WHERE i.instance_id = l.owner), '-infinity'),
    floor_id = f.floor_id, floor_xmax = f.floor_xmax, floor_xip = f.floor_xip, floor_at = f.floor_at
FROM outbox.relay_floor f
WHERE f.vpart = l.vpart;
CREATE OR REPLACE VIEW outbox.unpublished AS
SELECT m.*
FROM outbox.relay_lease l
CROSS JOIN LATERAL (
    SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND (m.vpart, m.id) > (l.vpart, l.floor_id)
    UNION ALL
    SELECT * FROM outbox.message m
     WHERE m.vpart = l.vpart AND m.xid >= l.floor_xmax AND m.id > l.floor_id IS NOT TRUE
    UNION ALL
    SELECT m.* FROM unnest(l.floor_xip) AS r (xid)
    CROSS JOIN LATERAL (
        SELECT * FROM outbox.message m WHERE m.vpart = l.vpart AND m.xid = r.xid AND m.id > l.floor_id IS NOT TRUE
        OFFSET 0
    ) AS m
) m;
DROP TABLE outbox.relay_floor;
