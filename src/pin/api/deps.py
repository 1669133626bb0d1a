"""FastAPI dependencies shared by the contexts' routers."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Response
from psycopg_pool import ConnectionPool

from pin.api.problems import ApiProblem
from pin.db import Conn
from pin.outbox.writer import OutboxPolicy
from pin.settings import Settings


def get_pool(request: Request) -> ConnectionPool[Conn]:
    """The application's connection pool."""
    pool: ConnectionPool[Conn] = request.app.state.pool
    return pool


def get_settings(request: Request) -> Settings:
    """The application's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_outbox(request: Request) -> OutboxPolicy:
    """The process's outbox policy, which the composition root gave the application."""
    outbox: OutboxPolicy = request.app.state.outbox
    return outbox


Pool = Annotated[ConnectionPool[Conn], Depends(get_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]
Outbox = Annotated[OutboxPolicy, Depends(get_outbox)]

_ETAG = re.compile(r'^\s*(?:W/)?"?(\d{1,10})"?\s*$')
# Versions are PostgreSQL integers: a larger number is no ETag this API issued (and would fail the query).
_MAX_VERSION = 2**31 - 1


def if_match_version(request: Request) -> int | None:
    """The Version an If-Match header asks for (ETag = the aggregate's Version), or None when absent."""
    header = request.headers.get("if-match")
    if header is None or header.strip() == "*":
        return None
    match = _ETAG.match(header)
    if match is None or int(match.group(1)) > _MAX_VERSION:
        raise ApiProblem(400, "bad-if-match", 'If-Match must be an ETag such as "3"')
    return int(match.group(1))


IfMatch = Annotated[int | None, Depends(if_match_version)]


def etag(version: int) -> str:
    """The ETag header value of an aggregate at ``version``."""
    return f'"{version}"'


Body = TypeVar("Body")


def tagged(response: Response, body: Body, version: int) -> Body:
    """``body``, with the ETag of its aggregate's ``version`` set on ``response``."""
    response.headers["ETag"] = etag(version)
    return body


def found(response: Response, row: dict[str, Any] | None, missing: str) -> dict[str, Any]:
    """A stand-in record (card, post) tagged with its version; None is a 404 whose detail is ``missing``."""
    if row is None:
        raise ApiProblem(404, "not-found", missing)
    return tagged(response, row, row["version"])


def upserted(response: Response, created: bool, row: dict[str, Any] | None) -> dict[str, Any]:
    """A stand-in record just written: 201 when ``created``, else 200, tagged with its version."""
    assert row is not None  # written in the same transaction
    response.status_code = 201 if created else 200
    return tagged(response, row, row["version"])


# A correlation id is an opaque token the caller chose; anything else (free text, a long value) is not kept.
_CORRELATION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}", re.ASCII)


def correlation_id(request: Request) -> str:
    """The caller's X-Correlation-Id, else its X-Request-Id, when it is such a token; else a new UUID."""
    given = request.headers.get("x-correlation-id") or request.headers.get("x-request-id") or ""
    return given if _CORRELATION_ID.fullmatch(given) else str(uuid.uuid4())


CorrelationId = Annotated[str, Depends(correlation_id)]
