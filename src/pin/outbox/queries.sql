-- The outbox writer's statements. Each starts with a "-- name --" line and a one-line description; the column
-- lists in braces are filled in from the writer's one column tuple (outbox/writer.py: _COLUMNS, MOVED_COLUMNS).

-- outbox_insert_values --
-- A few rows given as parameters, in the order given (per key, id order is commit order): the unit of work's insert,
-- and the fragment a statement writing a few rows embeds as a data-modifying CTE (the calendar cluster's write).
INSERT INTO outbox.message ({columns})
VALUES {rows}

-- outbox_insert_unnest --
-- A batch given as one binary array per column, kept when {where} holds, in the order given: the fragment a
-- set-based statement embeds (the expire-promotions batch, keeping the rows of the purchases it changed).
INSERT INTO outbox.message ({columns})
SELECT {values}
  FROM unnest({arrays}) WITH ORDINALITY AS m({columns}, n)
 WHERE {where}
 ORDER BY m.n

-- outbox_delete_captured --
-- cdc mode: the rows this transaction inserted, by their MessageId (both rows of a dual-published event).
DELETE FROM outbox.message WHERE message_id = ANY(%s::uuid[])

-- outbox_put_back --
-- A dead letter back into the outbox under its own id (smaller than every later row of its key: first again).
INSERT INTO outbox.message ({moved_columns}) OVERRIDING SYSTEM VALUE VALUES ({placeholders})
