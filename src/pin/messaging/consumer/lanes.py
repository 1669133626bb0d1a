"""Lanes: within a partition, messages are dealt by key to ``PIN_CONSUMER_LANES`` lanes, which apply their batches
concurrently (docs/design/consumers.md, "Lanes"). One key's messages stay in one lane, in offset order.

With one lane (the default) the lane is the partition: the runtime's loop handles it itself, and a message in retry
holds every later message of its partition (which is paused). With several, each lane is a thread of its own, and a
message in retry holds only the later messages of its own key.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field

from pin.messaging.consumer.dead_letters.index import key_text
from pin.messaging.consumer.decisions import WHOLE_PARTITION, Held, HoldKey
from pin.messaging.consumer.received import Received

# The held scopes an instance's row of messaging.consumer_member names (the rest are counted): a bounded row.
HELD_SHOWN = 20


def lane_of(key: bytes | None, lanes: int) -> int:
    """The lane of a message key: the same for every message of the key (crc32, stable across processes)."""
    return zlib.crc32(key or b"") % lanes if lanes > 1 else 0


@dataclass
class Lane:
    """One lane's work: the fresh messages dealt to it, per partition in offset order, and its held messages."""

    index: int
    held: dict[HoldKey, Held] = field(default_factory=dict)
    fresh: dict[tuple[str, int], list[Received]] = field(default_factory=dict)
    # taken while the lane handles messages (a revoke waits for it to finish what it is doing)
    busy: threading.Lock = field(default_factory=threading.Lock)
    # guards ``fresh`` and wakes the lane's thread
    arrived: threading.Condition = field(default_factory=threading.Condition)
    stopping: bool = False

    def deal(self, partition: tuple[str, int], messages: list[Received]) -> None:
        """Messages of one partition for this lane, in offset order (called by the loop)."""
        with self.arrived:
            self.fresh.setdefault(partition, []).extend(messages)
            self.arrived.notify()

    def take(self) -> dict[tuple[str, int], list[Received]]:
        """The fresh messages dealt since the last take."""
        with self.arrived:
            fresh, self.fresh = self.fresh, {}
            return fresh

    def next_retry(self) -> float | None:
        """When the first held message is due (monotonic), None when none is held."""
        # a copy at once: a revoke may drop held messages meanwhile (from the loop's thread)
        return min((held.retry_at for held in list(self.held.values())), default=None)

    def wait(self, longest: float) -> None:
        """Wait for fresh messages, the next retry, a stop, or ``longest`` seconds."""
        with self.arrived:
            if self.fresh or self.stopping:
                return
            due = self.next_retry()
            timeout = longest if due is None else max(0.0, min(longest, due - time.monotonic()))
            self.arrived.wait(timeout)

    def stop(self) -> None:
        """Ask the lane's thread to stop after what it is doing."""
        with self.arrived:
            self.stopping = True
            self.arrived.notify()

    def forget(self, partitions: set[tuple[str, int]]) -> None:
        """Drop the fresh and held messages of partitions this instance no longer owns (call with ``busy`` held)."""
        with self.arrived:
            for partition in partitions:
                self.fresh.pop(partition, None)
        for key in [k for k in self.held if (k[0], k[1]) in partitions]:
            del self.held[key]


def held_in_lanes(lanes: list[Lane]) -> tuple[list[dict[str, object]], int]:
    """What the lanes hold in retry, as an instance's membership row records it: each held scope's lane, topic,
    partition and offset, whether it holds the whole partition (one lane) or its key's messages (the key as bounded
    text; None: a message without a key), and how many messages wait behind it, at most
    :data:`HELD_SHOWN` of them (the oldest offsets first); and how many scopes are held in all."""
    held: list[dict[str, object]] = []
    for lane in lanes:
        # a copy at once: a lane's thread may hold or release messages meanwhile (read from the loop's thread)
        for (topic, partition, scope), kept in list(lane.held.items()):
            whole = scope == WHOLE_PARTITION
            key = None if whole else key_text(scope if isinstance(scope, bytes) else None)
            held.append({"lane": lane.index, "topic": topic, "partition": partition, "offset": kept.message.offset,
                         "whole": whole, "key": key, "behind": len(kept.behind)})  # fmt: skip
    held.sort(key=lambda h: (str(h["topic"]), int(str(h["partition"])), int(str(h["offset"]))))
    return held[:HELD_SHOWN], len(held)
