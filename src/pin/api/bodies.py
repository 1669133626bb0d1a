"""The bases of every JSON body: requests strict (RFC 3339 times, camelCase, no unknown fields, no NUL),
responses camelCase with times in UTC and a Z suffix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator
from pydantic.alias_generators import to_camel

from pin.messaging.contracts import UtcDateTime
from pin.rfc3339 import is_rfc3339

# FastAPI decodes the JSON and pydantic's strict mode then sees a str where JSON has no type of its own (UUIDs,
# times, enum values): those few types parse a string (lax mode), and their lax modes accept no other JSON value.
FromString = Strict(False)


def _rfc3339_text(value: Any) -> Any:
    """Let only an RFC 3339 string through (pydantic would also read a number, or digits, as a Unix time)."""
    if isinstance(value, datetime):
        return value  # built in Python (tests, internal callers), not decoded from JSON
    if not isinstance(value, str) or not is_rfc3339(value):
        raise ValueError("must be an RFC 3339 date-time with a time zone offset, e.g. 2030-01-01T10:00:00Z")
    return value


Uuid = Annotated[uuid.UUID, FromString]
Rfc3339 = Annotated[AwareDatetime, FromString, BeforeValidator(_rfc3339_text)]


def _strings(document: Any) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string in a decoded JSON value (keys included), with where it is."""
    # a loop, not recursion: JSON nested nearly as deep as the decoder allows must not overflow the stack here
    pending: list[tuple[tuple[str, ...], Any]] = [((), document)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            for key, item in value.items():
                pending.extend((((*path, str(key)), key), ((*path, str(key)), item)))
        elif isinstance(value, list):
            pending.extend(((*path, str(index)), item) for index, item in enumerate(value))


def _storable(text: str) -> bool:
    """PostgreSQL text holds neither NUL nor an unpaired surrogate (which has no UTF-8 encoding)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class RequestBody(BaseModel):
    """Base of every request body: strict JSON types, camelCase names only, unknown fields refused."""

    model_config = ConfigDict(strict=True, extra="forbid", alias_generator=to_camel, populate_by_name=False)

    @model_validator(mode="before")
    @classmethod
    def _text_is_storable(cls, data: Any) -> Any:
        # at the edge, once for the whole document: the database would refuse it later with a 500
        for path, text in _strings(data):
            if not _storable(text):
                where = ".".join(part if _storable(part) else repr(part)[1:-1] for part in path) or "the body"
                raise ValueError(f"{where}: text must not contain NUL (U+0000) or an unpaired surrogate")
        return data


# A time in a response: ISO 8601 in UTC with a Z suffix, as in every contract.
UtcTime = Annotated[UtcDateTime, Field(json_schema_extra={"format": "date-time"})]


class ResponseBody(BaseModel):
    """Base of every response body: camelCase names, built from the domain's objects by field name."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)
