"""The consumer runtime every consumer group runs on (SPEC section 7): poll, handle, dedup, retry, dead-letter, commit.

Why it is shaped so (the inbox, batches with a fall-back to one message per transaction, retries on a paused
partition, dead letters, rebalances) is in docs/design/consumers.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from psycopg_pool import ConnectionPool

from pin.cancellation import Canceller, query_canceled
from pin.db import Conn
from pin.messaging.consumer.dead_letters.send import DeadLetterSender
from pin.messaging.consumer.held import HeldRecords, ParkedByOperator, ParkRequested
from pin.messaging.consumer.inbox import inbox_insert, prune_inbox
from pin.messaging.consumer.lag import forget_lag, record_lag
from pin.messaging.consumer.lanes import WHOLE_PARTITION, Lane, Scope, lane_of
from pin.messaging.consumer.membership import Membership
from pin.messaging.consumer.metrics import HELD
from pin.messaging.consumer.offsets import Offsets
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.reporting import Decoded, message_log, message_span, read, report_run, with_envelope
from pin.messaging.consumer.retry import Failure, Held, backoff_delay, classify
from pin.messaging.consumer.routes import HandlingContext, Route
from pin.messaging.topics import topic_version
from pin.observability.tracing import spans_exported
from pin.settings import ConsumerSettings, KafkaSettings

log = structlog.get_logger(__name__)

# The dead-letter producer's message.max.bytes, and the largest value a consumer reads, unless told otherwise.
DEFAULT_MAX_MESSAGE_BYTES: int = KafkaSettings().max_message_bytes
# How many messages of a partition may be in hand past its committed offset before it is paused.
DEFAULT_MAX_AHEAD: int = ConsumerSettings().max_ahead
# Attempts at an unreadable message before it is dead-lettered (the only failure that is: pin.faults.TREATMENTS).
DEFAULT_UNREADABLE_ATTEMPTS: int = ConsumerSettings().unreadable_attempts


def pool_size(lanes: int) -> int:
    """The database connections an instance with ``lanes`` lanes uses at the most: one per lane (its transaction,
    or storing a dead letter), and the loop's housekeeping (the inbox prune, its membership row)."""
    return lanes + 1


class _Stopped(BaseException):
    """A stop request reached the transaction in flight (cancelled, rolled back whole) or came before the next one
    began: the messages not applied are read again from the committed offset. A BaseException, so that no failure
    handler of a message counts it as the message's failure."""

    def __init__(self, cancelled: dict[str, object] | None) -> None:
        super().__init__("stopped")
        self.cancelled = cancelled  # the rolled-back transaction's messages (topic, partition, offsets); None: none


class AfterEffectHook(Protocol):
    """Called after a message's effect committed and before its offset is (a test-only fault hook)."""

    def __call__(self, message: Received) -> None:
        """Observe (or sabotage) the gap between effect and offset commit."""


class ConsumerRuntime:
    """One consumer instance of a group: poll, handle, dedup, retry, dead-letter, commit."""

    def __init__(
        self,
        *,
        group: str,
        routes: Mapping[str, Route[Any]],
        pool: ConnectionPool[Conn],
        consumer_config: Mapping[str, Any],
        producer_config: Mapping[str, Any],
        unreadable_attempts: int = DEFAULT_UNREADABLE_ATTEMPTS,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        poll_timeout: float = 0.5,
        batch_size: int = 200,
        db_timeout: float = 5.0,
        dlq_timeout: float = 15.0,
        dead_letter_attempts: int = 3,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        inbox_retention_seconds: float = ConsumerSettings().inbox_retention_seconds,
        inbox_prune_interval: float = 600.0,
        statistics_interval_ms: int = 10_000,
        membership_interval: float = 5.0,
        after_effect: AfterEffectHook | None = None,
        lanes: int = 1,
        max_ahead: int = DEFAULT_MAX_AHEAD,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        if unreadable_attempts < 1:
            raise ValueError("unreadable_attempts must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if dead_letter_attempts < 1:
            raise ValueError("dead_letter_attempts must be at least 1")
        if lanes < 1 or max_ahead < 1:
            raise ValueError("lanes and max_ahead must be at least 1")
        for topic, route in routes.items():
            if topic_version(topic) not in (None, route.contract_version):
                raise ValueError(f"the route of {topic} reads contract version {route.contract_version}")
        self.group = group
        self._routes = dict(routes)
        self._pool = pool
        # librdkafka's statistics feed the lag gauge (0 disables them)
        self._consumer_config = {"statistics.interval.ms": statistics_interval_ms, **consumer_config}
        # one bound for both: what a consumer reads and what its dead-letter producer may send
        # a record not acknowledged within dlq_timeout fails then, instead of lingering in the queue for minutes
        self._producer_config = {
            **producer_config,
            "message.max.bytes": max_message_bytes,
            "message.timeout.ms": max(1, int(dlq_timeout * 1000)),
        }
        self._max_message_bytes = max_message_bytes
        self._unreadable_attempts = unreadable_attempts
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._poll_timeout = poll_timeout
        self._batch_size = batch_size
        self._db_timeout = db_timeout
        self._inbox_retention = inbox_retention_seconds
        self._prune_interval = inbox_prune_interval
        self._after_effect = after_effect
        # with one lane the loop handles it; with several each has its own thread (see lanes.py)
        self._lanes = [Lane(index) for index in range(lanes)]
        self._lane_threads: list[threading.Thread] = []
        self._lane_failure: BaseException | None = None
        self._max_ahead = max_ahead
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
        self._dead_letters = DeadLetterSender(
            group=group, pool=pool, log=self._log, max_message_bytes=max_message_bytes, dlq_timeout=dlq_timeout,
            attempts=dead_letter_attempts, db_timeout=db_timeout,
        )  # fmt: skip
        self._debug = False
        self._next_prune = 0.0
        # this instance's row of messaging.consumer_member: how `pin status` tells a wedged group
        self._membership = Membership(
            group=group, pool=pool, interval=membership_interval, db_timeout=db_timeout, log=self._log
        )
        # run()'s stop request cancels the transaction in flight (pin.cancellation); none begins after it
        self._canceller = Canceller()
        # the messages this instance holds in retry, in messaging.held_message (for operators; `pin dlq park`)
        self._held = HeldRecords(
            group=group, member=self._membership.member, pool=pool, db_timeout=db_timeout, log=self._log
        )

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
        self._canceller.stop = stop
        on_commit = self.offsets.on_commit
        consumer = Consumer({**self._consumer_config, "stats_cb": self._on_stats, "on_commit": on_commit})
        self._consumer = consumer
        producer = self._dead_letters.producer = Producer(self._producer_config)
        self._debug = logging.getLogger(__name__).isEnabledFor(logging.DEBUG)
        consumer.subscribe(self.topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)
        self._log.info("consumer started", topics=self.topics, batch_size=self._batch_size, lanes=len(self._lanes))
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
            self._held.forget_partitions(self._assigned)  # nothing of this instance is held any more
            HELD.labels(self.group).set(0)
            self._paused.clear()
            self._paused_ahead.clear()
            with contextlib.suppress(Exception):  # a failed last commit only means a redelivery (deduplicated)
                self.offsets.commit_sync(consumer, None)
            consumer.close()  # leaves the group, so the partitions move at once
            self._membership.leave()
            producer.flush(5)
            producer.close()
            self._consumer = self._dead_letters.producer = None
            self._log.info("consumer stopped")

    # -- lanes ---------------------------------------------------------------------------------------------------

    @property
    def _threaded(self) -> bool:
        """Several lanes: each runs in its own thread; one lane is handled by the loop itself."""
        return len(self._lanes) > 1

    def _scope(self, message: Received) -> Scope:
        """What a held message holds back: the later messages of its key (several lanes), else of its partition."""
        return message.key if self._threaded else WHOLE_PARTITION

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
                lane.wait(self._poll_timeout)
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
                for start in range(0, len(messages), self._batch_size):
                    # held as of now: a message of this batch size's run may have been held by the run before
                    fresh: list[Received] = []
                    for message in messages[start : start + self._batch_size]:
                        held = lane.held.get((message.topic, message.partition, self._scope(message)))
                        if held is not None:
                            held.behind.append(message)
                        else:
                            fresh.append(message)
                    if fresh:
                        self._process(fresh, attempts=1, lane=lane)

    def _release_ahead(self, consumer: Consumer) -> None:
        """Resume the partitions paused at the ahead bound that are below it again."""
        for key in [k for k in self._paused_ahead if self.offsets.ahead(k) < self._max_ahead]:
            self._paused_ahead.discard(key)
            consumer.resume([TopicPartition(key[0], key[1])])
            self._log.info("partition resumed below the ahead bound", topic=key[0], partition=key[1])

    def _pause_if_ahead(self, key: tuple[str, int]) -> None:
        """At the ahead bound a partition is paused: never more than the bound in hand (and one fetch)."""
        if key in self._paused_ahead or self.offsets.ahead(key) < self._max_ahead:
            return
        self._consumer_or_fail().pause([TopicPartition(key[0], key[1])])
        self._paused_ahead.add(key)
        self._log.warning(
            "partition paused at the ahead bound", topic=key[0], partition=key[1], max_ahead=self._max_ahead
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
            return self._poll_timeout
        return max(0.0, min(self._poll_timeout, soonest - time.monotonic()))

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
        if self._batch_size == 1:
            return [first]
        self._revoked_in_poll = set()
        more = consumer.consume(num_messages=self._batch_size - 1, timeout=0)
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
        """Messages of one partition and one lane, in order (the first has failed ``attempts - 1`` times before, of
        which ``unreadable_attempts`` because it could not be read).

        Fresh messages go in batches: the readable ones before an unreadable one in one transaction, then the
        unreadable one alone (held for a retry, dead-lettered once its attempts are used up), then batch mode
        again. When a batch's transaction fails, its
        messages go one per transaction, as lone messages. A message that fails is held for a retry with the later
        messages of its scope (its key, or with one lane every key) behind it; the others go on. A loop, not
        recursion: a batch of any size with any number of unreadable messages in it takes constant stack.
        """
        lane = lane or self._lanes[0]
        try:
            self._process_in_order(messages, attempts, unreadable_attempts, lane)
        except _Stopped as stopped:
            if stopped.cancelled is not None:
                self._log.warning(
                    "consumer stopping: the transaction in flight was cancelled and rolled back; what was applied"
                    " before it is committed, the rest is read again from the committed offset",
                    **stopped.cancelled,
                )  # fmt: skip

    def _process_in_order(self, messages: list[Received], attempts: int, unreadable_attempts: int, lane: Lane) -> None:
        """:meth:`_process`'s loop (a stop request ends it with :class:`_Stopped`)."""
        queue, tries, unreadable, index, batches = messages, attempts, unreadable_attempts, 0, True
        while index < len(queue):
            if batches and tries == 1 and len(queue) - index > 1:
                rest, isolated = self._apply_batch(queue[index:])
                queue, index = rest, 0
                batches = not isolated  # a failed batch's messages go one per transaction
                if not queue:
                    return
            message = queue[index]
            failure = self._handle(message, attempts=tries, unreadable_attempts=unreadable)
            if failure is not None:
                queue, index = self._hold(lane, message, tries, failure, later=queue[index + 1 :]), 0
            else:
                index += 1
            tries, unreadable = 1, 0

    def _done(self, message: Received) -> None:
        """``message`` is handled (effect committed, skipped, or dead-lettered): its partition may commit past it."""
        self.offsets.done(message)
        self._dead_letters.settled(message)

    # -- one message on its own -----------------------------------------------------------------------------------

    def _handle(self, message: Received, *, attempts: int, unreadable_attempts: int) -> Failure | None:
        """One attempt at a message on its own; None once it is handled or dead-lettered (its offset to commit).

        A failure that is not dead-lettered is recorded as held (messaging.held_message); a park mark an operator
        put on the record (`pin dlq park`) sends it to the dead letters instead.
        """
        failure, message_id = self._attempt(message, attempts, unreadable_attempts)
        if failure is None:
            return None  # applied or skipped: already done (marked twice, a partition's position could go back)
        # its back-off, whether it is held now or after a dead letter the broker refused
        failure = replace(failure, retry_in=backoff_delay(attempts, base=self._backoff_base, cap=self._backoff_cap))
        if not failure.dead_letter:
            park = self._held.failed(
                message, message_id=message_id, fault=failure.fault, exc=failure.exc, attempts=attempts,
                retry_in=failure.retry_in,
            )  # fmt: skip
            if park is not None:
                failure = replace(failure, exc=ParkedByOperator(park), dead_letter=True)
        if failure.dead_letter and not self._dead_letters.send(message, failure.exc, attempts):
            failure = replace(failure, dead_letter=False)  # keep it in hand; try the DLQ again later
        if not failure.dead_letter:
            return failure
        if attempts > 1 or isinstance(failure.exc, ParkedByOperator):
            self._held.forget(message)  # dead-lettered: no longer held
        self._done(message)
        return None

    def _attempt(
        self, message: Received, attempts: int, unreadable_attempts: int
    ) -> tuple[Failure | None, object | None]:
        """Handle once, as a batch of one; None on success, else the failure and whether it goes to the DLQ now;
        with the MessageId once it is read. A held message's retry (``attempts`` > 1) releases its record in its
        transaction, and stops there when an operator parked it."""
        attempt_log = message_log(self._log, message)
        route = self._routes.get(message.topic)
        if route is None:
            attempt_log.warning("message of a topic this group does not handle skipped")
            self._done(message)
            return None, None
        message_id = None
        try:
            decoded = read(message, route, self._max_message_bytes)
            message_id = decoded.envelope.message_id
            attempt_log = with_envelope(attempt_log, decoded.envelope)
            applied, at = self._transact([decoded], release=message if attempts > 1 else None)
        except ParkRequested as parked:
            attempt_log.warning("held message parked by an operator", audit_id=parked.park.audit_id)
            return Failure(ParkedByOperator(parked.park), dead_letter=True), message_id
        except Exception as exc:  # noqa: BLE001 - every failure is classified, retried or dead-lettered
            return classify(
                exc, self.group, message.topic, attempts=attempts, unreadable_attempts=unreadable_attempts,
                max_unreadable_attempts=self._unreadable_attempts, log=attempt_log,
            ), message_id  # fmt: skip
        self._after_run([decoded], applied, at, attempts=attempts)
        return None, message_id

    def _hold(
        self, lane: Lane, message: Received, attempts: int, failure: Failure, *, later: list[Received]
    ) -> list[Received]:
        """Keep ``message`` for a retry with the later messages of its scope behind it; the others, to go on."""
        scope = self._scope(message)
        behind = [m for m in later if self._scope(m) == scope]
        others = [m for m in later if self._scope(m) != scope]
        delay = failure.retry_in
        key = message.partition_key
        lane.held[(key[0], key[1], scope)] = Held(
            message, attempts, time.monotonic() + delay, behind, failure.unreadable_attempts
        )
        if scope == WHOLE_PARTITION:
            if key not in self._paused:
                self._consumer_or_fail().pause([TopicPartition(key[0], key[1])])
                self._paused.add(key)
            self._log.info("partition paused for a retry", topic=key[0], partition=key[1], retry_in_s=round(delay, 3))
        else:
            self._log.info(
                "key held for a retry", topic=key[0], partition=key[1], offset=message.offset,
                retry_in_s=round(delay, 3), behind=len(behind),
            )  # fmt: skip
        return others

    # -- a batch of one partition ---------------------------------------------------------------------------------

    def _apply_batch(self, messages: list[Received]) -> tuple[list[Received], bool]:
        """Apply the longest readable prefix of fresh messages in one transaction.

        Returns what is left, and whether it must go one per transaction (the prefix's transaction failed: nothing
        of it was kept). Otherwise the first message left (if any) is one that cannot be read: it goes alone, and
        the messages after it are a new batch. Reading is caught per message: whatever one message's bytes are,
        they cannot fail the others.
        """
        route = self._routes.get(messages[0].topic)
        if route is None:
            return messages, True  # each is skipped, with its warning, on its own
        decoded: list[Decoded] = []
        for message in messages:
            try:
                decoded.append(read(message, route, self._max_message_bytes))
            except Exception:  # noqa: BLE001 - unreadable (or a parse bug): that message goes alone and is classified
                break
        if not decoded:
            return messages, False
        if not self._apply_run(decoded):
            return messages, True
        return messages[len(decoded) :], False

    def _apply_run(self, decoded: list[Decoded]) -> bool:
        """A fresh batch's readable messages in one transaction; False when anything fails: then nothing of them
        was kept."""
        try:
            applied, at = self._transact(decoded)
        except Exception as exc:  # noqa: BLE001 - the batch is handled again one message per transaction
            first = decoded[0].message
            self._log.info(
                "batch failed; handling its messages one by one",
                topic=first.topic,
                partition=first.partition,
                first_offset=first.offset,
                messages=len(decoded),
                error_type=type(exc).__name__,
            )
            return False
        self._after_run(decoded, applied, at)
        return True

    def _transact(
        self, decoded: list[Decoded], *, release: Received | None = None
    ) -> tuple[list[tuple[Decoded, HandlingContext]], datetime | None]:
        """Readable messages of one partition (a batch, or one on its own) in one transaction: the inbox rows, then
        each new one's effect, in order. The new ones with their contexts, and the transaction's database time.
        ``release``: a held message retried on its own, whose record goes with the effect (:class:`ParkRequested`
        when an operator parked it)."""
        first = decoded[0].message
        if self._canceller.stop.is_set():
            raise _Stopped(None)  # no transaction begins after a stop request
        # a span per message (all open around the batch's effect) only when spans leave the process (without a
        # processor the SDK records and drops them)
        spans = spans_exported()
        try:
            return self._transact_watched(decoded, first, spans=spans, release=release)
        except Exception as exc:
            if self._canceller.stop.is_set() and query_canceled(exc):
                raise _Stopped(
                    {"topic": first.topic, "partition": first.partition, "first_offset": first.offset,
                     "last_offset": decoded[-1].message.offset, "messages": len(decoded)}
                ) from exc  # fmt: skip
            raise

    def _transact_watched(
        self, decoded: list[Decoded], first: Received, *, spans: bool, release: Received | None
    ) -> tuple[list[tuple[Decoded, HandlingContext]], datetime | None]:
        """:meth:`_transact`'s transaction, watched: a stop request cancels its statement in flight (the watch ends
        before the transaction rolls back)."""
        with (
            self._pool.connection(timeout=self._db_timeout) as conn,
            conn.transaction(),
            self._canceller.watch(conn),
        ):
            if release is not None:
                self._held.release(conn, release)
            new, at = inbox_insert(
                conn, self.group, topic=first.topic, partition=first.partition,
                message_ids=[d.envelope.message_id for d in decoded], offsets=[d.message.offset for d in decoded],
                occurred_at=[d.envelope.occurred_at for d in decoded],
            )  # fmt: skip
            applied: list[tuple[Decoded, HandlingContext]] = []
            for item in decoded:
                message_id = item.envelope.message_id
                if message_id in new:
                    new.discard(message_id)  # a MessageId twice in one batch: the second is a duplicate
                    applied.append((item, HandlingContext(self.group, first.topic, message_id)))
            # the new messages' effect at once, its statements in one pipeline: one round trip for the batch
            with contextlib.ExitStack() as spans_open, conn.pipeline():
                if spans:
                    for item, _ in applied:
                        spans_open.enter_context(message_span(self.group, item.message, item.headers))
                if applied:
                    decoded[0].route.apply_many(conn, [(item.event, context) for item, context in applied])
            for _, context in applied:
                context.run_pending()
        return applied, at

    def _after_run(
        self,
        decoded: list[Decoded],
        applied: list[tuple[Decoded, HandlingContext]],
        at: datetime | None,
        *,
        attempts: int | None = None,
    ) -> None:
        """Metrics and logs of a committed run (``at``: its database time; ``attempts`` of a message handled on its
        own), the test hook, its offset to commit."""
        report_run(self.group, self._log, decoded, applied, at=at, debug=self._debug, attempts=attempts)
        if self._after_effect is not None:
            for item, _ in applied:
                self._after_effect(item.message)
        self.offsets.done_many(decoded[0].message.partition_key, [item.message.offset for item in decoded])
        self._dead_letters.settled(decoded[-1].message)

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
        self._dead_letters.forget(gone)
        self._held.forget_partitions(gone)
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
        self._next_prune = now + self._prune_interval
        prune_inbox(
            self._pool, self.group, self._inbox_retention, db_timeout=self._db_timeout, log=self._log,
            also=self._held.prune,
        )  # fmt: skip

    def _consumer_or_fail(self) -> Consumer:
        assert self._consumer is not None, "the runtime is not running"
        return self._consumer
