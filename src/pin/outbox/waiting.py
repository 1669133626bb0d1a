"""What waits for each consumer group, from what exists while the group is down: the offsets at which the broker
acknowledged the relay's sends (``outbox.acked_position``, written as each batch settles) against the offsets the
group committed (the broker's OffsetFetch). Never the broker's watermarks. docs/design/consumer-waits.md.

:func:`read_consumer_waits` is the one reading, for `pin status` (and a console); :class:`ConsumerWaitGauges`
exports it from every relay instance as ``pin_consumer_waiting_messages`` and ``pin_consumer_oldest_waiting_seconds``
(with each group's SLA), which ConsumerWaitingPastSla compares.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions
from prometheus_client import Gauge
from psycopg_pool import ConnectionPool

from pin.db import Conn, load_queries
from pin.messaging.consumer.metrics import SLA
from pin.messaging.groups import SLA_SECONDS

_QUERIES = load_queries(__package__, "waiting.sql")
CONSUMER_WAITS = _QUERIES["consumer_waits"]
ACKED_POSITION_PRUNE_LOCK = _QUERIES["acked_position_prune_lock"]
ACKED_POSITION_PRUNE = _QUERIES["acked_position_prune"]

# The pruning keeps one mark (the last) per this many seconds of acknowledgements: an age is at most this much too
# young.
MARK_GRAIN_SECONDS = 5

WAITING = Gauge(
    "pin_consumer_waiting_messages",
    "Messages the relay was acknowledged at and the group has not committed past, per partition (every relay "
    "exports the same values: aggregate with max).",
    ["group", "topic", "partition"],
)
OLDEST_WAITING = Gauge(
    "pin_consumer_oldest_waiting_seconds",
    "How long ago the broker acknowledged the oldest message waiting for the group on the partition (0 when none "
    "waits; a lower bound: from the batch's settle).",
    ["group", "topic", "partition"],
)
CHECKED = Gauge(
    "pin_consumer_waiting_checked_timestamp_seconds",
    "When this relay last read what waits for every group (Unix time); ConsumerWaitingUnchecked fires when stale.",
)

# group -> {(topic, partition): the next offset it will read}
Committed = Mapping[str, Mapping[tuple[str, int], int]]


@dataclass(frozen=True)
class PartitionWait:
    """One partition of a topic a group reads: what the group committed, what was acknowledged, what waits."""

    topic: str
    partition: int
    committed: int | None  # the next offset the group reads (None: it never committed here)
    acked_end: int  # one past the highest offset the relay was acknowledged at
    waiting: int
    oldest_seconds: float  # since the oldest waiting message's acknowledgement (0: none waits)


@dataclass(frozen=True)
class GroupWait:
    """What waits for one consumer group, against its SLA (``pin.messaging.groups.SLA_SECONDS``)."""

    group: str
    sla_seconds: float
    partitions: tuple[PartitionWait, ...]

    @property
    def waiting(self) -> int:
        """Messages waiting on every partition of every topic it reads."""
        return sum(p.waiting for p in self.partitions)

    @property
    def oldest_seconds(self) -> float:
        """The age of its oldest waiting message (0: none waits)."""
        return max((p.oldest_seconds for p in self.partitions), default=0.0)

    @property
    def past_sla(self) -> bool:
        """Its oldest waiting message has waited longer than its SLA."""
        return self.oldest_seconds > self.sla_seconds


# how much longer than a request's own timeout its answer is waited for: the client ends the request first
_RESULT_MARGIN_SECONDS = 5.0


def committed_offsets(admin: Any, groups: Iterable[str], timeout: float) -> dict[str, dict[tuple[str, int], int]]:
    """Each group's committed offsets (OffsetFetch, DESCRIBE on the group): a group that never committed has none.
    Raises KafkaException when the broker does not answer.

    The broker is asked for its metadata first, and no offsets are asked of one that does not answer: librdkafka
    (2.x) can abort the process on an assertion (``rd_kafka_enq_once_del_source_return``) when an OffsetFetch's
    coordinator lookup times out while the broker is away. And each request's own timeout ends it, never an
    earlier one of ours: a request abandoned while it is still pending in the client was the other half of it.
    """
    admin.list_topics(timeout=timeout)  # KafkaException: the broker is away; nothing more is asked
    found: dict[str, dict[tuple[str, int], int]] = {}
    for group in groups:  # the client asks one group per request
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
        answer = futures[group].result(timeout=timeout + _RESULT_MARGIN_SECONDS)
        found[group] = {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}
    return found


def consumer_waits(conn: Conn, reads: Mapping[str, tuple[str, ...]], committed: Committed) -> tuple[GroupWait, ...]:
    """What waits for each group of ``reads`` on every partition the relay was acknowledged on (one statement)."""
    pairs = [(group, topic) for group, topics in reads.items() for topic in topics]
    offsets = [(g, t, p, o) for g, positions in committed.items() for (t, p), o in positions.items()]
    params = {
        "read_groups": [g for g, _ in pairs],
        "read_topics": [t for _, t in pairs],
        "groups": [row[0] for row in offsets],
        "topics": [row[1] for row in offsets],
        "partitions": [row[2] for row in offsets],
        "offsets": [row[3] for row in offsets],
    }
    per_group: dict[str, list[PartitionWait]] = {group: [] for group in reads}
    for row in conn.execute(CONSUMER_WAITS, params):
        committed_offset = None if row["next_offset"] is None else int(str(row["next_offset"]))
        acked_end = int(str(row["acked_end"]))
        waiting = max(0, acked_end - (committed_offset or 0))
        age = float(str(row["oldest_age"])) if waiting and row["oldest_age"] is not None else 0.0
        partition = int(str(row["kafka_partition"]))
        wait = PartitionWait(str(row["topic"]), partition, committed_offset, acked_end, waiting, age)
        per_group[str(row["consumer_group"])].append(wait)
    return tuple(GroupWait(group, SLA_SECONDS[group], tuple(waits)) for group, waits in per_group.items())


def prune_acked_positions(conn: Conn, reads: Mapping[str, tuple[str, ...]], committed: Committed) -> int:
    """Delete the marks no answer needs any more (one pruner at a time); how many."""
    offsets = [  # of the topics each group reads now: an old topic's commits hold back no mark
        (topic, partition, offset)
        for group, positions in committed.items()
        for (topic, partition), offset in positions.items()
        if topic in reads.get(group, ())
    ]
    with conn.transaction():
        lock = conn.execute(ACKED_POSITION_PRUNE_LOCK).fetchone()
        if lock is None or not lock["mine"]:
            return 0
        params = {
            "topics": [o[0] for o in offsets],
            "partitions": [o[1] for o in offsets],
            "offsets": [o[2] for o in offsets],
            "grain": MARK_GRAIN_SECONDS,
        }
        return conn.execute(ACKED_POSITION_PRUNE, params).rowcount


def read_consumer_waits(
    reads: Mapping[str, tuple[str, ...]], conn: Conn, admin: Any, timeout: float
) -> tuple[GroupWait, ...]:
    """What waits for every consumer group now (``reads``: group -> the topics it reads now,
    :func:`pin.consumer_groups.group_reads`): the one reading behind `pin status`, a console and the gauges."""
    return consumer_waits(conn, reads, committed_offsets(admin, reads, timeout))


class ConsumerWaitGauges:
    """Exports what waits for every group, and each group's SLA, from this relay; prunes the marks behind them."""

    def __init__(
        self, reads: Mapping[str, tuple[str, ...]], pool: ConnectionPool[Conn], admin: Any, timeout: float = 5.0
    ) -> None:
        self._reads = reads  # group -> the topics it reads now (pin.consumer_groups.group_reads)
        self._pool = pool
        self._admin = admin
        self._timeout = timeout
        self._exported: set[tuple[str, str, str]] = set()
        for group, sla in SLA_SECONDS.items():  # the SLA of a group that runs nowhere is still exported
            SLA.labels(group).set(sla)

    def refresh(self) -> None:
        """Read the groups' offsets and the marks, export them, prune. Raises when the broker or database fails
        (the gauges keep their values; the checked timestamp stops moving)."""
        try:
            committed = committed_offsets(self._admin, self._reads, self._timeout)
        finally:
            self._admin.poll(0)  # hands librdkafka's lines to the logger
        with self._pool.connection() as conn:
            waits = consumer_waits(conn, self._reads, committed)
            prune_acked_positions(conn, self._reads, committed)
        self._export(waits)
        CHECKED.set(time.time())

    def _export(self, waits: tuple[GroupWait, ...]) -> None:
        exported: set[tuple[str, str, str]] = set()
        for group in waits:
            for wait in group.partitions:
                labels = (group.group, wait.topic, str(wait.partition))
                WAITING.labels(*labels).set(wait.waiting)
                OLDEST_WAITING.labels(*labels).set(wait.oldest_seconds)
                exported.add(labels)
        for labels in self._exported - exported:  # a topic the group no longer reads
            WAITING.remove(*labels)
            OLDEST_WAITING.remove(*labels)
        self._exported = exported
