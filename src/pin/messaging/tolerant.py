"""The tolerant reader every consumer uses for the messages it reads (seed 003, «Версионирование»).

A consumer models only the fields it reads. Unknown fields are ignored; an enum field keeps the raw string,
and :func:`known` maps it to the consumer's enum or None, so a value added by a newer producer takes the
neutral path instead of failing the message. A missing required field or a wrong type is a validation error:
the message can never be read and goes to the dead-letter topic. A time field is :data:`Rfc3339Time` in every
group (the envelope's own validation, shared), so what one group refuses no other group handles.
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
    try:
        return enum(raw)
    except ValueError:
        return None
