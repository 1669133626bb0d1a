-- Transactional outbox (SPEC section 5). Rows are inserted in the business transaction and deleted by
-- primary key once the broker acknowledged them: the table stays small, so it is a queue, not a history.
-- In cdc mode (PIN_OUTBOX_MODE=cdc) the writer deletes each row in the transaction that inserted it: Debezium reads
-- the insert from the WAL (docs/runbooks/outbox-cdc.md), and the table stays empty.
CREATE SCHEMA IF NOT EXISTS outbox;

CREATE TABLE outbox.message (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- MessageId: header and consumer dedup key; unique with the topic (migration 0002, outbox/migrations.sql: a
    -- contract migration writes one event as two rows, its v1 and its v2, on two topics)
    message_id       uuid        NOT NULL UNIQUE,
    vpart            smallint    NOT NULL CHECK (vpart >= 0), -- stable hash of message_key; the relay's unit of ownership
    topic            text        NOT NULL,
    message_key      text        NOT NULL,                    -- Kafka key: the contract's aggregate id
    event_type       text        NOT NULL,
    contract_version integer     NOT NULL,
    payload          jsonb       NOT NULL,                    -- contract fields plus the envelope
    -- the Kafka value, written with the row (outbox/writer.py: kafka_value) and sent as is, so the relay never
    -- parses a payload; every path writes it (a dead letter's replay too); NULL only on a row written before the
    -- column existed, whose value the relay encodes from payload
    value            text,
    headers          jsonb       NOT NULL DEFAULT '{}',       -- correlation-id, traceparent, ...
    -- the consumer headers of ``headers`` as plain columns, for Debezium's outbox router (it places a column, not
    -- a jsonb member, as a Kafka header); written from the same mapping (outbox/writer.py: insert_values_params)
    correlation_id   text,
    traceparent      text,
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
    message_id       uuid        NOT NULL UNIQUE,             -- unique with the topic (migration 0002)
    vpart            smallint    NOT NULL,
    topic            text        NOT NULL,
    message_key      text        NOT NULL,
    event_type       text        NOT NULL,
    contract_version integer     NOT NULL,
    payload          jsonb       NOT NULL,
    value            text,                                    -- the row's Kafka value, put back by a replay
    headers          jsonb       NOT NULL,
    correlation_id   text,
    traceparent      text,
    occurred_at      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    attempts         integer     NOT NULL,
    error            text        NOT NULL,                    -- error code and text (never the payload)
    permanent        boolean     NOT NULL DEFAULT false,      -- the broker will never accept it (vs. attempts exhausted)
    dead_lettered_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ix_outbox_dead_letter_key ON outbox.dead_letter (message_key);

-- Wake-up signal for the relay: one NOTIFY per inserting statement (not per row), delivered at commit.
-- It is only a hint (NOTIFY is lost while the relay reconnects); the relay polls as the fallback.
-- PostgreSQL folds identical notifications of one transaction into one, so a multi-row unit of work
-- sends a single wake-up.
CREATE FUNCTION outbox.notify_relay() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pin_outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER tr_outbox_message_notify
    AFTER INSERT ON outbox.message
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.notify_relay();

-- head-of-key guard, the cheap half: "is an earlier row of this key in backoff?" (few rows ever are)
CREATE INDEX ix_outbox_message_backoff ON outbox.message (message_key, id) WHERE next_attempt_at IS NOT NULL;

-- Live relay instances (heartbeat); the fair share of vparts is VPARTS / live instances.
CREATE TABLE outbox.relay_instance (
    instance_id  text        PRIMARY KEY,                     -- unique per process start
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL                         -- database clock; renewed by the heartbeat
);

-- One lease per virtual partition: only the owner of an unexpired lease reads, retries or dead-letters the
-- rows of that vpart, so a key has one publisher at a time. Expiry is judged on the database clock only.
CREATE TABLE outbox.relay_lease (
    vpart        smallint    PRIMARY KEY CHECK (vpart >= 0),
    owner        text,                                        -- relay_instance.instance_id, NULL when free
    epoch        bigint      NOT NULL DEFAULT 0,              -- fencing token: +1 at every acquisition
    expires_at   timestamptz NOT NULL DEFAULT '-infinity',
    acquired_at  timestamptz
);
-- 64 = outbox.writer.VPARTS
INSERT INTO outbox.relay_lease (vpart) SELECT generate_series(0, 63);
