"""The API's HTTP server: uvicorn on h11 with its limits, set here once (`pin api` runs it; `pin up` runs `pin api`).

The limits a connection meets, in order: the request head within PIN_HTTP_HEAD_TIMEOUT_SECONDS (a connection
that sends nothing, or trickles, is closed; on a kept-alive connection the time runs from the next request's
first byte), a head of at most PIN_HTTP_MAX_HEADER_BYTES (431), at most PIN_HTTP_MAX_CONNECTIONS open connections
(a request on one beyond is a 503 problem document, then the connection closes), and an idle keep-alive
connection closed after PIN_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS. The process raises its open-files limit to what
those connections need, and the event loop's accept-error message, which asyncio would log for every failed
accept when file descriptors run out, becomes one line per interval with a count.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import resource
import socket
import struct
import termios
import time
from collections.abc import Callable
from typing import Any, cast

import h11
import structlog
import uvicorn
from fastapi import FastAPI
from prometheus_client import Counter
from uvicorn._types import ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.h11_impl import H11Protocol

from pin.api.problems import PROBLEM_JSON, problem_body
from pin.settings import Settings

log = structlog.get_logger(__name__)

# How long a refused connection keeps reading (and dropping) what the client still sends before closing.
LINGER_SECONDS = 2.0
# File descriptors the process needs besides its client connections: the pool's connections, the listening
# socket, logs, the interpreter's own files.
OPEN_FILES_HEADROOM = 256
# asyncio's message for an accept that failed for want of file descriptors or memory (it retries after 1 s).
ACCEPT_ERROR_MESSAGE = "socket.accept() out of system resource"
# At most one log line per this many seconds about failed accepts; the line counts those since the last one.
ACCEPT_ERROR_LOG_INTERVAL_SECONDS = 10.0

ACCEPT_ERRORS = Counter(
    "pin_api_accept_errors", "Connections the API could not accept (out of file descriptors or memory)."
)


KEEP_ALIVE_CLOSES_DEFERRED = Counter(
    "pin_api_keep_alive_closes_deferred",
    "Idle keep-alive closes not done because the client's next request had already arrived.",
)


def _bytes_waiting(transport: asyncio.BaseTransport) -> int:
    """How many received bytes the kernel holds for the transport's socket that the loop has not read."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0  # closed meanwhile
    waiting: int = struct.unpack("i", raw)[0]
    return waiting


class ApiConfig(uvicorn.Config):
    """uvicorn's configuration plus the connection limits the protocol below enforces."""

    def __init__(self, app: FastAPI, *, head_timeout: float, max_connections: int, **options: Any) -> None:
        super().__init__(app, **options)
        self.head_timeout = head_timeout  # seconds a client has to send a whole request head
        self.max_connections = max_connections  # open client connections served; beyond: 503, then close


def server_config(app: FastAPI, settings: Settings, *, host: str, port: int) -> ApiConfig:
    """The uvicorn configuration of the API."""
    return ApiConfig(
        app,
        head_timeout=settings.http.head_timeout_seconds,
        max_connections=settings.http.max_connections,
        host=host,
        port=port,
        # h11 explicitly (httptools would ignore the head limit), with the problem-document answers below
        http=ProblemH11Protocol,
        h11_max_incomplete_event_size=settings.http.max_header_bytes,
        # typed int by uvicorn; asyncio's timers take the float
        timeout_keep_alive=cast(int, settings.http.keep_alive_timeout_seconds),
        log_config=None,
        access_log=False,
    )


def serve(app: FastAPI, settings: Settings, *, host: str, port: int) -> None:
    """Run the API's server until SIGTERM/SIGINT (uvicorn handles the signals)."""
    raise_open_files_limit(settings.http.max_connections + OPEN_FILES_HEADROOM)
    ApiServer(server_config(app, settings, host=host, port=port)).run()


class ApiServer(uvicorn.Server):
    """uvicorn's server whose event loop logs failed accepts at most once per interval."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Install the accept-error log, then start as uvicorn does."""
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog(ACCEPT_ERROR_LOG_INTERVAL_SECONDS))
        await super().startup(sockets)


class AcceptErrorLog:
    """An event-loop exception handler: failed accepts are counted, and logged once per interval with their count.

    When file descriptors run out, asyncio (3.11) reports every failed accept of its backlog loop, thousands per
    second, each with a traceback. Every other error goes to the loop's default handler.
    """

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._logged_at: float | None = None
        self._unlogged = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Count a failed accept (log it if the interval has passed); hand anything else on."""
        if context.get("message") != ACCEPT_ERROR_MESSAGE:
            loop.default_exception_handler(context)
            return
        ACCEPT_ERRORS.inc()
        self._unlogged += 1
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < self._interval:
            return
        error = context.get("exception")
        log.warning(
            "connections not accepted", error=type(error).__name__, detail=str(error), count=self._unlogged,
            interval_seconds=self._interval,
        )  # fmt: skip
        self._logged_at, self._unlogged = now, 0


def raise_open_files_limit(needed: int) -> None:
    """Raise the soft open-files limit to ``needed`` (up to the hard limit); one warning line when that falls short."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "open-files limit below what the connection bound needs: connections beyond it are not accepted",
            limit=soft, needed=needed, setting="PIN_HTTP_MAX_CONNECTIONS",
        )  # fmt: skip


async def over_capacity(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    """The answer on a connection beyond the bound: a 503 problem document, and the connection closes."""
    detail = "the server has too many open connections; retry"
    body = json.dumps(problem_body(503, "too-many-connections", detail)).encode()
    headers = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close"), (b"retry-after", b"1")]  # fmt: skip
    await send({"type": "http.response.start", "status": 503, "headers": headers, "trailers": False})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class ProblemH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with a time limit for the request head, a bound on connections, and problem
    documents for a request head it refuses before the app runs.

    Head time limit: from the connection's start, and on a kept-alive connection from the first byte of the next
    request, the client has ``head_timeout`` seconds to send a whole request head; otherwise the connection is
    closed (after a 408 when part of a head came). Between requests, an idle connection is the keep-alive
    timer's. uvicorn alone closes only idle keep-alive connections, never one that has sent nothing yet or
    trickles its head.

    Connection bound: a connection opened while ``max_connections`` are open answers its request with a 503
    problem document (uvicorn's own limit_concurrency answers text/plain and counts idle connections too).

    Refused head: uvicorn answers an oversized or malformed head in text/plain and closes the socket while the
    client may still be sending it; closing with unread bytes resets the connection, so the client never reads
    the answer. Here the answer is a problem document (431 for a head above the limit, else 400), then the server
    stops writing and drops what still arrives for up to LINGER_SECONDS before closing (a lingering close).
    """

    _linger: asyncio.TimerHandle | None = None
    _head_timer: asyncio.TimerHandle | None = None

    @property
    def _limits(self) -> ApiConfig:
        return cast(ApiConfig, self.config)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the head timer; a connection beyond the bound gets the over-capacity answer."""
        super().connection_made(transport)
        if len(self.connections) > self._limits.max_connections:
            self.app = over_capacity
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        """Drop the rest of a refused request; otherwise as uvicorn, with the head timer running from the first
        byte of a head (on a kept-alive connection) until the whole head came."""
        if self._linger is not None:
            return
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._arm_head_timer()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        """As uvicorn (an idle kept-alive connection is uvicorn's keep-alive timer's); a part of the next head
        already received has its time limit from now."""
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the timers; otherwise as uvicorn."""
        self._stop_head_timer()
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        """Close an idle keep-alive connection, unless the client's next request is already waiting in the socket.

        The timer can fire in the same turn of a busy event loop in which the request arrived, before the loop
        reads it: closing then would drop a request the client sent in time. Its head is read on the next turn
        (the head timer still bounds it). A request sent after the close is the client's to retry.
        """
        if _bytes_waiting(self.transport) > 0:
            KEEP_ALIVE_CLOSES_DEFERRED.inc()
            return
        super().timeout_keep_alive_handler()

    def _arm_head_timer(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self._limits.head_timeout, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        """No whole head in time: close; a client that sent part of one is told 408 first."""
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self._unset_keepalive_if_required()
        if not self.conn.trailing_data[0]:
            self.transport.close()  # nothing sent: nobody to tell
            return
        detail = f"the request head did not arrive within {self._limits.head_timeout:g} s"
        body = json.dumps(problem_body(408, "request-timeout", detail)).encode()
        head = (f"HTTP/1.1 408 Request Timeout\r\ncontent-type: {PROBLEM_JSON}\r\ncontent-length: {len(body)}\r\n"
                "connection: close\r\n\r\n")  # fmt: skip
        # h11 cannot send a response before a request: the bytes are written as they are, then a lingering close
        self.transport.write(head.encode() + body)
        self._close_lingering()

    def send_400_response(self, msg: str) -> None:
        """Answer a refused head with a problem document, then close gracefully."""
        self._stop_head_timer()
        limit = self.config.h11_max_incomplete_event_size or 0
        if len(self.conn.trailing_data[0]) > limit:
            status, code, detail = 431, "header-too-large", f"the request line and headers exceed {limit} bytes"
        else:
            status, code, detail = 400, "bad-request", "the request is not valid HTTP/1.1"
        body = json.dumps(problem_body(status, code, detail)).encode()
        headers = [("content-type", PROBLEM_JSON), ("content-length", str(len(body))), ("connection", "close")]
        try:
            for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
        except h11.LocalProtocolError:
            self.transport.close()  # no answer is possible in this state: close as uvicorn would
            return
        self._close_lingering()

    def _close_lingering(self) -> None:
        """Stop writing, drop what still arrives, close after LINGER_SECONDS (closing at once could reset the
        connection before the client reads the answer)."""
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.transport.resume_reading()
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)
