"""The tolerant reader every consumer uses for the messages it reads: only the fields it reads, unknown fields
ignored, enums kept raw and mapped by :func:`known`, times :data:`Rfc3339Time` in every group (docs/design/consumers.md,
"Tolerant reading").
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from pydantic import AliasGenerator, BaseModel, ConfigDict
from pydantic.alias_generators import to_pascal

from pin.messaging.envelope import Rfc3339Time

__all__ = ["Rfc3339Time", "TolerantModel", "known"]

E = TypeVar("E", bound=StrEnum)


class TolerantModel(BaseModel):
    """A consumer's view of a message: PascalCase keys, extra fields ignored, immutable."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=to_pascal),
    )


def known(enum: type[E], raw: str | None) -> E | None:
    """The enum member whose value is ``raw``, or None for a value this consumer does not know."""
    if raw is None:
        return None
    # a known value is one look-up in the enum's own map (the call below does it after two calls of its own)
    member = enum._value2member_map_.get(raw) if type(raw) is str else None
    if member is not None:
        return member  # type: ignore[return-value]
    try:
        return enum(raw)
    except ValueError:
        return None
