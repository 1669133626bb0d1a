"""The FastAPI application factory: health, metrics, problem documents, and the routers of the contexts it is
given. Plumbing: it imports no context; which contexts make the app is the composition root's choice
(``pin.bootstrap.http_contexts``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from fastapi import APIRouter, FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import ConnectionPool

from pin.api.auth import TokenVerifier
from pin.api.limits import BodyLimitMiddleware
from pin.api.metrics import RequestMetricsMiddleware
from pin.api.problems import (
    ProblemTable,
    combined,
    install_problem_handlers,
    problem_openapi_responses,
    problem_response,
)
from pin.db import Conn
from pin.outbox.writer import OutboxPolicy
from pin.settings import Settings

# The edge rules a client must know (docs/api.md has the reasons).
API_DESCRIPTION = """\
Bearer JWT (`sub`, `tenant_id`, `roles`, `exp`). A token living longer than PIN_JWT_MAX_LIFETIME_SECONDS is a 401;
a token holding none of the business roles (agent, investor, manager, admin) is a 403 on every route: the platform
roles viewer and operator open the operator console (/console) only.
Bodies are strict JSON: no coercion between booleans, numbers and strings; times are RFC 3339 strings with an
offset; no NUL in any string. Headers above the server's limit, or an Authorization header above 8 KiB, are a 431.
A request body above PIN_HTTP_MAX_BODY_BYTES is a 413.
Every error is an `application/problem+json` document with a stable `code`.
"""


class HttpContext(NamedTuple):
    """What one context contributes to the API: its ``http`` module's ``router`` and ``PROBLEMS``."""

    router: APIRouter
    problems: ProblemTable


def create_app(
    settings: Settings, pool: ConnectionPool[Conn], contexts: Sequence[HttpContext], outbox: OutboxPolicy
) -> FastAPI:
    """Build the API of ``contexts`` (their routes in this order), whose use cases write their events as ``outbox``
    says; nothing here runs at import time."""
    # every error is a problem+json document: say so in the OpenAPI document (FastAPI would claim a JSON 422)
    app = FastAPI(
        title="PIN background jobs and integration events",
        version="1.0.0",
        description=API_DESCRIPTION,
        responses=problem_openapi_responses(),
    )
    app.state.settings = settings
    app.state.pool = pool
    app.state.outbox = outbox
    app.state.token_verifier = TokenVerifier(settings)
    install_problem_handlers(app, combined(context.problems for context in contexts))
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.http_max_body_bytes)
    app.add_middleware(RequestMetricsMiddleware)  # added last: the outermost, it counts every answer
    for context in contexts:
        app.include_router(context.router)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], response_model=None)
    def readyz() -> dict[str, str] | Response:
        """Readiness: the database answers."""
        try:
            with pool.connection(timeout=2) as conn:
                conn.execute("SELECT 1")
        except Exception:  # noqa: BLE001 - any failure means not ready
            return problem_response(503, "not-ready", "the database is not reachable")
        return {"status": "ready"}

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        """Prometheus exposition of this process's metrics."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
