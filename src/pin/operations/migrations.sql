-- The operations schema, one pair per revision of src/pin/migrations/versions/ that changes it. Each starts with a
-- "-- name --" line and a one-line description.

-- 0004_upgrade --
-- The audit trail of operator actions (pin/operations/audit.py): append-only, one row per action.
CREATE SCHEMA IF NOT EXISTS operations;
CREATE TABLE operations.audit (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- when the action was taken, database clock
    at     timestamptz NOT NULL DEFAULT now(),
    -- who took it: the command's --actor (by default the OS user) or the console's authenticated subject
    actor  text        NOT NULL,
    -- what was done, dotted: dlq.park (and, with the console, replays, discards, pause and resume)
    action text        NOT NULL,
    -- what it was done to: group, topic, partition, offset, key, filter (identifiers only, never a payload)
    target jsonb       NOT NULL DEFAULT '{}',
    -- how many of what it touched (e.g. held messages marked to park)
    counts jsonb       NOT NULL DEFAULT '{}',
    -- why, in the operator's words: required
    reason text        NOT NULL,
    CONSTRAINT audit_actor_given CHECK (btrim(actor) <> ''),
    CONSTRAINT audit_action_given CHECK (btrim(action) <> ''),
    CONSTRAINT audit_reason_given CHECK (btrim(reason) <> ''),
    CONSTRAINT audit_target_object CHECK (jsonb_typeof(target) = 'object'),
    CONSTRAINT audit_counts_object CHECK (jsonb_typeof(counts) = 'object')
);
CREATE INDEX audit_recent ON operations.audit (at DESC, id DESC);
-- An audit trail is not edited: a row is never updated or deleted (a correction is a new row).
CREATE FUNCTION operations.audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'operations.audit is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON operations.audit
    FOR EACH ROW EXECUTE FUNCTION operations.audit_append_only();

-- 0004_downgrade --
-- The audit trail gone (development only).
DROP SCHEMA IF EXISTS operations CASCADE;

-- 0007_upgrade --
-- What an operator paused for the whole cluster (pin/operations/pauses.py): a worker job or a consumer group, while
-- its row exists; every instance reads it within PAUSE_READ_SECONDS.
CREATE TABLE operations.pause (
    -- job: a polling worker (appointment-timeout, expire-promotions); group: a consumer group
    kind     text        NOT NULL,
    name     text        NOT NULL,
    actor    text        NOT NULL,
    reason   text        NOT NULL,
    since    timestamptz NOT NULL DEFAULT now(),
    -- the operator's row in operations.audit
    audit_id bigint      NOT NULL,
    PRIMARY KEY (kind, name),
    CONSTRAINT pause_kind CHECK (kind IN ('job', 'group'))
);

-- 0007_downgrade --
-- Nothing paused (development only).
DROP TABLE IF EXISTS operations.pause;

-- 0007_replay_job_upgrade --
-- Replays larger than a page (pin/console/replay_jobs.py): recorded here, carried out by the running relays at a
-- bounded rate, with their progress and a cancel.
CREATE TABLE operations.replay_job (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- the operator's record of the job (operations.audit)
    audit_id     bigint      NOT NULL,
    -- the dead letters' filter (pin.messaging.consumer.dead_letters.index.LetterFilter.described)
    filter       jsonb       NOT NULL,
    -- running until nothing matches any more, or cancelled by an operator, or failed (its error)
    state        text        NOT NULL DEFAULT 'running',
    -- how many matched when it was started (capped), and how many it has replayed: of them applied, skipped, refused
    total        integer     NOT NULL,
    replayed     integer     NOT NULL DEFAULT 0,
    apply        integer     NOT NULL DEFAULT 0,
    skip         integer     NOT NULL DEFAULT 0,
    refuse       integer     NOT NULL DEFAULT 0,
    error        text,
    CONSTRAINT replay_job_state CHECK (state IN ('running', 'done', 'cancelled', 'failed'))
);
CREATE INDEX replay_job_running ON operations.replay_job (id) WHERE state = 'running';

-- 0007_replay_job_downgrade --
-- No replay jobs (development only).
DROP TABLE IF EXISTS operations.replay_job;

-- 0009_upgrade --
-- A job of operations.replay_job replays its letters or discards them (pin/console/replay_jobs.py): "discard every
-- letter matching this filter" beyond a page is a job too. A discard job's "replayed" counts the letters discarded.
ALTER TABLE operations.replay_job
    ADD COLUMN action text NOT NULL DEFAULT 'replay',
    ADD CONSTRAINT replay_job_action CHECK (action IN ('replay', 'discard'));
-- Since when each replication slot's or standby's xmin has held the horizon at its value
-- (pin/observability/database_health.py): a slot's xmin carries no time, so every worker's database-health refresh
-- records when it first saw it there, and its gauge (XminHorizonHeld), `pin status` and the console's overview all
-- read the same time. A handful of rows (bounded by max_replication_slots and max_wal_senders), inserted when a
-- holder appears, rewritten when its xmin moves, deleted when it goes: vacuumed after 50 dead versions, never by a
-- fraction of a table this small.
CREATE TABLE operations.xmin_horizon_hold (
    -- slot or standby (pin.observability.database_health.HORIZON_HOLDERS)
    holder    text        NOT NULL,
    -- the slot's name, or the standby's walsender pid
    name      text        NOT NULL,
    -- the xmin it holds (as text: an xid; "xmin" is a system column's name), and since when it has held that one
    -- (database clock)
    held_xmin text        NOT NULL,
    since     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (holder, name),
    CONSTRAINT xmin_horizon_hold_holder CHECK (holder IN ('slot', 'standby'))
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50, autovacuum_vacuum_cost_delay = 0);

-- 0009_downgrade --
-- Jobs replay only; a slot's hold is timed by each worker on its own again (development only).
DROP TABLE IF EXISTS operations.xmin_horizon_hold;
ALTER TABLE operations.replay_job DROP COLUMN IF EXISTS action;
