-- What waits for each consumer group (pin/outbox/waiting.py): the relay's acknowledged positions against the
-- groups' committed offsets, which the caller reads from the broker and passes as arrays. docs/design/consumer-waits.md.

-- consumer_waits --
-- Per group, topic it reads and partition the relay was acknowledged on: the group's committed offset (NULL: none,
-- it starts from the beginning), the end of what was acknowledged, and the age of the oldest message at or after the
-- committed offset: the earliest acked_at of a mark at or after it (that message was appended before the mark's).
WITH reads AS (
    SELECT * FROM unnest(%(read_groups)s::text[], %(read_topics)s::text[]) AS r(consumer_group, topic)
), committed AS (
    SELECT * FROM unnest(%(groups)s::text[], %(topics)s::text[], %(partitions)s::int[], %(offsets)s::bigint[])
        AS c(consumer_group, topic, kafka_partition, next_offset)
), acked AS (
    SELECT topic, kafka_partition, max(last_offset) + 1 AS acked_end
    FROM outbox.acked_position
    WHERE topic = ANY(%(read_topics)s::text[])
    GROUP BY topic, kafka_partition
)
SELECT r.consumer_group, r.topic, a.kafka_partition, c.next_offset, a.acked_end,
       EXTRACT(EPOCH FROM now() - (
           SELECT min(p.acked_at) FROM outbox.acked_position p
            WHERE p.topic = r.topic AND p.kafka_partition = a.kafka_partition
              AND p.last_offset >= coalesce(c.next_offset, 0)))::float8 AS oldest_age
FROM reads r
JOIN acked a ON a.topic = r.topic
LEFT JOIN committed c
  ON c.consumer_group = r.consumer_group AND c.topic = r.topic AND c.kafka_partition = a.kafka_partition
ORDER BY r.consumer_group, r.topic, a.kafka_partition

-- acked_position_prune_lock --
-- One pruner at a time (the relays all refresh): the others skip this round.
SELECT pg_try_advisory_xact_lock(hashtext('outbox.acked_position prune')) AS mine

-- acked_position_prune --
-- Keep only the marks an answer can need: per partition its first and its latest, and for each offset a group has
-- committed (given as arrays) the mark that answers for it now. Of the others, delete those behind the lowest of
-- those offsets (a group without one needs the first mark only), those a later offset acknowledged no later makes
-- useless (dominated), and all but the last of each %(grain)s seconds (an answer for an offset a group reaches later
-- then comes from a mark of the same grain: at most that much younger than it could be; the first of a grain would
-- leave the answer to the next mark, however much later it came).
WITH committed AS (
    SELECT * FROM unnest(%(topics)s::text[], %(partitions)s::int[], %(offsets)s::bigint[])
        AS c(topic, kafka_partition, next_offset)
), behind AS (
    SELECT topic, kafka_partition, min(next_offset) AS next_offset FROM committed GROUP BY topic, kafka_partition
), answering AS (
    SELECT DISTINCT ON (c.topic, c.kafka_partition, c.next_offset) p.topic, p.kafka_partition, p.last_offset
    FROM committed c
    JOIN outbox.acked_position p
      ON p.topic = c.topic AND p.kafka_partition = c.kafka_partition AND p.last_offset >= c.next_offset
    ORDER BY c.topic, c.kafka_partition, c.next_offset, p.acked_at, p.last_offset
), marks AS (
    SELECT p.topic, p.kafka_partition, p.last_offset, p.acked_at,
           coalesce(min(p.acked_at) OVER later <= p.acked_at, false) AS dominated,
           min(p.last_offset) OVER whole AS first_offset,
           max(p.last_offset) OVER whole AS latest_offset,
           b.next_offset
    FROM outbox.acked_position p
    LEFT JOIN behind b ON b.topic = p.topic AND b.kafka_partition = p.kafka_partition
    WINDOW whole AS (PARTITION BY p.topic, p.kafka_partition),
           later AS (PARTITION BY p.topic, p.kafka_partition ORDER BY p.last_offset DESC
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
), ranked AS (
    SELECT m.*,
           row_number() OVER (PARTITION BY m.topic, m.kafka_partition, m.dominated,
                              date_bin(make_interval(secs => %(grain)s), m.acked_at, timestamptz 'epoch')
                              ORDER BY m.last_offset DESC) AS nth_in_grain
    FROM marks m
)
DELETE FROM outbox.acked_position p
USING ranked r
WHERE p.topic = r.topic AND p.kafka_partition = r.kafka_partition AND p.last_offset = r.last_offset
  AND r.last_offset <> r.first_offset AND r.last_offset <> r.latest_offset
  AND NOT EXISTS (SELECT 1 FROM answering a
                   WHERE a.topic = r.topic AND a.kafka_partition = r.kafka_partition AND a.last_offset = r.last_offset)
  AND (r.dominated OR r.nth_in_grain > 1 OR r.last_offset < coalesce(r.next_offset, r.latest_offset))
