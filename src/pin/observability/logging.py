"""Structured logging: one JSON object per line (or a readable console view on a terminal), with
:func:`redact_sensitive` as the last processor: the safety net under "no PII in logs" (docs/operations.md, "Logs
and traces").
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import operator
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"

# Keys whose values are credentials: masked whatever their value (compared lower-case, '-' as '_').
_CREDENTIAL_KEYS = re.compile(
    r"(^|_)(authorization|password|passwd|pwd|secret|token|jwt|api_?key|cookie|set_cookie|credentials?|private_key)($|_)"
)
# Keys whose values are free text written by people (CancelReason never leaves calendar, SPEC section 2),
# or contact data. The Reason *enum* of appointment-cancelled (``reason``) stays: it is a closed set.
_FREE_TEXT_KEYS = frozenset(
    {
        "cancel_reason",
        "cancelreason",
        "reason_text",
        "decline_reason",
        "comment",
        "note",
        "notes",
        "text",
        "body",
        "email",
        "phone",
        "full_name",
        "first_name",
        "last_name",
    }
)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
# PostgreSQL error details echo row values (free text included): keep the message, drop the values.
_FAILING_ROW = re.compile(r"Failing row contains \(.*$", re.MULTILINE)
_KEY_VALUES = re.compile(
    r"Key \((?P<cols>[^)]*)\)=\(.*?\)(?=( already exists| is not present in table| conflicts with)|\.?$)",
    re.MULTILINE,
)
# A libpq URL with a password: postgresql://user:password@host
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://[^:/@\s]+):[^@\s]+@")
# What every pattern above needs somewhere in the text: one search clears the usual field (an id, an enum, a
# count) instead of five substitutions.
_SUSPECT = re.compile(r"eyJ|(?i:bearer|basic)\s|://|Failing row contains|Key \(")


def _suspect(text: str) -> bool:
    """Whether ``text`` holds something a pattern above needs; plain substring tests (a superset of the
    case-insensitive alternation, several times cheaper) clear the usual text before the regular expression runs."""
    lowered = text.lower()
    if not (
        "eyj" in lowered
        or "://" in lowered
        or "failing row contains" in lowered
        or "key (" in lowered
        or "bearer" in lowered
        or "basic" in lowered
    ):
        return False
    return _SUSPECT.search(text) is not None


def _normalise(key: str) -> str:
    return key.lower().replace("-", "_")


@functools.lru_cache(maxsize=1024)  # log keys are few and repeat on every line
def _is_sensitive_key(key: str) -> bool:
    name = _normalise(key)
    return bool(_CREDENTIAL_KEYS.search(name)) or name in _FREE_TEXT_KEYS


def scrub_text(text: str) -> str:
    """Mask tokens, URL passwords and database row values inside a free string (messages, exceptions)."""
    if not _suspect(text):
        return text
    text = _JWT.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}:{REDACTED}@", text)
    text = _FAILING_ROW.sub(f"Failing row contains ({REDACTED})", text)
    return _KEY_VALUES.sub(lambda m: f"Key ({m.group('cols')})=({REDACTED})", text)


def _scrub(value: Any, depth: int = 0) -> Any:
    if depth > 5:  # a log field is never this deep; stop rather than recurse through odd objects
        return value
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and _is_sensitive_key(k) else _scrub(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrub(item, depth + 1) for item in value]
    return value


def error_text(exc: BaseException) -> str:
    """One line about a failure, for a log or a report: a Kafka error's own text (``KafkaException`` wraps a
    ``KafkaError``), else the message, else the type (a timeout has no message); at most 300 characters."""
    error = exc.args[0] if exc.args else None
    describe = getattr(error, "str", None)  # confluent_kafka.KafkaError, without importing the client here
    text = describe() if callable(describe) else str(exc)
    return text.strip()[:300] or type(exc).__name__


def redact_sensitive(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: mask credentials, free text and tokens in every field of an event."""
    del logger, method_name
    for key in _sensitive_keys(tuple(event_dict)):
        event_dict[key] = REDACTED
    # One search over all the string fields at once clears the usual line (ids, enums, times): every pattern of
    # scrub_text needs a suspect, and no suspect can span the NUL joining two fields, so none found here means
    # none in any field. Only a line with a suspect pays the search field by field.
    clean = not _suspect("\0".join([value for value in event_dict.values() if type(value) is str]))
    for key, value in event_dict.items():
        kind = type(value)
        if kind in _UNSCRUBBED or (clean and kind is str) or key == "exc_info" or value is REDACTED:
            continue  # exc_info is formatted into "exception" before this runs; a clean string stays as it is
        event_dict[key] = _scrub(value)
    return event_dict


# values _scrub returns as they are
_UNSCRUBBED = frozenset({int, float, bool, type(None)})


@functools.lru_cache(maxsize=1024)  # an event's keys repeat line after line
def _sensitive_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(key for key in keys if _is_sensitive_key(key))


# json.dumps(event_dict, default=...) (structlog's fallback for other objects: an object's ``__structlog__()`` or its
# repr) without the encoder it builds on every call: the same C encoder, built once, so the same text. No circular
# check (a log field is never circular; the C encoder's recursion limit still stops one).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_LINE_ENCODER = json.JSONEncoder(default=structlog.processors._json_fallback_handler)
_C_LINE_ENCODER: Any = None
if _c_make_encoder is not None:
    _C_LINE_ENCODER = _c_make_encoder(
        None, structlog.processors._json_fallback_handler, json.encoder.encode_basestring_ascii, None,
        ": ", ", ", False, False, True,
    )  # fmt: skip


def _encode_line(event_dict: Mapping[str, Any], **_: Any) -> str:
    if _C_LINE_ENCODER is None:  # no C accelerator (not CPython): the same text, slower
        return _LINE_ENCODER.encode(event_dict)
    return "".join(_C_LINE_ENCODER(event_dict, 0))


# The lines this thread's structlog events rendered inside lines_together(), held until its end: [(handler, line)].
_held = threading.local()


@contextlib.contextmanager
def lines_together() -> Iterator[None]:
    """The lines this thread logs inside the block (structlog's, rendered and complete as ever) are written at its
    end, in order, one write and one flush per handler instead of one per line: a job's line per item (200 a batch)
    is then one system call a batch. Lines are held, never dropped: an exception in the block still writes them.
    Inside an enclosing block, the outer one writes."""
    if getattr(_held, "lines", None) is not None:
        yield
        return
    lines: list[tuple[logging.StreamHandler[TextIO], str]] = []
    _held.lines = lines
    try:
        yield
    finally:
        _held.lines = None
        for handler, group in itertools.groupby(lines, key=operator.itemgetter(0)):
            _write(handler, "".join([line for _, line in group]))


def _write(handler: logging.StreamHandler[TextIO], text: str) -> None:
    with handler.lock or contextlib.nullcontext():
        handler.stream.write(text)
        handler.stream.flush()


def log_each(logger: Any, event: str, items: Sequence[Mapping[str, Any]]) -> None:
    """One INFO line of ``event`` per item's fields on ``logger``, each through the logger's chain as :meth:`info`
    sends it, written together (:func:`lines_together`): a job's line per item, 200 a batch, in one write."""
    info = logger.info
    with lines_together():
        for fields in items:
            info(event, **fields)


class _LineLogger:
    """The end of structlog's chain: each rendered event written whole, as one line, through the standard handler's
    stream and under its lock (so our lines and the libraries' never interleave); inside :func:`lines_together`,
    held and written with the block's other lines.

    ``name`` is the name the logger was asked for (``add_logger_name`` reads it).
    """

    def __init__(self, handler: logging.StreamHandler[TextIO], *args: Any) -> None:
        self.handler = handler
        self.name = str(args[0]) if args else ""

    def msg(self, message: str) -> None:
        held = getattr(_held, "lines", None)
        if held is not None:
            held.append((self.handler, message + "\n"))
            return
        _write(self.handler, message + "\n")

    debug = info = warning = warn = error = err = critical = exception = fatal = failure = msg


# The longest an exception's text gets in a line: its head (the first frames, the root cause of a chain) and its tail
# (the innermost frames and the message of the exception raised last), what lies between cut out and counted.
EXCEPTION_TEXT_LIMIT = 16_000
_EXCEPTION_HEAD = 4_000


def exception_text(exc_info: structlog.typing.ExcInfo) -> str:
    """An exception as Python's plain traceback, without any frame's local variables, at most
    :data:`EXCEPTION_TEXT_LIMIT` characters long.

    Never the rich traceback that structlog's console view draws by default: that one renders every frame's local
    variables, which took seconds per exception (a batch of rows in a frame, a pool, a connection) and would write
    the personal data those rows hold into the log.
    """
    text = "".join(traceback.format_exception(*exc_info)).rstrip("\n")
    if len(text) <= EXCEPTION_TEXT_LIMIT:
        return text
    tail = EXCEPTION_TEXT_LIMIT - _EXCEPTION_HEAD
    cut = len(text) - EXCEPTION_TEXT_LIMIT
    return f"{text[:_EXCEPTION_HEAD]}\n[... {cut} characters of the traceback cut ...]\n{text[-tail:]}"


def _console_exception(sio: TextIO, exc_info: structlog.typing.ExcInfo) -> None:
    """The console view's exception formatter: :func:`exception_text`, under the line."""
    sio.write("\n" + exception_text(exc_info))


def configure_unstarted(level: int = logging.DEBUG) -> None:
    """For a process that runs roles' code without starting a role (the tests, the bench): structlog's own default
    view (a console line on stdout, nothing of :func:`configure_logging`'s), but an exception as :func:`exception_text`
    writes it instead of structlog's default rich traceback with every frame's local variables."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(exception_formatter=_console_exception),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
    )


def resolve_log_format(fmt: str, stream: TextIO | None = None) -> str:
    """``json`` or ``console``: ``auto`` is console when ``stream`` (stderr, where the lines go) is a terminal."""
    if fmt != "auto":
        return fmt
    return "console" if (stream or sys.stderr).isatty() else "json"


def _role_first(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Console only: the role before the event (``relay  outbox batch published ...``), the column a person
    scans first when every role of `pin up` writes to the same terminal."""
    del logger, method_name
    role = event_dict.pop("role", None)
    if role is not None:
        event_dict["event"] = f"{role:<28} {event_dict.get('event', '')}"
    return event_dict


class RepeatFilter(logging.Filter):
    """Lets a line through once per ``interval`` seconds per text (digits ignored), counting what it held back.

    librdkafka retries a broker that refuses connections every few tens of milliseconds and logs each failure
    (pin.messaging.kafka), and psycopg's pool logs each failed reconnect: without this, a broker or a database down
    for a minute is a thousand identical lines per process. The next line of the
    same text that gets through carries ``repeated``: how many were held back since the last one.
    """

    _DIGITS = re.compile(r"\d+")

    def __init__(self, interval: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._interval = interval
        self._clock = clock
        self._seen: dict[str, tuple[float, int]] = {}  # text -> (when it last went through, held back since)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = self._DIGITS.sub("#", record.getMessage())
        now = self._clock()
        with self._lock:
            last, held = self._seen.get(text, (None, 0))
            if last is not None and now - last < self._interval:
                self._seen[text] = (last, held + 1)
                return False
            if len(self._seen) >= 1000:  # texts are few (one per broker and failure kind); never grow unbounded
                self._seen.clear()
            self._seen[text] = (now, 0)
        if held:
            record.repeated = held
        return True


# psycopg_pool logs every failed attempt to open a connection; the role says "database unreachable; waiting" itself
_POOL_REPEATS = RepeatFilter()


def _with_role(
    role: str, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The process's role on every line (a line's own ``role`` field wins)."""
    del logger, method_name
    event_dict.setdefault("role", role)
    return event_dict


def configure_logging(level: str = "INFO", fmt: str = "auto", role: str | None = None) -> None:
    """Render structlog's events and the standard library's records the same way, one line each on stderr.

    Our own events go through structlog's filtering logger straight to the writer (a disabled level costs one
    comparison; an enabled one builds no ``logging.LogRecord``); the libraries' records reach the same processors
    through the standard library's handler.
    """
    use_console = resolve_log_format(fmt) == "console"
    renderer: structlog.typing.Processor = (
        # it gets the exception as text already; were it ever handed one, it would not draw its locals either
        structlog.dev.ConsoleRenderer(exception_formatter=_console_exception)
        if use_console
        else structlog.processors.JSONRenderer(_encode_line)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # exceptions become text first, on a terminal too, so that redaction sees their messages; plain and bounded,
    # no locals, in both views (exception_text)
    final: list[structlog.typing.Processor] = [
        structlog.processors.ExceptionRenderer(exception_text),
        redact_sensitive,
        *([_role_first] if use_console else []),
        renderer,
    ]
    if role is not None:
        # every line of the process, its threads' too (a contextvar would stay in the thread that bound it: the
        # relay's settling and heartbeat lines had an empty role column)
        shared.append(functools.partial(_with_role, role))
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    handler = logging.StreamHandler(sys.stderr)
    structlog.configure(
        processors=[*shared, *final],
        logger_factory=functools.partial(_LineLogger, handler),
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        # not cached: a module's logger follows the configuration in force (the level above) at every call
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        # a library record's own fields are not copied, except the count of lines a repeat filter held back
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(allow=("repeated",))],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric_level)
    # librdkafka and uvicorn access logs are noisy at INFO; keep their warnings
    # (and alembic's seven "setup plugin" lines before every migration)
    pool = logging.getLogger("psycopg.pool")
    if _POOL_REPEATS not in pool.filters:
        pool.addFilter(_POOL_REPEATS)
    for noisy in ("uvicorn.access", "httpx", "pin.kafka.client", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
