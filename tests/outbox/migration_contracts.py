"""The tests' own contract pair for the breaking-change procedure: v1 and v2 of a sample event, v2 renaming a field.

Never published by PIN: the real contracts' bytes and topics are not touched (docs/runbooks/contract-migration.md
walks through the same steps for a real one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pin.messaging.contract_docs import ContractSet
from pin.messaging.contracts import Contract

SAMPLE_V1_TOPIC = "pin.test.sample-changed.v1"
SAMPLE_V2_TOPIC = "pin.test.sample-changed.v2"
SAMPLE_EVENT_TYPE = "pin.test.sample-changed"


class SampleChanged(Contract):
    """A sample aggregate changed colour (v1)."""

    TOPIC: ClassVar[str] = SAMPLE_V1_TOPIC
    EVENT_TYPE: ClassVar[str] = SAMPLE_EVENT_TYPE
    KEY_FIELD: ClassVar[str] = "sample_id"

    sample_id: str
    seq: int
    colour: str


class SampleChangedV2(Contract):
    """A sample aggregate changed colour (v2: ``Colour`` is renamed ``Color``, a breaking change)."""

    TOPIC: ClassVar[str] = SAMPLE_V2_TOPIC
    EVENT_TYPE: ClassVar[str] = SAMPLE_EVENT_TYPE
    CONTRACT_VERSION: ClassVar[int] = 2
    KEY_FIELD: ClassVar[str] = "sample_id"
    PREDECESSOR: ClassVar[type[Contract] | None] = SampleChanged

    sample_id: str
    seq: int
    color: str

    @classmethod
    def from_predecessor(cls, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The v1 payload with Colour renamed Color."""
        return {"SampleId": payload["SampleId"], "Seq": payload["Seq"], "Color": payload["Colour"]}


SAMPLE_DOCUMENTS = ContractSet(
    "sample", "PIN test sample events", (SampleChanged, SampleChangedV2), lambda _contract: "SampleId"
)
