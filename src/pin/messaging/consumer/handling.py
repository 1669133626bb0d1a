"""The handling side of a consumer instance (River's job executor): decode, transact, classify, hold, report.

Given the messages of one partition and lane, in offset order, it applies them (the inbox, batches with a fall-back
to one message per transaction, retries, dead letters) and yields its :mod:`decisions
<pin.messaging.consumer.decisions>` one by one, each carried out by the runtime's Kafka side (:mod:`runtime
<pin.messaging.consumer.runtime>`) before the next message is taken; it never touches the consumer. Why it is
shaped so is in docs/design/consumers.md.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from psycopg_pool import ConnectionPool

from pin.cancellation import Canceller, query_canceled
from pin.db import Conn
from pin.messaging.consumer.config import ConsumerConfig
from pin.messaging.consumer.dead_letters.send import DeadLetterSender
from pin.messaging.consumer.decisions import Decision, Handled, hold
from pin.messaging.consumer.held import HeldRecords, ParkedByOperator, ParkRequested
from pin.messaging.consumer.inbox import inbox_insert
from pin.messaging.consumer.received import Received
from pin.messaging.consumer.reporting import message_log, message_span, report_failure, report_run, with_envelope
from pin.messaging.consumer.retry import Failure, backoff_delay, failure_of
from pin.messaging.consumer.routes import HandlingContext, Route
from pin.messaging.envelope import Decoded, decode_message
from pin.observability.tracing import spans_exported


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


Applied = list[tuple[Decoded, HandlingContext]]


class MessageHandling:
    """One consumer instance's handling of messages: what it applies, holds and dead-letters, and its records."""

    def __init__(
        self,
        *,
        group: str,
        routes: Mapping[str, Route[Any]],
        pool: ConnectionPool[Conn],
        config: ConsumerConfig,
        member: str,
        log: Any,
        after_effect: AfterEffectHook | None = None,
    ) -> None:
        self.group = group
        self._routes = dict(routes)
        self._pool = pool
        self._config = config
        self._log = log
        self._after_effect = after_effect
        self._debug = False
        # the stop request cancels the transaction in flight (pin.cancellation); none begins after it
        self.canceller = Canceller()
        # the messages that will never be handled (the runtime gives it its producer while it runs)
        self.dead_letters = DeadLetterSender(
            group=group, pool=pool, log=log, max_message_bytes=config.max_message_bytes,
            dlq_timeout=config.dlq_timeout, attempts=config.dead_letter_attempts, db_timeout=config.db_timeout,
        )  # fmt: skip
        # the messages this instance holds in retry, in messaging.held_message (for operators; `pin dlq park`)
        self.held = HeldRecords(group=group, member=member, pool=pool, db_timeout=config.db_timeout, log=log)

    def start(self, stop: threading.Event, *, debug: bool) -> None:
        """Before the first message: the stop request that cancels a transaction in flight, and whether each
        message's handling is logged (read once)."""
        self.canceller.stop = stop
        self._debug = debug

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """This instance gave ``partitions`` up: their dead-letter failures and held records go."""
        self.dead_letters.forget(partitions)
        self.held.forget_partitions(partitions)

    def process(self, messages: list[Received], *, attempts: int, unreadable_attempts: int = 0) -> Iterator[Decision]:
        """Messages of one partition and one lane, in order (the first has failed ``attempts - 1`` times before, of
        which ``unreadable_attempts`` because it could not be read); each decision is yielded as it is made.

        Fresh messages go in batches: the readable ones before an unreadable one in one transaction, then the
        unreadable one alone (held for a retry, dead-lettered once its attempts are used up), then batch mode
        again. When a batch's transaction fails, its messages go one per transaction, as lone messages. A message
        that fails is held for a retry with the later messages of its scope (its key, or with one lane every key)
        behind it; the others go on. A loop, not recursion: a batch of any size with any number of unreadable
        messages in it takes constant stack. A stop request ends it (what is not applied is read again).
        """
        try:
            yield from self._in_order(messages, attempts, unreadable_attempts)
        except _Stopped as stopped:
            if stopped.cancelled is not None:
                self._log.warning(
                    "consumer stopping: the transaction in flight was cancelled and rolled back; what was applied"
                    " before it is committed, the rest is read again from the committed offset",
                    **stopped.cancelled,
                )  # fmt: skip

    def _in_order(self, messages: list[Received], attempts: int, unreadable_attempts: int) -> Iterator[Decision]:
        """:meth:`process`'s loop (a stop request ends it with :class:`_Stopped`)."""
        queue, tries, unreadable, index, batches = messages, attempts, unreadable_attempts, 0, True
        while index < len(queue):
            if batches and tries == 1 and len(queue) - index > 1:
                handled, rest, isolated = self._apply_batch(queue[index:])
                if handled is not None:
                    yield handled
                queue, index = rest, 0
                batches = not isolated  # a failed batch's messages go one per transaction
                if not queue:
                    return
            message = queue[index]
            outcome = self._handle(message, attempts=tries, unreadable_attempts=unreadable)
            if isinstance(outcome, Failure):
                held, queue = hold(
                    message, tries, outcome, queue[index + 1 :], threaded=self._config.threaded, now=time.monotonic()
                )
                yield from held
                index = 0
            else:
                yield outcome
                index += 1
            tries, unreadable = 1, 0

    def _done(self, message: Received) -> Handled:
        """``message`` is handled (skipped, or dead-lettered): its partition may commit past it."""
        self.dead_letters.settled(message)
        return Handled(message.partition_key, (message.offset,))

    # -- one message on its own -----------------------------------------------------------------------------------

    def _handle(self, message: Received, *, attempts: int, unreadable_attempts: int) -> Handled | Failure:
        """One attempt at a message on its own: handled (applied, skipped or dead-lettered), or its failure to hold.

        A failure that is not dead-lettered is recorded as held (messaging.held_message); a park mark an operator
        put on the record (`pin dlq park`) sends it to the dead letters instead.
        """
        outcome, message_id = self._attempt(message, attempts, unreadable_attempts)
        if isinstance(outcome, Handled):
            return outcome
        # its back-off, whether it is held now or after a dead letter the broker refused
        config = self._config
        failure = replace(outcome, retry_in=backoff_delay(attempts, base=config.backoff_base, cap=config.backoff_cap))
        if not failure.dead_letter:
            park = self.held.failed(
                message, message_id=message_id, fault=failure.fault, exc=failure.exc, attempts=attempts,
                retry_in=failure.retry_in,
            )  # fmt: skip
            if park is not None:
                failure = replace(failure, exc=ParkedByOperator(park), dead_letter=True)
        if failure.dead_letter and not self.dead_letters.send(message, failure.exc, attempts):
            failure = replace(failure, dead_letter=False)  # keep it in hand; try the DLQ again later
        if not failure.dead_letter:
            return failure
        if attempts > 1 or isinstance(failure.exc, ParkedByOperator):
            self.held.forget(message)  # dead-lettered: no longer held
        return self._done(message)

    def _attempt(
        self, message: Received, attempts: int, unreadable_attempts: int
    ) -> tuple[Handled | Failure, object | None]:
        """Handle once, as a batch of one: handled, or the failure and whether it goes to the DLQ now; with the
        MessageId once it is read. A held message's retry (``attempts`` > 1) releases its record in its
        transaction, and stops there when an operator parked it."""
        attempt_log = message_log(self._log, message)
        route = self._routes.get(message.topic)
        if route is None:
            attempt_log.warning("message of a topic this group does not handle skipped")
            return self._done(message), None
        message_id = None
        try:
            decoded = decode_message(message, route, self._config.max_message_bytes)
            message_id = decoded.envelope.message_id
            attempt_log = with_envelope(attempt_log, decoded.envelope)
            applied, at = self._transact([decoded], release=message if attempts > 1 else None)
        except ParkRequested as parked:
            attempt_log.warning("held message parked by an operator", audit_id=parked.park.audit_id)
            return Failure(ParkedByOperator(parked.park), dead_letter=True), message_id
        except Exception as exc:  # noqa: BLE001 - every failure is classified, retried or dead-lettered
            failure = failure_of(
                exc, unreadable_attempts=unreadable_attempts, max_unreadable_attempts=self._config.unreadable_attempts
            )
            report_failure(self.group, attempt_log, message, failure, attempts=attempts)
            return failure, message_id
        return self._after_run([decoded], applied, at, attempts=attempts), message_id

    # -- a batch of one partition ---------------------------------------------------------------------------------

    def _apply_batch(self, messages: list[Received]) -> tuple[Handled | None, list[Received], bool]:
        """Apply the longest readable prefix of fresh messages in one transaction.

        Returns what it handled, what is left, and whether that must go one per transaction (the prefix's
        transaction failed: nothing of it was kept). Otherwise the first message left (if any) is one that cannot
        be read: it goes alone, and the messages after it are a new batch. Reading is caught per message: whatever
        one message's bytes are, they cannot fail the others.
        """
        route = self._routes.get(messages[0].topic)
        if route is None:
            return None, messages, True  # each is skipped, with its warning, on its own
        decoded: list[Decoded] = []
        for message in messages:
            try:
                decoded.append(decode_message(message, route, self._config.max_message_bytes))
            except Exception:  # noqa: BLE001 - unreadable (or a parse bug): that message goes alone and is classified
                break
        if not decoded:
            return None, messages, False
        handled = self._apply_run(decoded)
        if handled is None:
            return None, messages, True
        return handled, messages[len(decoded) :], False

    def _apply_run(self, decoded: list[Decoded]) -> Handled | None:
        """A fresh batch's readable messages in one transaction; None when anything fails: then nothing of them
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
            return None
        return self._after_run(decoded, applied, at)

    def _transact(self, decoded: list[Decoded], *, release: Received | None = None) -> tuple[Applied, datetime | None]:
        """Readable messages of one partition (a batch, or one on its own) in one transaction: the inbox rows, then
        each new one's effect, in order. The new ones with their contexts, and the transaction's database time.
        ``release``: a held message retried on its own, whose record goes with the effect (:class:`ParkRequested`
        when an operator parked it)."""
        first = decoded[0].message
        if self.canceller.stop.is_set():
            raise _Stopped(None)  # no transaction begins after a stop request
        # a span per message (all open around the batch's effect) only when spans leave the process (without a
        # processor the SDK records and drops them)
        spans = spans_exported()
        try:
            return self._transact_watched(decoded, first, spans=spans, release=release)
        except Exception as exc:
            if self.canceller.stop.is_set() and query_canceled(exc):
                raise _Stopped(
                    {"topic": first.topic, "partition": first.partition, "first_offset": first.offset,
                     "last_offset": decoded[-1].message.offset, "messages": len(decoded)}
                ) from exc  # fmt: skip
            raise

    def _transact_watched(
        self, decoded: list[Decoded], first: Received, *, spans: bool, release: Received | None
    ) -> tuple[Applied, datetime | None]:
        """:meth:`_transact`'s transaction, watched: a stop request cancels its statement in flight (the watch ends
        before the transaction rolls back)."""
        with (
            self._pool.connection(timeout=self._config.db_timeout) as conn,
            conn.transaction(),
            self.canceller.watch(conn),
        ):
            if release is not None:
                self.held.release(conn, release)
            new, at = inbox_insert(
                conn, self.group, topic=first.topic, partition=first.partition,
                message_ids=[d.envelope.message_id for d in decoded], offsets=[d.message.offset for d in decoded],
                occurred_at=[d.envelope.occurred_at for d in decoded],
            )  # fmt: skip
            applied: Applied = []
            for item in decoded:
                message_id = item.envelope.message_id
                if new is None:  # every one new (the usual case)
                    applied.append((item, HandlingContext(self.group, first.topic, message_id)))
                elif message_id in new:
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
        self, decoded: list[Decoded], applied: Applied, at: datetime | None, *, attempts: int | None = None
    ) -> Handled:
        """Metrics and logs of a committed run (``at``: its database time; ``attempts`` of a message handled on its
        own), the test hook; its offsets to commit."""
        report_run(self.group, self._log, decoded, applied, at=at, debug=self._debug, attempts=attempts)
        if self._after_effect is not None:
            for item, _ in applied:
                self._after_effect(item.message)
        self.dead_letters.settled(decoded[-1].message)
        return Handled(decoded[0].message.partition_key, tuple(item.message.offset for item in decoded))
