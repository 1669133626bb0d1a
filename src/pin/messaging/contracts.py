"""The base of every integration-event contract (SPEC section 6).

A contract is a pydantic model whose JSON keys are the contract's field names exactly (PascalCase, as in
seed 003). The envelope fields MessageId, ContractVersion and OccurredAt are added by the outbox writer.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any, ClassVar

from pydantic import AliasGenerator, AwareDatetime, BaseModel, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_pascal


def utc_iso(value: datetime) -> str:
    """ISO 8601 in UTC with a Z suffix: how every time in every contract is written."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# A timezone-aware time, serialized as ISO 8601 UTC ("2026-11-29T10:00:00Z").
UtcDateTime = Annotated[AwareDatetime, PlainSerializer(utc_iso, return_type=str, when_used="json")]


class Contract(BaseModel):
    """An integration event: its topic, its Kafka key and its payload fields."""

    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        alias_generator=AliasGenerator(serialization_alias=to_pascal, validation_alias=to_pascal),
    )

    TOPIC: ClassVar[str]
    EVENT_TYPE: ClassVar[str]
    CONTRACT_VERSION: ClassVar[int] = 1
    # the field whose value is the Kafka key: the aggregate id the contract names (its per-aggregate order)
    KEY_FIELD: ClassVar[str]

    def message_key(self) -> str:
        """The Kafka key: the value of the contract's KEY_FIELD."""
        return str(getattr(self, self.KEY_FIELD))

    def recorded(self) -> tuple[type[Contract], str, dict[str, Any]]:
        """The event as the unit of work records it: its contract, Kafka key and payload (``uow.record(*e.recorded(),
        occurred_at)``), the form a payload builder gives without the model."""
        return type(self), self.message_key(), self.to_payload()

    def to_payload(self) -> dict[str, Any]:
        """The contract's fields as JSON-ready values under their contract names."""
        payload: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return payload

    @classmethod
    def payload_from(cls, fields: Mapping[str, object]) -> dict[str, Any]:
        """``cls(**fields).to_payload()`` without building and dumping the model, for fields that already have the
        model's types (a domain event's): the model's fields in its order under their contract names, a UUID as
        its text, an enum as its value, a time (timezone-aware, as the model requires) as :func:`utc_iso`.

        A value of any other type, a naive time or a missing required field goes through the model (which then
        converts it, or refuses it as it always did). Keys of ``fields`` that are not fields of the model are
        ignored, as the model ignores them.
        """
        payload: dict[str, Any] = {}
        for name, alias, default in _plan(cls):
            value = fields.get(name, default)
            kind = type(value)
            if kind is uuid.UUID:
                value = str(value)
            elif isinstance(value, datetime) and kind is datetime and value.utcoffset() is not None:
                value = utc_iso(value)
            elif isinstance(value, Enum) and type(value.value) in _AS_IS:
                value = value.value
            elif kind not in _AS_IS:  # a naive time, a missing field, anything else: the model decides
                return cls(**{key: v for key, v in fields.items() if key in cls.model_fields}).to_payload()
            payload[alias] = value
        return payload


# values a contract's JSON payload holds as they are
_AS_IS = frozenset({str, int, bool, type(None)})
_MISSING = object()


@functools.cache
def _plan(cls: type[Contract]) -> tuple[tuple[str, str, object], ...]:
    """Each field of a contract, in order: its name, its contract name and its default (_MISSING when required)."""
    plan = []
    for name, info in cls.model_fields.items():
        alias = info.serialization_alias or info.alias or name
        plan.append((name, alias, _MISSING if info.is_required() else info.get_default(call_default_factory=True)))
    return tuple(plan)
