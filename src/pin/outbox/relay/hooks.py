"""Points in a batch's life where a test steps in (a failed send, a pause for kill -9); production's do nothing."""

from __future__ import annotations

import time

import structlog

from pin.outbox.relay.batch import PendingRow
from pin.outbox.relay.errors import SendError
from pin.settings import ConfigurationError

log = structlog.get_logger(__name__)

_PAUSE_POINTS = ("after-produce", "after-ack")


class RelayHooks:
    """The relay calls these at fixed points of a batch; tests pass a subclass to the relay's constructor."""

    def send_error(self, row: PendingRow) -> SendError | None:
        """An error to record for ``row`` instead of sending it; None sends it."""
        del row
        return None

    def after_produce(self, batch_number: int) -> None:
        """A wave of the batch was handed to the producer (not yet acknowledged, nothing deleted)."""

    def after_ack(self, batch_number: int) -> None:
        """Every row of the batch has its outcome from the broker; nothing is deleted or marked yet."""


class PauseAt(RelayHooks):
    """Freeze the publishing thread at one point of one batch (the heartbeat goes on), so that a test can
    kill -9 the process there."""

    def __init__(self, point: str, batch_number: int) -> None:
        self.point = point
        self.batch_number = batch_number

    def after_produce(self, batch_number: int) -> None:
        """Freeze here if asked to."""
        self._pause("after-produce", batch_number)

    def after_ack(self, batch_number: int) -> None:
        """Freeze here if asked to."""
        self._pause("after-ack", batch_number)

    def _pause(self, point: str, batch_number: int) -> None:
        if point != self.point or batch_number != self.batch_number:
            return
        log.warning("relay test fault: paused", point=point, batch=batch_number)
        while True:
            time.sleep(3600)


def hooks_for_fault(fault: str) -> RelayHooks:
    """The hooks of `pin relay`, chosen once at start-up from Settings' test-only ``relay_test_fault``: none, or
    the pause it asks for (``after-produce|after-ack[:N]``)."""
    if not fault:
        return RelayHooks()
    point, _, batch = fault.partition(":")
    if point not in _PAUSE_POINTS or not (batch or "1").isdigit():
        raise ConfigurationError(f"PIN_RELAY_TEST_FAULT: expected after-produce|after-ack[:N], got {fault!r}")
    return PauseAt(point, int(batch or "1"))
