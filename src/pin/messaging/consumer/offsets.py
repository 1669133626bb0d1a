"""Offsets to commit: after the effect, asynchronously once per poll, synchronously on revoke and on stop."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pin.messaging.consumer.received import Received


class Offsets:
    """The next offset to commit per partition: ``to_commit`` not yet sent, ``unconfirmed`` sent asynchronously only."""

    def __init__(self, log: Any) -> None:
        self.to_commit: dict[tuple[str, int], int] = {}
        self.unconfirmed: dict[tuple[str, int], int] = {}
        self._log = log

    def done(self, message: Received) -> None:
        """``message`` is handled: its partition may commit past it."""
        self.to_commit[message.partition_key] = message.offset + 1

    def commit_async(self, consumer: Consumer) -> None:
        """Send the offsets handled since the last poll, without waiting (a lost commit only means a redelivery)."""
        if not self.to_commit:
            return
        offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in self.to_commit.items()]
        self.unconfirmed.update(self.to_commit)
        self.to_commit.clear()
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self._log.warning("offset commit failed", error=str(exc))

    def commit_sync(self, consumer: Consumer | None, partitions: set[tuple[str, int]] | None) -> None:
        """Commit, and wait for, the handled offsets of ``partitions`` (all when None): on revoke and on stop."""
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

    def drop(self, partitions: set[tuple[str, int]]) -> None:
        """Forget lost partitions: they are already someone else's, their offsets no longer this instance's."""
        for key in partitions:
            self.to_commit.pop(key, None)
            self.unconfirmed.pop(key, None)

    def on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's report of an offset commit (asynchronous ones included); only failures are logged."""
        if error is not None and error.code() != KafkaError._NO_OFFSET:
            self._log.warning("offset commit failed", error=str(error), partitions=len(partitions))
