"""The Kafka side of a consumer instance every consumer group runs on (SPEC section 7; River's producer): poll,
pause and resume, rebalance, lanes, commit. What is done with the messages (decode, transact, classify, hold,
report) is the handling side's (:mod:`pin.messaging.consumer.handling`), whose decisions this side carries out.

Why it is shaped so (the inbox, batches with a fall-back to one message per transaction, retries on a paused
partition, dead letters, rebalances) is in docs/design/consumers.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging.consumer.config import ConsumerConfig
from pin.messaging.consumer.decisions import WHOLE_PARTITION, Decision, Handled, HoldUntil, PausePartition, scope_of
from pin.messaging.consumer.handling import AfterEffectHook, MessageHandling
from pin.messaging.consumer.inbox import prune_inbox
from pin.messaging.consumer.lag import forget_lag, record_lag
from pin.messaging.consumer.lanes import Lane, lane_of
from pin.messaging.consumer.membership import Membership
from pin.messaging.consumer.metrics import HELD
from pin.messaging.consumer.offsets import Offsets
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.routes import Route
from pin.messaging.topics import topic_version

log = structlog.get_logger(__name__)


def pool_size(lanes: int) -> int:
    """The database connections an instance with ``lanes`` lanes uses at the most: one per lane (its transaction,
    or storing a dead letter), and the loop's housekeeping (the inbox prune, its membership row)."""
    return lanes + 1


class ConsumerRuntime:
    """One consumer instance of a group: poll, deal to lanes, carry out the handling's decisions, commit."""

    def __init__(
        self,
        *,
        group: str,
        routes: Mapping[str, Route[Any]],
        pool: ConnectionPool[Conn],
        consumer_config: Mapping[str, Any],
        producer_config: Mapping[str, Any],
        config: ConsumerConfig | None = None,
        after_effect: AfterEffectHook | None = None,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        """``consumer_config`` and ``producer_config``: librdkafka's (pin.messaging.kafka); ``config``: the
        instance's own (its defaults when None); ``paused``: whether an operator pauses the group now."""
        for topic, route in routes.items():
            if topic_version(topic) not in (None, route.contract_version):
                raise ValueError(f"the route of {topic} reads contract version {route.contract_version}")
        self.group = group
        self._config = config = config or ConsumerConfig()
        self._routes = dict(routes)
        self._pool = pool
        # librdkafka's statistics feed the lag gauge (0 disables them)
        self._consumer_config = {"statistics.interval.ms": config.statistics_interval_ms, **consumer_config}
        # one bound for both: what a consumer reads and what its dead-letter producer may send
        # a record not acknowledged within dlq_timeout fails then, instead of lingering in the queue for minutes
        self._producer_config = {
            **producer_config,
            "message.max.bytes": config.max_message_bytes,
            "message.timeout.ms": max(1, int(config.dlq_timeout * 1000)),
        }
        # with one lane the loop handles it; with several each has its own thread (see lanes.py)
        self._lanes = [Lane(index) for index in range(config.lanes)]
        self._lane_threads: list[threading.Thread] = []
        self._lane_failure: BaseException | None = None
        # paused for a retry that holds every key (one lane), and paused at the ahead bound
        self._paused: set[tuple[str, int]] = set()
        self._paused_ahead: set[tuple[str, int]] = set()
        # an operator's pause of the whole group (operations.pause, read every few seconds): no new work is taken
        self._operator_pause = paused
        self._operator_paused = False
        self._assigned: frozenset[tuple[str, int]] = frozenset()
        self._revoked_in_poll: set[tuple[str, int]] = set()
        self._consumer: Consumer | None = None
        self._log = log.bind(group=group)
        # what was handled and not yet committed, per partition (committed per poll, and on revoke and stop)
        self.offsets = Offsets(self._log)
        self._next_prune = 0.0
        # this instance's row of messaging.consumer_member: how `pin status` tells a wedged group
        self._membership = Membership(
            group=group, pool=pool, interval=config.membership_interval, db_timeout=config.db_timeout, log=self._log
        )
        self._handling = MessageHandling(
            group=group, routes=routes, pool=pool, config=config, member=self._membership.member, log=self._log,
            after_effect=after_effect,
        )  # fmt: skip

    @property
    def assigned_partitions(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs this instance owns now (empty while joining or rebalancing)."""
        return self._assigned

    @property
    def topics(self) -> list[str]:
        """The topics this group reads."""
        return sorted(self._routes)

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set; the batch in hand is finished, offsets committed, then the group left."""
        on_commit = self.offsets.on_commit
        consumer = Consumer({**self._consumer_config, "stats_cb": self._on_stats, "on_commit": on_commit})
        self._consumer = consumer
        producer = self._handling.dead_letters.producer = Producer(self._producer_config)
        self._handling.start(stop, debug=logging.getLogger(__name__).isEnabledFor(logging.DEBUG))
        consumer.subscribe(self.topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)
        self._log.info(
            "consumer started", topics=self.topics, batch_size=self._config.batch_size, lanes=len(self._lanes)
        )
        self._start_lanes()
        try:
            while not stop.is_set():
                if self._lane_failure is not None:
                    raise RuntimeError("a consumer lane failed") from self._lane_failure
                self._follow_operator_pause(consumer)
                if self._threaded:
                    self._release_ahead(consumer)
                elif not self._operator_paused:
                    self._work(self._lanes[0])  # its retries that are due
                self._prune_inbox_if_due()
                self._membership.beat(self._assigned, self._lanes)  # a statement on its interval or a new assignment
                self._on_batch(self.poll_batch(consumer))
                self.offsets.commit_async(consumer)
                HELD.labels(self.group).set(sum(len(lane.held) for lane in self._lanes))
                producer.poll(0)  # the dead-letter producer's own log lines (librdkafka serves them on poll)
        finally:
            self._stop_lanes()
            for lane in self._lanes:
                lane.held.clear()
                lane.take()
            self._handling.held.forget_partitions(self._assigned)  # nothing of this instance is held any more
            HELD.labels(self.group).set(0)
            self._paused.clear()
            self._paused_ahead.clear()
            with contextlib.suppress(Exception):  # a failed last commit only means a redelivery (deduplicated)
                self.offsets.commit_sync(consumer, None)
            consumer.close()  # leaves the group, so the partitions move at once
            self._membership.leave()
            producer.flush(5)
            producer.close()
            self._consumer = self._handling.dead_letters.producer = None
            self._log.info("consumer stopped")

    # -- lanes ---------------------------------------------------------------------------------------------------

    @property
    def _threaded(self) -> bool:
        """Several lanes: each runs in its own thread; one lane is handled by the loop itself."""
        return self._config.threaded

    def _start_lanes(self) -> None:
        if not self._threaded:
            return
        for lane in self._lanes:
            lane.stopping = False
            thread = threading.Thread(
                target=self._lane_loop, args=(lane,), name=f"pin-consume-{self.group}-lane-{lane.index}", daemon=True
            )
            thread.start()
            self._lane_threads.append(thread)

    def _stop_lanes(self) -> None:
        """Each lane finishes what it is handling; what it has not started is read again from the committed offset."""
        for lane in self._lanes:
            lane.stop()
        for thread in self._lane_threads:
            thread.join()
        self._lane_threads.clear()

    def _lane_loop(self, lane: Lane) -> None:
        try:
            while not lane.stopping:
                lane.wait(self._config.poll_timeout)
                if not lane.stopping:
                    self._work(lane)
        except BaseException as exc:  # noqa: BLE001 - the loop stops the consumer: a lane must never die silently
            self._lane_failure = exc
            self._log.exception("consumer lane failed", lane=lane.index)

    def _work(self, lane: Lane) -> None:
        """A lane's due retries, then the fresh messages dealt to it: those of a held scope go behind the held
        message, the others are handled, each partition's in offset order and in batches of the batch size."""
        with lane.busy:
            self._retry_due(lane)
            for messages in lane.take().values():
                size = self._config.batch_size
                for start in range(0, len(messages), size):
                    # held as of now: a message of this batch size's run may have been held by the run before
                    fresh: list[Received] = []
                    for message in messages[start : start + size]:
                        scope = scope_of(message, threaded=self._threaded)
                        held = lane.held.get((message.topic, message.partition, scope))
                        if held is not None:
                            held.behind.append(message)
                        else:
                            fresh.append(message)
                    if fresh:
                        self._process(fresh, attempts=1, lane=lane)

    def _release_ahead(self, consumer: Consumer) -> None:
        """Resume the partitions paused at the ahead bound that are below it again."""
        for key in [k for k in self._paused_ahead if self.offsets.ahead(k) < self._config.max_ahead]:
            self._paused_ahead.discard(key)
            consumer.resume([TopicPartition(key[0], key[1])])
            self._log.info("partition resumed below the ahead bound", topic=key[0], partition=key[1])

    def _pause_if_ahead(self, key: tuple[str, int]) -> None:
        """At the ahead bound a partition is paused: never more than the bound in hand (and one fetch)."""
        if key in self._paused_ahead or self.offsets.ahead(key) < self._config.max_ahead:
            return
        self._consumer_or_fail().pause([TopicPartition(key[0], key[1])])
        self._paused_ahead.add(key)
        self._log.warning(
            "partition paused at the ahead bound", topic=key[0], partition=key[1], max_ahead=self._config.max_ahead
        )

    # -- the loop ------------------------------------------------------------------------------------------------

    def _follow_operator_pause(self, consumer: Consumer) -> None:
        """Pause every assigned partition while an operator pauses the group (again each turn: a rebalance resumes
        what it assigns); resume them, but those paused for a retry or at the ahead bound, when the pause ends."""
        paused = self._operator_pause is not None and self._operator_pause()
        if paused:
            consumer.pause([TopicPartition(topic, partition) for topic, partition in self._assigned])
            if not self._operator_paused:
                self._log.warning("consumer group paused by an operator: no new message is taken")
        elif self._operator_paused:
            kept = self._paused | self._paused_ahead
            consumer.resume([TopicPartition(t, p) for t, p in self._assigned if (t, p) not in kept])
            self._log.info("consumer group resumed by an operator")
        self._operator_paused = paused

    def _poll_wait(self) -> float:
        """Poll no longer than until the next retry the loop handles itself (one lane) is due."""
        soonest = None if self._threaded else self._lanes[0].next_retry()
        if soonest is None:
            return self._config.poll_timeout
        return max(0.0, min(self._config.poll_timeout, soonest - time.monotonic()))

    def poll_batch(self, consumer: Consumer) -> list[Message]:
        """One message (waiting up to the poll wait), then whatever else is already fetched, up to the batch size.

        ``consume(n, timeout)`` alone would wait for all n messages or the whole timeout, delaying a lone message.
        Rebalance callbacks run inside poll and consume: a message returned after a revoke belongs to the new
        assignment, but the first one was returned before the second call; if its partition was revoked during
        that call it is dropped (its next owner, perhaps this instance again, reads it from the committed offset).
        """
        first = consumer.poll(self._poll_wait())
        if first is None:
            return []
        if self._config.batch_size == 1:
            return [first]
        self._revoked_in_poll = set()
        more = consumer.consume(num_messages=self._config.batch_size - 1, timeout=0)
        if first.error() is None and (first.topic(), first.partition()) in self._revoked_in_poll:
            return list(more)
        return [first, *more]

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        self._log.warning("consumer error", error=str(error), fatal=error.fatal())
        if error.fatal():
            raise KafkaException(error)

    def _on_batch(self, polled: list[Message]) -> None:
        """The messages of one poll, each partition's in offset order."""
        by_partition: dict[tuple[str, int], list[Received]] = {}
        for item in polled:
            error = item.error()
            if error is not None:
                self._on_error(error)
                continue
            message = Received.of(item)
            by_partition.setdefault(message.partition_key, []).append(message)
        for key, messages in by_partition.items():
            if key in self._paused or self._operator_paused:
                # A paused partition delivers nothing; if buffered messages slip through, put them back for later.
                self._log.warning("message of a paused partition put back", topic=key[0], partition=key[1])
                try:
                    self._consumer_or_fail().seek(TopicPartition(key[0], key[1], messages[0].offset))
                except KafkaException as exc:
                    # cannot put it back: stop here rather than skip it; the next owner reads from the committed offset
                    raise RuntimeError(f"could not seek back {key[0]}[{key[1]}] to {messages[0].offset}") from exc
                continue
            self.offsets.dealt(key, (message.offset for message in messages))
            if not self._threaded:
                self._process(messages, attempts=1, lane=self._lanes[0])
                continue
            by_lane: dict[int, list[Received]] = {}
            for message in messages:
                by_lane.setdefault(lane_of(message.key, len(self._lanes)), []).append(message)
            for index, dealt in by_lane.items():
                self._lanes[index].deal(key, dealt)
            self._pause_if_ahead(key)

    def _retry_due(self, lane: Lane) -> None:
        now = time.monotonic()
        for key, held in list(lane.held.items()):
            if held.retry_at <= now:
                del lane.held[key]
                self._process(
                    [held.message, *held.behind], attempts=held.attempts + 1,
                    unreadable_attempts=held.unreadable_attempts, lane=lane,
                )  # fmt: skip
                partition = (key[0], key[1])
                if key not in lane.held and partition in self._paused:
                    self._paused.discard(partition)
                    self._consumer_or_fail().resume([TopicPartition(key[0], key[1])])

    def _process(
        self, messages: list[Received], *, attempts: int, unreadable_attempts: int = 0, lane: Lane | None = None
    ) -> None:
        """Messages of one partition and one lane, in order, handled (:meth:`MessageHandling.process`); each of the
        handling's decisions is carried out before it goes on."""
        lane = lane or self._lanes[0]
        for decision in self._handling.process(messages, attempts=attempts, unreadable_attempts=unreadable_attempts):
            self._carry_out(decision, lane)

    def _carry_out(self, decision: Decision, lane: Lane) -> None:
        """Commit up to, hold a key until, pause a partition."""
        match decision:
            case Handled(partition, offsets):
                self.offsets.done_many(partition, offsets)
            case HoldUntil(key, held, retry_in):
                lane.held[key] = held
                if key[2] != WHOLE_PARTITION:
                    self._log.info(
                        "key held for a retry", topic=key[0], partition=key[1], offset=held.message.offset,
                        retry_in_s=round(retry_in, 3), behind=len(held.behind),
                    )  # fmt: skip
            case PausePartition((topic, partition), retry_in):
                if (topic, partition) not in self._paused:
                    self._consumer_or_fail().pause([TopicPartition(topic, partition)])
                    self._paused.add((topic, partition))
                self._log.info(
                    "partition paused for a retry", topic=topic, partition=partition, retry_in_s=round(retry_in, 3)
                )

    # -- rebalance, statistics, housekeeping ------------------------------------------------------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """librdkafka's rebalance callback: ``partitions`` are this instance's now."""
        # A partition paused for a retry before it was revoked must not come back paused.
        consumer.resume(partitions)
        self._assigned = self._assigned | {(p.topic, p.partition) for p in partitions}
        self._log.info("partitions assigned", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """librdkafka's rebalance callback: ``partitions`` move away; their handled offsets are committed first."""
        # Called inside poll(): no message is being handled. The offsets of what was handled are committed (and
        # waited for) before the partitions move; held messages are not committed: the next owner reads them
        # again from the committed offset.
        self._revoke(consumer, [(p.topic, p.partition) for p in partitions], lost=False)
        self._log.info("partitions revoked", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """librdkafka's rebalance callback: ``partitions`` were taken away; their offsets are forgotten."""
        # The partitions are already someone else's: their offsets can no longer be committed by this instance.
        self._revoke(consumer, [(p.topic, p.partition) for p in partitions], lost=True)
        self._log.info("partitions lost", partitions=[f"{p.topic}[{p.partition}]" for p in partitions])

    def _revoke(self, consumer: Consumer, keys: list[tuple[str, int]], *, lost: bool) -> None:
        """The lanes finish what they are handling and drop what they hold of ``keys``; what is done is committed
        (unless lost), the rest is the next owner's from the committed offset."""
        gone = set(keys)
        for lane in self._lanes:
            with lane.busy:  # a lane thread's batch in hand is finished first (the loop's own is, between polls)
                lane.forget(gone)
        if lost:
            self.offsets.drop(gone)
        else:
            self.offsets.commit_sync(consumer, gone)
            self.offsets.forget(gone)
        self._assigned = self._assigned - gone
        self._revoked_in_poll |= gone
        self._handling.forget(gone)
        for topic, partition in keys:
            self._paused.discard((topic, partition))
            self._paused_ahead.discard((topic, partition))
            forget_lag(self.group, topic, partition)

    def _on_stats(self, stats_json: str) -> None:
        record_lag(self.group, stats_json)

    def _prune_inbox_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self._config.inbox_prune_interval
        prune_inbox(
            self._pool, self.group, self._config.inbox_retention_seconds, db_timeout=self._config.db_timeout,
            log=self._log, also=self._handling.held.prune,
        )  # fmt: skip

    def _consumer_or_fail(self) -> Consumer:
        assert self._consumer is not None, "the runtime is not running"
        return self._consumer
