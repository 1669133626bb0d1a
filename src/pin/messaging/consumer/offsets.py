"""Offsets to commit: a partition's committed offset is the lowest offset dealt and not yet handled (with lanes,
messages of one partition finish out of order); committed asynchronously once per poll, synchronously on revoke and
on stop."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pin.messaging.consumer.received import Received


class Offsets:
    """Per partition: the offsets dealt and not yet committed past, in order; ``to_commit`` the next offset to commit
    not yet sent, ``unconfirmed`` sent asynchronously only. Lanes report from their own threads."""

    def __init__(self, log: Any) -> None:
        self.to_commit: dict[tuple[str, int], int] = {}
        self.unconfirmed: dict[tuple[str, int], int] = {}
        # offsets dealt, oldest first, until the partition's position passes them; and those handled out of order
        self._dealt: dict[tuple[str, int], deque[int]] = {}
        self._handled: dict[tuple[str, int], set[int]] = {}
        self._lock = threading.Lock()
        self._log = log

    def dealt(self, partition: tuple[str, int], offsets: Iterable[int]) -> None:
        """Messages of ``partition`` (in offset order) are taken on: its position cannot pass them until handled."""
        with self._lock:
            self._dealt.setdefault(partition, deque()).extend(offsets)

    def ahead(self, partition: tuple[str, int]) -> int:
        """How many messages of ``partition`` are dealt and not yet committed past (in flight, held, or handled
        behind one that is)."""
        return len(self._dealt.get(partition, ()))

    def done(self, message: Received) -> None:
        """``message`` is handled: its partition may commit past it once every message before it is."""
        self.done_many(message.partition_key, (message.offset,))

    def done_many(self, partition: tuple[str, int], offsets: Iterable[int]) -> None:
        """Messages of ``partition`` are handled: the position moves to the lowest offset dealt and not handled."""
        with self._lock:
            dealt = self._dealt.get(partition)
            if not dealt:
                # not dealt through this tracker (a test driving the runtime directly): the last one handled
                last = max(offsets, default=None)
                if last is not None:
                    self.to_commit[partition] = last + 1
                return
            handled = self._handled.setdefault(partition, set())
            handled.update(offsets)
            passed = None
            while dealt and dealt[0] in handled:
                passed = dealt.popleft()
                handled.discard(passed)
            if passed is not None:
                self.to_commit[partition] = dealt[0] if dealt else passed + 1

    def commit_async(self, consumer: Consumer) -> None:
        """Send the offsets handled since the last poll, without waiting (a lost commit only means a redelivery)."""
        with self._lock:
            if not self.to_commit:
                return
            offsets = [
                TopicPartition(topic, partition, offset) for (topic, partition), offset in self.to_commit.items()
            ]
            self.unconfirmed.update(self.to_commit)
            self.to_commit.clear()
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self._log.warning("offset commit failed", error=str(exc))

    def commit_sync(self, consumer: Consumer | None, partitions: set[tuple[str, int]] | None) -> None:
        """Commit, and wait for, the handled offsets of ``partitions`` (all when None): on revoke and on stop."""
        with self._lock:
            pending = {**self.unconfirmed, **self.to_commit}
            keys = set(pending) if partitions is None else set(pending) & partitions
            for key in keys:
                self.unconfirmed.pop(key, None)
                self.to_commit.pop(key, None)
        if not keys:
            return
        assert consumer is not None, "the runtime is not running"
        offsets = [TopicPartition(key[0], key[1], pending[key]) for key in sorted(keys)]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # The inbox makes the redelivery that follows harmless.
            self._log.warning("offset commit failed", error=str(exc), partitions=len(offsets))

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """Forget what was dealt of partitions this instance no longer owns (their next owner reads from the
        committed offset)."""
        with self._lock:
            for key in partitions:
                self._dealt.pop(key, None)
                self._handled.pop(key, None)

    def drop(self, partitions: set[tuple[str, int]]) -> None:
        """Forget lost partitions: they are already someone else's, their offsets no longer this instance's."""
        with self._lock:
            for key in partitions:
                self.to_commit.pop(key, None)
                self.unconfirmed.pop(key, None)
        self.forget(partitions)

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's report of an offset commit (asynchronous ones included); only failures are logged."""
        if error is not None and error.code() != KafkaError._NO_OFFSET:
            self._log.warning("offset commit failed", error=str(error), partitions=len(partitions))
