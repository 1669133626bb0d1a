"""Prometheus metrics endpoint for roles that are not the API (SPEC section 9: PIN_METRICS_PORT)."""

from __future__ import annotations

from prometheus_client import start_http_server


def serve_metrics(port: int | None, host: str = "127.0.0.1") -> None:
    """Serve /metrics on ``port`` from a daemon thread for the life of the process; None disables it."""
    if port is not None:
        start_http_server(port, addr=host)
