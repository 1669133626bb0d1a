"""Failed accepts are counted each and logged once per interval with their count; other loop errors are not touched."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from pin.api.server import ACCEPT_ERROR_MESSAGE, ACCEPT_ERRORS, AcceptErrorLog

pytestmark = pytest.mark.unit


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Loop:
    """The one method of an event loop the handler calls for errors it does not own."""

    def __init__(self) -> None:
        self.handed_on: list[dict[str, Any]] = []

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.handed_on.append(context)


def test_a_flood_of_failed_accepts_is_one_line_per_interval_with_the_count() -> None:
    clock, loop = Clock(), Loop()
    handler = AcceptErrorLog(10.0, clock)
    failed = {"message": ACCEPT_ERROR_MESSAGE, "exception": OSError(24, "Too many open files")}
    before = ACCEPT_ERRORS._value.get()
    with structlog.testing.capture_logs() as lines:
        for _ in range(5_000):  # what asyncio reports in well under a second
            handler(loop, failed)  # type: ignore[arg-type]
        clock.now += 10.0
        for _ in range(3):
            handler(loop, failed)  # type: ignore[arg-type]
    # the first at once; then the 4,999 held back and the one that logs
    assert [line["count"] for line in lines] == [1, 5_000]
    assert ACCEPT_ERRORS._value.get() - before == 5_003
    assert lines[0]["error"] == "OSError"
    assert loop.handed_on == []


def test_other_loop_errors_go_to_the_default_handler() -> None:
    loop = Loop()
    other = {"message": "Task exception was never retrieved"}
    AcceptErrorLog(10.0, Clock())(loop, other)  # type: ignore[arg-type]
    assert loop.handed_on == [other]
