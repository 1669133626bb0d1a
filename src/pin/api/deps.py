"""FastAPI dependencies shared by the contexts' routers."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Request
from psycopg_pool import ConnectionPool

from pin.api.problems import ApiProblem
from pin.settings import Settings
from pin.unit_of_work import Conn


def get_pool(request: Request) -> ConnectionPool[Conn]:
    """The application's connection pool."""
    pool: ConnectionPool[Conn] = request.app.state.pool
    return pool


def get_settings(request: Request) -> Settings:
    """The application's settings."""
    settings: Settings = request.app.state.settings
    return settings


Pool = Annotated[ConnectionPool[Conn], Depends(get_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]

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
