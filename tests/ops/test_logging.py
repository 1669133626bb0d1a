"""Log lines: one JSON object each, and nothing secret or free-text in them whatever a caller passes."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import sys
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import structlog
from structlog.testing import capture_logs

from pin.api.auth import mint_token
from pin.observability.logging import (
    EXCEPTION_TEXT_LIMIT,
    REDACTED,
    configure_logging,
    configure_unstarted,
    exception_text,
    log_each,
    scrub_text,
)
from tests.ops.conftest import logging_into_buffer

# Distinctive strings: if any of them reaches a log line, the test names it.
CANCEL_REASON = "Клиент передумал, позвоните Ивану +7 999 123-45-67 zebra-17"
REASON_START = CANCEL_REASON[:16]  # PostgreSQL shortens long values in error details
PASSWORD = "hunter2-very-secret-pw"
SECRET = "s3cr3t-value-of-a-client"

pytestmark = pytest.mark.unit


def _token() -> str:
    import uuid

    return mint_token("x" * 32, user_id=uuid.uuid4(), tenant_id=uuid.uuid4(), roles=["agent"], ttl_seconds=60)


def test_each_event_is_one_json_line_with_level_time_role_and_logger(
    json_log: Callable[[], list[dict[str, Any]]],
) -> None:
    log = structlog.get_logger("pin.test")
    log.info("cycle started", run_id="r-1", as_of="2026-11-29T10:00:00Z")
    logging.getLogger("some.library").warning("library says %s", "hello")

    first, second = json_log()
    assert first["event"] == "cycle started"
    assert first["run_id"] == "r-1"
    assert first["level"] == "info"
    assert first["role"] == "ops-test"
    assert first["logger"] == "pin.test"
    assert first["timestamp"].endswith("Z")
    assert second["event"] == "library says hello"
    assert second["level"] == "warning"


def test_credentials_and_free_text_are_masked_by_key_and_by_shape(
    json_log: Callable[[], list[dict[str, Any]]],
) -> None:
    token = _token()
    log = structlog.get_logger("pin.test")
    log.info(
        "request",
        authorization=f"Bearer {token}",
        password=PASSWORD,
        client_secret=SECRET,
        access_token=token,
        cancel_reason=CANCEL_REASON,
        headers={"Authorization": f"Bearer {token}", "X-Request-Id": "req-1"},
        reason="Expired",  # the Reason enum is a closed set: it stays
        appointment_id="a-1",
    )
    log.info(f"the caller sent {token} in free text")  # a JWT by its shape anywhere
    log.info("connecting", url=f"postgresql://pin:{PASSWORD}@db:5432/pin")
    logging.getLogger("uvicorn.error").error("header was Authorization: Bearer %s", token)

    raw = json_log.raw.getvalue()  # type: ignore[attr-defined]
    for leaked in (token, PASSWORD, SECRET, CANCEL_REASON, "zebra-17"):
        assert leaked not in raw, f"{leaked!r} reached a log line"
    event, free, url, foreign = json_log()
    assert event["authorization"] == REDACTED
    assert event["cancel_reason"] == REDACTED
    assert event["headers"] == {"Authorization": REDACTED, "X-Request-Id": "req-1"}
    assert event["reason"] == "Expired"
    assert event["appointment_id"] == "a-1"
    assert REDACTED in free["event"]
    assert url["url"] == f"postgresql://pin:{REDACTED}@db:5432/pin"
    assert "Bearer [redacted]" in foreign["event"]


@pytest.mark.integration
def test_a_database_error_about_a_row_does_not_leak_the_rows_text(
    json_log: Callable[[], list[dict[str, Any]]], database_url: str
) -> None:
    """PostgreSQL echoes the failing row (free text included) in its error; the exception line must not."""
    short_text = "zebra-17 Ivan +7 999"  # short enough to be stored, then inserted twice
    with psycopg.connect(database_url) as conn:
        conn.execute("CREATE TEMP TABLE note (id int, reason text NOT NULL UNIQUE CHECK (length(reason) < 30))")
        conn.execute("INSERT INTO note VALUES (1, %s)", (short_text,))
        for value in (CANCEL_REASON, short_text):  # a check violation, then a unique violation
            with pytest.raises(psycopg.Error) as caught, conn.transaction():
                conn.execute("INSERT INTO note VALUES (2, %s)", (value,))
            # the hazard is real: PostgreSQL puts (the start of) the text into its message
            assert value[:16] in str(caught.value)
            try:
                raise caught.value
            except psycopg.Error:
                structlog.get_logger("pin.test").exception("item failed", appointment_id="a-1")

    raw = json_log.raw.getvalue()  # type: ignore[attr-defined]
    assert REASON_START not in raw
    assert short_text not in raw
    check, unique = json_log()
    assert "CheckViolation" in check["exception"]
    assert f"Failing row contains ({REDACTED})" in check["exception"]
    assert f"Key (reason)=({REDACTED}) already exists" in unique["exception"]


def test_scrub_text_keeps_ordinary_text() -> None:
    text = "cycle completed: expired=3 released=2 DurationMs=41"
    assert scrub_text(text) == text


def test_the_console_view_redacts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the renderer is the console one; the same processor runs before it."""
    import io

    from pin.observability.logging import configure_logging

    saved_config = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    buffer = io.StringIO()
    monkeypatch.setattr("sys.stderr", buffer)
    try:
        configure_logging("INFO", "console", role="ops-test")
        try:
            raise RuntimeError(f"token {_token()} refused")
        except RuntimeError:
            structlog.get_logger("pin.test").exception("boom", password=PASSWORD, cancel_reason=CANCEL_REASON)
    finally:
        structlog.configure(**saved_config)
        structlog.contextvars.clear_contextvars()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    text = buffer.getvalue()
    assert "boom" in text
    assert "RuntimeError" in text  # the traceback is still shown
    for leaked in (PASSWORD, CANCEL_REASON, "eyJ"):
        assert leaked not in text
    assert not text.lstrip().startswith("{")  # not JSON: the console view


def test_a_repeated_library_line_goes_through_once_per_interval_with_the_count_held_back(
    json_log: Callable[[], list[dict[str, Any]]],
) -> None:
    from pin.observability.logging import RepeatFilter

    now = [100.0]
    logger = logging.getLogger("pin.test.repeats")
    logger.addFilter(RepeatFilter(interval=30.0, clock=lambda: now[0]))
    try:
        for attempt in range(50):  # the same failure, numbers aside, 50 times within a second
            logger.error("FAIL broker 127.0.0.1:%d: connection refused (after %dms)", 9092, attempt)
            now[0] += 0.02
        logger.error("another failure")
        now[0] += 30.0
        logger.error("FAIL broker 127.0.0.1:%d: connection refused (after %dms)", 9092, 7)
    finally:
        logger.filters.clear()

    lines = json_log()
    assert [line["event"] for line in lines] == [
        "FAIL broker 127.0.0.1:9092: connection refused (after 0ms)",
        "another failure",
        "FAIL broker 127.0.0.1:9092: connection refused (after 7ms)",
    ]
    assert "repeated" not in lines[0]
    assert lines[2]["repeated"] == 49


@pytest.mark.parametrize(
    "suspect",
    [
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
        "BASIC\tdXNlcjpwYXNzd29yZA==",
        "postgresql://pin:hunter2@db/pin",
        "new row violates check: Failing row contains (1, zebra-17)",
        "Key (reason)=(zebra-17) already exists",
    ],
)
def test_one_suspect_field_among_plain_ones_is_masked_and_the_plain_ones_are_written_as_they_are(
    json_log: Callable[[], list[dict[str, Any]]], suspect: str
) -> None:
    """A line is cleared in one pass when no field needs a look; a line with one suspect field still has it masked."""
    log = structlog.get_logger("pin.test")
    plain = {"PurchaseId": "4e958111-a3ca-66a5-b1ff-d9a9c6cba421", "PackageKind": "Boost", "Count": 3}
    log.info("promotion expired", **plain, detail=suspect)

    (line,) = json_log.raw.getvalue().splitlines()  # type: ignore[attr-defined]
    (event,) = json_log()
    assert event["detail"] != suspect
    assert REDACTED in event["detail"]
    assert {key: event[key] for key in plain} == plain
    # the standard library's JSON text (", " and ": " separators, non-ASCII escaped), whatever encodes it
    assert line == json.dumps(event)


# -- an exception's log: a plain traceback, no frame's local variables, bounded -----------------------------------


def _fail_holding_a_row() -> None:
    # built at run time, so that no source line of the traceback spells it: only a rendering of locals could
    row = {"email": "-".join(["local", "value", "of", "a", "frame"]) + "@example.com"}
    raise RuntimeError(f"statement failed for {len(row)} row")


MARKER = "local-value-of-a-frame@example.com"


def _logging_into(view: str, monkeypatch: pytest.MonkeyPatch) -> contextlib.AbstractContextManager[io.StringIO]:
    """Logging as a role configures it (``json``, ``console``) or as a process that starts none (``unstarted``),
    into a buffer (stderr, and stdout where structlog's own view prints); put back as it was afterwards."""

    def configure() -> None:
        if view == "unstarted":
            configure_unstarted()
        else:
            configure_logging("INFO", view, role="ops-test")

    return logging_into_buffer(monkeypatch, configure, streams=("sys.stderr", "sys.stdout"))


# (a process that starts no role leaves the standard library's records to the standard library's own handler)
@pytest.mark.parametrize(
    ("view", "source"),
    [("json", "structlog"), ("json", "library"), ("console", "structlog"), ("console", "library"),
     ("unstarted", "structlog")],
)  # fmt: skip
def test_a_logged_exception_carries_its_traceback_and_no_local_variable(
    view: str, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _logging_into(view, monkeypatch) as buffer:
        try:
            _fail_holding_a_row()
        except RuntimeError:
            if source == "structlog":
                structlog.get_logger("pin.test").error("cycle failed", job="test", exc_info=True)
            else:
                logging.getLogger("some.library").exception("cycle failed")
    text = buffer.getvalue()
    assert "cycle failed" in text
    assert "RuntimeError: statement failed for 1 row" in text  # the traceback is there
    assert "_fail_holding_a_row" in text  # with its frames
    assert MARKER not in text  # and none of their locals


def test_the_marker_is_what_a_rendering_of_locals_would_show() -> None:
    """The test above could fail: structlog's default console traceback (rich, show_locals) writes the marker."""
    sio = io.StringIO()
    try:
        _fail_holding_a_row()
    except RuntimeError:
        structlog.dev.RichTracebackFormatter(show_locals=True, color_system="truecolor", width=200)(sio, sys.exc_info())
    assert MARKER in sio.getvalue()


def test_an_exception_text_is_bounded_head_and_tail_kept() -> None:
    try:
        raise ValueError("x" * (3 * EXCEPTION_TEXT_LIMIT) + " the end")
    except ValueError:
        text = exception_text(sys.exc_info())  # type: ignore[arg-type]
    assert len(text) < EXCEPTION_TEXT_LIMIT + 100
    assert text.startswith("Traceback (most recent call last):")
    assert text.endswith(" the end")
    assert "characters of the traceback cut" in text


# -- a job's line per item: log_each writes the bytes info writes --------------------------------------------------

_ITEMS = [
    {"PurchaseId": "4e958111-a3ca-66a5-b1ff-d9a9c6cba421", "TenantId": "t-1", "PackageKind": "Boost"},
    {"PurchaseId": "5f958111-a3ca-66a5-b1ff-d9a9c6cba421", "TenantId": "t-2", "PackageKind": 'Топ "двойной"'},
    {"PurchaseId": "6a958111-a3ca-66a5-b1ff-d9a9c6cba421", "TenantId": "t-3", "PackageKind": f"Bearer {SECRET}"},
    {"PurchaseId": "7b958111-a3ca-66a5-b1ff-d9a9c6cba421", "TenantId": "t-4", "password": PASSWORD, "Count": 3},
]
# a line's time, as structlog's TimeStamper(fmt="iso", utc=True) writes it: masked, once it matched
_TIMESTAMP = re.compile(r'"timestamp": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z"')


def _masked(text: str) -> str:
    masked, count = _TIMESTAMP.subn('"timestamp": "T"', text)
    assert count == len(text.splitlines())
    return masked


def _lines_both_ways(buffer: io.StringIO, bind: dict[str, Any]) -> tuple[str, str]:
    log = structlog.get_logger("pin.jobs.cycle").bind(**bind)
    for fields in _ITEMS:
        log.info("promotion expired", **fields)
    one_by_one = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    log_each(log, "promotion expired", _ITEMS)
    return _masked(one_by_one), _masked(buffer.getvalue())


def test_log_each_writes_each_line_as_info_writes_it(json_log: Callable[[], list[dict[str, Any]]]) -> None:
    """Written together, the lines are the bytes info writes: fields in order, redaction, escapes, role."""
    one_by_one, together = _lines_both_ways(json_log.raw, {"job": "expire-promotions", "RunId": "r-1"})  # type: ignore[attr-defined]

    assert together == one_by_one
    lines = [json.loads(line) for line in together.splitlines()]
    assert [line["PurchaseId"] for line in lines] == [item["PurchaseId"] for item in _ITEMS]
    assert list(lines[0]) == [
        "job", "RunId", "PurchaseId", "TenantId", "PackageKind", "event", "level", "logger", "timestamp", "role",
    ]  # fmt: skip
    assert SECRET not in together
    assert PASSWORD not in together
    assert lines[2]["PackageKind"] == f"Bearer {REDACTED}"
    assert lines[3]["password"] == REDACTED


def test_log_each_with_a_context_variable_bound_writes_it_too(json_log: Callable[[], list[dict[str, Any]]]) -> None:
    structlog.contextvars.bind_contextvars(request_id="req-7")
    one_by_one, together = _lines_both_ways(json_log.raw, {"job": "j"})  # type: ignore[attr-defined]

    assert together == one_by_one
    assert all(json.loads(line)["request_id"] == "req-7" for line in together.splitlines())


def test_log_each_below_the_level_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with logging_into_buffer(monkeypatch, lambda: configure_logging("WARNING", "json", role="ops-test")) as buffer:
        log_each(structlog.get_logger("pin.test").bind(job="j"), "promotion expired", _ITEMS)
    assert buffer.getvalue() == ""


def test_log_each_under_another_chain_goes_through_it() -> None:
    """A test's capture (or the console view) sees every line, as it sees info's."""
    with capture_logs() as logs:
        log_each(structlog.get_logger("pin.test").bind(job="j"), "promotion expired", _ITEMS)
    assert [entry["PurchaseId"] for entry in logs] == [item["PurchaseId"] for item in _ITEMS]
    assert all(entry["event"] == "promotion expired" and entry["job"] == "j" for entry in logs)
