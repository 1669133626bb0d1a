"""The metrics port of roles that are not the API (SPEC section 9: PIN_METRICS_PORT).

It serves ``/metrics`` (Prometheus exposition of the process's default registry), the liveness probe
``/healthz/liveness`` (also ``/healthz``) and the readiness probe ``/readyz`` (also ``/healthz/readiness``): see
:mod:`pin.observability.liveness`. Metrics themselves are
defined in the module of the component that updates them (names fixed by the seeds).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app

from pin.observability.liveness import Heartbeat, Readiness, heartbeat, readiness

LIVENESS_PATHS = frozenset({"/healthz", "/healthz/liveness"})
# /readyz as the API names it, so that every role is probed on the same paths
READINESS_PATHS = frozenset({"/readyz", "/healthz/readiness"})

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """A thread per request, daemon threads (a slow scrape never blocks the probe, nor the exit)."""

    daemon_threads = True


class _SilentHandler(WSGIRequestHandler):
    """No access log line per scrape or probe."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


def metrics_app(
    registry: CollectorRegistry = REGISTRY, beats: Heartbeat | None = None, ready: Readiness | None = None
) -> WsgiApp:
    """The WSGI app of the metrics port: the liveness and readiness probes, and Prometheus for every other path."""
    prometheus = make_wsgi_app(registry)

    def probe(passed: bool, answer: dict[str, object], start_response: StartResponse) -> Iterable[bytes]:
        body = json.dumps(answer).encode()
        status = "200 OK" if passed else "503 Service Unavailable"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path in LIVENESS_PATHS:
            alive = (beats or heartbeat()).report()
            return probe(alive.alive, alive.as_dict(), start_response)
        if path in READINESS_PATHS:
            verdict = (ready or readiness()).report()
            return probe(verdict.ready, verdict.as_dict(), start_response)
        exposition: Iterable[bytes] = prometheus(environ, start_response)
        return exposition

    return app


def start_metrics_server(
    port: int,
    host: str = "127.0.0.1",
    registry: CollectorRegistry = REGISTRY,
    beats: Heartbeat | None = None,
    ready: Readiness | None = None,
) -> WSGIServer:
    """Serve the metrics port from a daemon thread; port 0 picks a free port (see ``server_port``)."""
    app = metrics_app(registry, beats, ready)
    server = make_server(host, port, app, _ThreadingWSGIServer, handler_class=_SilentHandler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server


def serve_metrics(port: int | None, host: str = "127.0.0.1") -> WSGIServer | None:
    """Serve /metrics and the probes on ``port`` for the life of the process; None disables it."""
    if port is None:
        return None
    return start_metrics_server(port, host)
