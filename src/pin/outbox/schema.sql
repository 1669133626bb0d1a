-- Transactional outbox (SPEC section 5). Rows are inserted in the business transaction and deleted by
-- primary key once the broker acknowledged them: the table stays small, so it is a queue, not a history.
CREATE SCHEMA IF NOT EXISTS outbox;

CREATE TABLE outbox.message (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id       uuid        NOT NULL UNIQUE,             -- MessageId: header and consumer dedup key
    vpart            smallint    NOT NULL CHECK (vpart >= 0), -- stable hash of message_key; the relay's unit of ownership
    topic            text        NOT NULL,
    message_key      text        NOT NULL,                    -- Kafka key: the contract's aggregate id
    event_type       text        NOT NULL,
    contract_version integer     NOT NULL,
    payload          jsonb       NOT NULL,                    -- contract fields plus the envelope
    headers          jsonb       NOT NULL DEFAULT '{}',       -- correlation-id, traceparent, ...
    occurred_at      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    last_error       text
) WITH (
    -- a queue table: vacuum by a fixed number of dead rows, not by a fraction of a table that is mostly empty
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000
);

-- the relay reads its owned vparts in id order; per key, id order is commit order (see outbox/writer.py)
CREATE INDEX ix_outbox_message_vpart_id ON outbox.message (vpart, id);
-- "is an earlier row of this key still waiting?" (head-of-key guard)
CREATE INDEX ix_outbox_message_key_id ON outbox.message (message_key, id);

-- Rows the broker will never accept, moved aside with their error; their key's later rows wait behind them.
CREATE TABLE outbox.dead_letter (
    id               bigint      PRIMARY KEY,                 -- the outbox id it had
    message_id       uuid        NOT NULL UNIQUE,
    vpart            smallint    NOT NULL,
    topic            text        NOT NULL,
    message_key      text        NOT NULL,
    event_type       text        NOT NULL,
    contract_version integer     NOT NULL,
    payload          jsonb       NOT NULL,
    headers          jsonb       NOT NULL,
    occurred_at      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    attempts         integer     NOT NULL,
    error            text        NOT NULL,
    dead_lettered_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ix_outbox_dead_letter_key ON outbox.dead_letter (message_key);
