-- The outbox gauges' bounded reads (pin/outbox/gauges.py): the relay and the workers refresh them every few seconds.

-- outbox_backlog_by_topic --
-- Per topic, the waiting rows and the age of the oldest, over the oldest rows up to the cap: a range of the primary
-- key (id order is creation order), never a scan of a huge table.
SELECT topic, count(*) AS rows, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS age
FROM (SELECT topic, created_at FROM outbox.message ORDER BY id LIMIT %(cap)s) s
GROUP BY topic

-- dead_letter_count --
-- Dead letters awaiting an operator, counted up to the cap.
SELECT count(*) AS rows FROM (SELECT 1 FROM outbox.dead_letter LIMIT %(cap)s) s
