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
    # A successor (a breaking change: docs/runbooks/contract-migration.md) names the contract it replaces: the same
    # EVENT_TYPE and KEY_FIELD, CONTRACT_VERSION one more, its own topic ending in ".v<CONTRACT_VERSION>", its own
    # committed schema. During the event type's migration window the outbox writes both rows of each event.
    PREDECESSOR: ClassVar[type[Contract] | None] = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Register a successor with its predecessor (checked: a successor that breaks the rules is refused)."""
        super().__pydantic_init_subclass__(**kwargs)
        predecessor = cls.__dict__.get("PREDECESSOR")
        if predecessor is not None:
            _register_successor(predecessor, cls)

    @classmethod
    def from_predecessor(cls, payload: Mapping[str, Any]) -> dict[str, Any]:
        """A successor's payload of the event its predecessor's ``payload`` describes (contract names, no envelope):
        the dual write's second row. Every successor defines it."""
        raise NotImplementedError(f"{cls.__name__} defines no from_predecessor")

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


# predecessor -> its successor (registered when the successor's class is defined)
_SUCCESSORS: dict[type[Contract], type[Contract]] = {}


def _register_successor(predecessor: type[Contract], successor: type[Contract]) -> None:
    version = successor.CONTRACT_VERSION
    problems = [
        text
        for broken, text in (
            (successor.EVENT_TYPE != predecessor.EVENT_TYPE, "keeps its predecessor's EVENT_TYPE"),
            (successor.KEY_FIELD != predecessor.KEY_FIELD, "keeps its predecessor's KEY_FIELD"),
            (version != predecessor.CONTRACT_VERSION + 1, "has CONTRACT_VERSION one more than its predecessor's"),
            (not successor.TOPIC.endswith(f".v{version}"), f"has its own topic ending in .v{version}"),
            (successor.TOPIC == predecessor.TOPIC, "has its own topic"),
            ("from_predecessor" not in successor.__dict__, "defines from_predecessor"),
            (_SUCCESSORS.get(predecessor, successor) is not successor, "is the only successor of its predecessor"),
        )
        if broken
    ]
    if problems:
        raise TypeError(f"{successor.__name__} is not a successor of {predecessor.__name__}: it " + "; ".join(problems))
    _SUCCESSORS[predecessor] = successor


def successor_of(contract: type[Contract]) -> type[Contract] | None:
    """The contract that replaces ``contract`` (its v2), or None."""
    return _SUCCESSORS.get(contract)


def successions() -> dict[str, tuple[type[Contract], type[Contract]]]:
    """Every event type with a successor: its contract and the successor, by event type."""
    return {old.EVENT_TYPE: (old, new) for old, new in _SUCCESSORS.items()}


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
