-- Shared state of the polling jobs: poison-item bookkeeping and the last cycle of each instance.
CREATE SCHEMA IF NOT EXISTS jobs;

-- An item whose processing failed (poison). It is tried again on every cycle, after the cycle's other due items
-- (the claims take items without a row here first), so that it never holds up the head of the queue. Deleted
-- when the item finally succeeds, or pruned once it no longer waits.
CREATE TABLE jobs.item_failure (
    job             text        NOT NULL,
    item_id         uuid        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 1,
    last_error      text        NOT NULL,          -- exception type and message; never PII (ids only)
    first_failed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_failed_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job, item_id)
);

-- The last finished cycle of every job instance, for `pin status` and liveness.
CREATE TABLE jobs.cycle (
    job          text        NOT NULL,
    instance     text        NOT NULL,
    run_id       uuid        NOT NULL,
    as_of        timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    duration_ms  integer     NOT NULL,
    counters     jsonb       NOT NULL,
    succeeded    boolean     NOT NULL,
    PRIMARY KEY (job, instance)
);
