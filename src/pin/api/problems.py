"""RFC 9457 problem documents: the one place domain and HTTP errors become responses."""

from __future__ import annotations

from typing import Any

import psycopg
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PROBLEM_JSON = "application/problem+json"


class ApiProblem(Exception):
    """An error with an HTTP status and a stable code; every domain error maps to one of these."""

    def __init__(self, status: int, code: str, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.extensions = extensions


def problem_body(status: int, code: str, detail: str, **extensions: Any) -> dict[str, Any]:
    """A problem document; ``type`` is a stable URN built from the code."""
    return {
        "type": f"urn:pin:problem:{code}",
        "title": code.replace("-", " ").capitalize(),
        "status": status,
        "detail": detail,
        "code": code,
        **extensions,
    }


def problem_response(status: int, code: str, detail: str, **extensions: Any) -> JSONResponse:
    """A problem+json response."""
    body = problem_body(status, code, detail, **extensions)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


# The problem document as the OpenAPI document describes it (extensions such as ``errors`` may be added).
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
    },
}


def problem_openapi_responses() -> dict[int | str, dict[str, Any]]:
    """The error responses every route may answer, documented as problem+json (not FastAPI's default 422)."""
    described = {400: "Malformed request", 401: "Missing or invalid token", 403: "Role not allowed",
                 404: "Not found (or another tenant's)", 409: "State conflict", 412: "If-Match mismatch",
                 422: "Validation error", 431: "Header too large", 503: "Database unavailable (retry)"}  # fmt: skip
    return {
        status: {"description": text, "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}
        for status, text in described.items()
    }


_STATUS_CODES = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    412: "precondition-failed",
    415: "unsupported-media-type",
    422: "validation-error",
    431: "header-too-large",
}


def install_problem_handlers(app: FastAPI) -> None:
    """Make every error, including FastAPI's own, a problem document; never a stack trace."""

    @app.exception_handler(ApiProblem)
    async def _api_problem(_: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(exc.status, exc.code, exc.detail, **exc.extensions)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(part) for part in err.get("loc", ())], "msg": str(err.get("msg", ""))} for err in exc.errors()
        ]
        is_json_error = any(err.get("type") == "json_invalid" for err in exc.errors())
        status, code = (400, "malformed-json") if is_json_error else (422, "validation-error")
        return problem_response(status, code, "the request is not valid", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "http-error")
        return problem_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(psycopg.OperationalError)
    async def _database_unavailable(_: Request, exc: psycopg.OperationalError) -> JSONResponse:
        # the database is down or restarting (PoolTimeout is one too): retryable, not an internal error
        structlog.get_logger(__name__).warning("database unavailable", error_type=type(exc).__name__)
        response = problem_response(503, "database-unavailable", "the database is not reachable; retry later")
        response.headers["Retry-After"] = "1"
        return response

    app.add_middleware(UnexpectedErrorMiddleware)


class UnexpectedErrorMiddleware:
    """An error no handler maps becomes a logged 500 problem document, and the connection stays usable.

    Starlette's own last-resort handler answers and then re-raises, and the server closes the keep-alive
    connection without a ``Connection: close``: a client's next request on it fails. Here the error is
    answered and handled, so the server keeps the connection for the next request. Only an error after the
    response has started is left to the server, which has no other way to tell the client than closing.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; answer 500 for an error raised before the response started."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def _send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except Exception as exc:
            if started:
                raise
            # the route template, not the path: a hostile path is the caller's free text
            route = getattr(scope.get("route"), "path", None)
            structlog.get_logger(__name__).error(
                "unexpected error", method=scope["method"], route=route, error_type=type(exc).__name__, exc_info=exc
            )
            response = problem_response(500, "internal-error", "an unexpected error occurred; it has been logged")
            await response(scope, receive, send)
