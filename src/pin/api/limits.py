"""The request body limit (PIN_HTTP_MAX_BODY_BYTES): a larger body is a 413 problem document, never buffered."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pin.api.problems import problem_response


class BodyLimitMiddleware:
    """Refuses a request body above ``max_bytes``: at once when its Content-Length says so, else (a chunked
    body) as soon as the bytes read pass the limit. What the client still sends is read and dropped by the
    server, so the keep-alive connection serves the next request."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count the bytes as the app reads them."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        read = 0

        async def _receive() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.max_bytes:
                raise HTTPException(413, self._detail())  # answered by the problem handlers, as any HTTP error
            return message

        await self.app(scope, _receive, send)

    def _detail(self) -> str:
        return f"the request body exceeds {self.max_bytes} bytes"

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await problem_response(413, "payload-too-large", self._detail())(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The request's Content-Length (the server has checked its syntax), or None."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value)
    return None
