"""The API's requests, measured like every other role: a count by route template, method and status class, and a
latency histogram, served on the API's own /metrics.

Every label is from a small fixed set, never from the caller's free text: the route is the template the request
matched (``/calendar/slots/{slot_id}``), or ``unmatched``; an unusual method is ``other``.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter(
    "pin_http_requests",
    "HTTP requests answered by the API, by route template, method and status class (2xx, 4xx, 5xx...).",
    ["route", "method", "status_class"],
)
REQUEST_DURATION = Histogram(
    "pin_http_request_duration_seconds",
    "From a request's arrival at the app to the end of its response, by route template and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)

# The route label of a request no route matched (a 404, a body refused before routing): never its path.
UNMATCHED = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetricsMiddleware:
    """The outermost layer: it sees every answer, the problem documents of the layers inside included; an error
    that escapes after the response started counts as a 5xx."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time an HTTP request and count its answer; anything else (lifespan) passes through."""
        if scope["type"] == "http":
            await self._measured(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _measured(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def _send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            # the router wrote the matched route into the scope it was given, which is this one
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = scope["method"] if scope["method"] in _METHODS else "other"
            REQUESTS.labels(route=route, method=method, status_class=f"{status // 100}xx").inc()
            REQUEST_DURATION.labels(route=route, method=method).observe(time.perf_counter() - started)
