"""The API's HTTP server: uvicorn on h11 with its limits, set here once (`pin api` runs it; `pin up` runs `pin api`)."""

from __future__ import annotations

import asyncio
import json

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from pin.api.problems import PROBLEM_JSON, problem_body
from pin.settings import Settings

# How long a refused connection keeps reading (and dropping) what the client still sends before closing.
LINGER_SECONDS = 2.0


def server_config(app: FastAPI, settings: Settings, *, host: str, port: int) -> uvicorn.Config:
    """The uvicorn configuration of the API."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        # h11 explicitly (httptools would ignore the head limit), with the problem-document answer below
        http=ProblemH11Protocol,
        h11_max_incomplete_event_size=settings.http_max_header_bytes,
        log_config=None,
        access_log=False,
    )


class ProblemH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, except for a request head it refuses before the app runs.

    uvicorn answers an oversized or malformed head in text/plain and closes the socket while the client may
    still be sending it; closing with unread bytes resets the connection, so the client never reads the answer.
    Here the answer is a problem document (431 for a head above the limit, else 400), then the server stops
    writing and drops what still arrives for up to LINGER_SECONDS before closing (a lingering close).
    """

    _linger: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        """Drop the rest of a refused request; otherwise as uvicorn."""
        if self._linger is None:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the lingering timer; otherwise as uvicorn."""
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """Answer a refused head with a problem document, then close gracefully."""
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
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.transport.resume_reading()
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)
