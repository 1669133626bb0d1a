-- The publication Debezium's PostgreSQL connector reads in cdc mode (its publication.name; the connector's
-- publication.autocreate.mode is "disabled", so this is the one definition). On the outbox table only, inserts only:
-- in cdc mode every row is deleted in the transaction that inserted it, and the deletes must never reach the
-- stream. Run once, as the table's owner, after `pin migrate`. tests/outbox/test_cdc_wal.py runs this file.
CREATE PUBLICATION pin_outbox FOR TABLE outbox.message WITH (publish = 'insert');
