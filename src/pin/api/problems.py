"""RFC 9457 problem documents: the one place domain and HTTP errors become responses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import psycopg
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg import errors as pg_errors
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PROBLEM_JSON = "application/problem+json"
# The detail of a 409 for a record another transaction holds longer than the API's lock timeout.
ROW_LOCKED_DETAIL = "the record is being changed by another transaction; retry"


class ApiProblem(Exception):
    """An error with an HTTP status and a stable code; every domain error maps to one of these."""

    def __init__(
        self, status: int, code: str, detail: str, *, headers: Mapping[str, str] | None = None, **extensions: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers  # response headers of its own (a 401's WWW-Authenticate that says why)
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


class DomainProblem(NamedTuple):
    """How one domain error answers: its status and stable code (the title is derived from the code)."""

    status: int
    code: str
    # None: the error's own message
    detail: str | None = None


# How a context's domain errors answer: each context's ``http`` module exports its table beside its router
# (``PROBLEMS``), and the app installs them together (:func:`install_problem_handlers`). An error's class is looked
# up along its MRO, so a context's root error (last in its table) answers every rule that has no entry of its own.
ProblemTable = Mapping[type[Exception], DomainProblem]


def combined(tables: Iterable[ProblemTable]) -> ProblemTable:
    """The contexts' tables as one; an error listed by two tables is a programming error."""
    merged: dict[type[Exception], DomainProblem] = {}
    for table in tables:
        twice = merged.keys() & table.keys()
        if twice:
            raise ValueError(f"errors in two problem tables: {sorted(kind.__qualname__ for kind in twice)}")
        merged.update(table)
    return merged


def domain_problem(error: Exception, problems: ProblemTable) -> ApiProblem:
    """The problem document of a domain error (its nearest class in the table)."""
    found = next(problems[kind] for kind in type(error).__mro__ if kind in problems)
    return ApiProblem(found.status, found.code, str(error) if found.detail is None else found.detail)


def problem_response(
    status: int, code: str, detail: str, *, headers: Mapping[str, str] | None = None, **extensions: Any
) -> JSONResponse:
    """A problem+json response (a 401 challenges for a bearer token unless ``headers`` says more)."""
    body = problem_body(status, code, detail, **extensions)
    if headers is None and status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
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
    described = {
        400: "Malformed request",
        401: "Missing or invalid token",
        403: "Role not allowed",
        404: "Not found (or another tenant's)",
        408: "Request head not sent in time",
        409: "State conflict (or a record held by another transaction past the lock timeout: retry)",
        412: "If-Match mismatch",
        422: "Validation error",
        431: "Header too large",
        503: "Database unavailable, or too many open connections (retry)",
    }
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
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "validation-error",
    431: "header-too-large",
}


def install_problem_handlers(app: FastAPI, problems: ProblemTable) -> None:
    """Make every error, including FastAPI's own, a problem document; never a stack trace. ``problems``: how the
    contexts' domain errors answer (:func:`combined` of their tables)."""

    @app.exception_handler(ApiProblem)
    async def _api_problem(_: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(exc.status, exc.code, exc.detail, headers=exc.headers, **exc.extensions)

    async def _domain_error(_: Request, exc: Exception) -> JSONResponse:
        problem = domain_problem(exc, problems)
        return problem_response(problem.status, problem.code, problem.detail)

    # a handler for the classes whose ancestors have no entry (a subclass is found along the MRO)
    for root in (kind for kind in problems if not any(base in problems for base in kind.__mro__[1:])):
        app.add_exception_handler(root, _domain_error)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        invalid_json = next((err for err in exc.errors() if err.get("type") == "json_invalid"), None)
        if invalid_json is not None:
            return problem_response(400, "malformed-json", await _json_error(request, invalid_json))
        errors = [
            {"loc": [str(part) for part in err.get("loc", ())], "msg": str(err.get("msg", ""))} for err in exc.errors()
        ]
        return problem_response(422, "validation-error", "the request is not valid", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "http-error")
        return problem_response(exc.status_code, code, str(exc.detail))

    @app.exception_handler(pg_errors.LockNotAvailable)
    async def _row_locked(_: Request, exc: pg_errors.LockNotAvailable) -> JSONResponse:
        # a row (or table) held by another transaction past the session's lock_timeout (pin.db.ConnectionPolicy): the
        # same answer as the calendar's concurrent modification, and retryable
        response = problem_response(409, "concurrent-modification", ROW_LOCKED_DETAIL)
        response.headers["Retry-After"] = "1"
        return response

    @app.exception_handler(psycopg.OperationalError)
    async def _database_unavailable(_: Request, exc: psycopg.OperationalError) -> JSONResponse:
        # the database is down or restarting (PoolTimeout is one too): retryable, not an internal error
        structlog.get_logger(__name__).warning("database unavailable", error_type=type(exc).__name__)
        response = problem_response(503, "database-unavailable", "the database is not reachable; retry later")
        response.headers["Retry-After"] = "1"
        return response

    app.add_middleware(UnexpectedErrorMiddleware)


async def _json_error(request: Request, error: Mapping[str, Any]) -> str:
    """Where a body is not JSON, as a person finds it in an editor: line and column (FastAPI gives the offset of
    the decoder's error in the decoded text), and what the decoder expected there."""
    location = error.get("loc", ())
    offset = location[-1] if location and isinstance(location[-1], int) else None
    reason = str((error.get("ctx") or {}).get("error", "")) or "not JSON"
    if offset is None:
        return f"the body is not JSON: {reason}"
    text = (await request.body()).decode("utf-8", errors="replace")[:offset]
    line = text.count("\n") + 1
    column = offset - (text.rfind("\n") + 1) + 1
    return f"the body is not JSON: {reason} at line {line}, column {column}"


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
