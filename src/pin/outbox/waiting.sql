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
-- Keep only the marks an answer can need: per partition its first and its latest; of the others, none that a later
-- offset acknowledged no later makes useless (dominated), one per %(grain)s seconds (the first), and none behind
-- the lowest offset the groups reading it have committed (given as arrays; a group without one needs the first).
WITH behind AS (
    SELECT topic, kafka_partition, min(next_offset) AS next_offset
    FROM unnest(%(topics)s::text[], %(partitions)s::int[], %(offsets)s::bigint[]) AS c(topic, kafka_partition, next_offset)
    GROUP BY topic, kafka_partition
), marks AS (
    SELECT p.topic, p.kafka_partition, p.last_offset, p.acked_at,
           min(p.acked_at) OVER later <= p.acked_at AS dominated,
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
                              ORDER BY m.last_offset) AS nth_in_grain
    FROM marks m
)
DELETE FROM outbox.acked_position p
USING ranked r
WHERE p.topic = r.topic AND p.kafka_partition = r.kafka_partition AND p.last_offset = r.last_offset
  AND r.last_offset <> r.first_offset AND r.last_offset <> r.latest_offset
  AND (r.dominated OR r.nth_in_grain > 1 OR r.last_offset < coalesce(r.next_offset, r.latest_offset))
