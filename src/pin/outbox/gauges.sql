-- The outbox gauges' reads (pin/outbox/gauges.py): the relay and the workers refresh them every few seconds.

-- outbox_backlog_by_topic --
-- Per topic, every waiting row and the age of the oldest, exact at any backlog: the rows of outbox.unpublished (the
-- floors' three parts, docs/design/outbox-storage.md), the first part read as one range of the primary key from the
-- lowest stored floor (outbox.relay_floor; in heap order, not 64 walks of the table), each part counted per topic before they are added up,
-- so it costs the rows waiting, never the dead rows a held horizon keeps below the floors (measured at 1,000,000
-- rows: bench.relay.gauges).
SELECT topic, sum(rows)::bigint AS rows, EXTRACT(EPOCH FROM now() - min(oldest))::float8 AS age
FROM (
    SELECT m.topic, count(*) AS rows, min(m.created_at) AS oldest
    FROM outbox.message m
    JOIN outbox.relay_floor l ON l.vpart = m.vpart
    WHERE m.id > (SELECT min(floor_id) FROM outbox.relay_floor) AND {past}
    GROUP BY m.topic
    UNION ALL
    SELECT m.topic, count(*), min(m.created_at)
    FROM outbox.relay_floor l CROSS JOIN LATERAL {since} AS m
    GROUP BY m.topic
    UNION ALL
    SELECT m.topic, count(*), min(m.created_at)
    FROM outbox.relay_floor l CROSS JOIN LATERAL {running} AS m
    GROUP BY m.topic
) w
GROUP BY topic

-- dead_letter_count --
-- Dead letters awaiting an operator, counted up to the cap.
SELECT count(*) AS rows FROM (SELECT 1 FROM outbox.dead_letter LIMIT %(cap)s) s
