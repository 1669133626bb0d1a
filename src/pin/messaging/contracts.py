"""The base of every integration-event contract (SPEC section 6).

A contract is a pydantic model whose JSON keys are the contract's field names exactly (PascalCase, as in
seed 003). The envelope fields MessageId, ContractVersion and OccurredAt are added by the outbox writer.
"""

from __future__ import annotations

from datetime import UTC, datetime
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

    def to_payload(self) -> dict[str, Any]:
        """The contract's fields as JSON-ready values under their contract names."""
        payload: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return payload
