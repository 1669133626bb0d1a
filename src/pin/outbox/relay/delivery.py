"""Whether a relay still delivers: since when it has had rows out and none acknowledged (docs/design/relay.md,
"A relay that cannot deliver")."""

from __future__ import annotations

import time
from collections.abc import Callable

from pin.outbox.relay.batch import RelayCounts


class DeliveryWatch:
    """Since when this relay has had batches out without one acknowledgement; None while it delivers."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: float | None = None

    def observe(self, cycle: RelayCounts, *, in_flight: bool) -> None:
        """A step of the pipeline: an acknowledged row clears the stall; rows out or failed start it."""
        if cycle.published:
            self._since = None
        elif (in_flight or cycle.failed) and self._since is None:
            self._since = self._clock()

    def stalled_for(self) -> float:
        """Seconds since the first unacknowledged batch (0 while delivering or with nothing to deliver)."""
        return 0.0 if self._since is None else self._clock() - self._since

    def reset(self) -> None:
        """The broker answers again: start afresh."""
        self._since = None
