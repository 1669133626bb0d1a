"""Fixtures of the operations tests: logging configured for one test, then put back as it was."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog

from pin.observability.logging import configure_logging


@contextlib.contextmanager
def logging_into_buffer(
    monkeypatch: pytest.MonkeyPatch, configure: Callable[[], None], *, streams: tuple[str, ...] = ("sys.stderr",)
) -> Iterator[io.StringIO]:
    """Run ``configure`` with ``streams`` captured in a buffer; the logging configuration, structlog's and the
    root logger's, is put back as it was afterwards."""
    saved_config = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    buffer = io.StringIO()
    for stream in streams:
        monkeypatch.setattr(stream, buffer)
    try:
        configure()
        yield buffer
    finally:
        structlog.configure(**saved_config)
        structlog.contextvars.clear_contextvars()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


@pytest.fixture
def json_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Configure JSON logging into a buffer; the fixture returns a function that parses the lines so far."""
    with logging_into_buffer(monkeypatch, lambda: configure_logging("DEBUG", "json", role="ops-test")) as buffer:

        def lines() -> list[dict[str, Any]]:
            raw = [line for line in buffer.getvalue().splitlines() if line.strip()]
            return [json.loads(line) for line in raw]  # every line must be one JSON object

        lines.raw = buffer  # type: ignore[attr-defined]
        yield lines
