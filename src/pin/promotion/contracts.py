"""The promotion contract PromotionPurchaseChangedKafkaEvent (SPEC section 6): a purchase's full snapshot.

``python -m pin.promotion.contracts [DIR]`` writes its JSON Schema and AsyncAPI document (default docs/contracts).
"""

from __future__ import annotations

import functools
import sys
import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, PlainSerializer, WithJsonSchema

from pin.messaging import topics
from pin.messaging.contract_docs import ContractSet
from pin.messaging.contracts import Contract, UtcDateTime, utc_iso
from pin.promotion.domain import PaymentStatus, PromotionPurchase, PurchaseStatus, TargetKind

_CENT = Decimal("0.01")


@functools.lru_cache(maxsize=256)  # a package's price: the purchases of a batch share a few
def _amount_text(value: Decimal) -> str:
    return str(value.quantize(_CENT))


# The text of an id that many purchases share (their package's, their currency's), written once.
_shared_id_text = functools.lru_cache(maxsize=256)(str)


# A decimal amount written as a string with two decimals ("1500.00"): no float rounding on any consumer.
AmountText = Annotated[
    Decimal,
    PlainSerializer(_amount_text, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": r"^-?[0-9]+\.[0-9]{2}$"}),
]


class ContractPart(BaseModel):
    """A nested part of a contract: PascalCase keys like the contract itself."""

    model_config = Contract.model_config


class CurrencySnapshot(ContractPart):
    """The currency as it was at activation: Code (ISO 4217) and Symbol."""

    code: str
    symbol: str


class PriceSnapshot(ContractPart):
    """Price {Amount, CurrencyId, Currency}."""

    amount: AmountText
    currency_id: uuid.UUID
    currency: CurrencySnapshot


class PurchaseTarget(ContractPart):
    """One promoted target {TargetKind, TargetId}."""

    target_kind: TargetKind
    target_id: uuid.UUID


class PromotionPurchaseChangedKafkaEvent(Contract):
    """pin.promotion.purchase-changed: a purchase became Active, Expired or Cancelled (seed 002)."""

    TOPIC: ClassVar[str] = topics.PURCHASE_CHANGED
    EVENT_TYPE: ClassVar[str] = "pin.promotion.purchase-changed"
    KEY_FIELD: ClassVar[str] = "purchase_id"  # per-purchase order

    purchase_id: uuid.UUID
    tenant_id: uuid.UUID
    buyer_user_id: uuid.UUID  # additive: the manager notifications tells «срок истёк»
    package_id: uuid.UUID
    package_code: str
    package_kind: str
    targets: tuple[PurchaseTarget, ...]
    status: PurchaseStatus
    payment_status: PaymentStatus
    boost_weight: int
    starts_at: UtcDateTime
    ends_at: UtcDateTime
    price: PriceSnapshot
    version: int

    @classmethod
    def payload_of(cls, purchase: PromotionPurchase) -> dict[str, Any]:
        """The contract's payload of a purchase's snapshot: the one builder of this contract (the HTTP use cases
        and the expire-promotions batch, 200 per cycle, alike). The model's fields in its order under their
        contract names, written as the model's JSON dump writes them, built straight from the aggregate without
        building and dumping the model; tests/promotion/test_domain.py checks it against the committed schema and
        the model.

        The aggregate's fields are already typed; the one check the model makes that they do not carry is that
        every time is timezone-aware.
        """
        price = purchase.price
        return {
            "PurchaseId": str(purchase.id),
            "TenantId": str(purchase.tenant_id),
            "BuyerUserId": str(purchase.buyer_user_id),
            "PackageId": _shared_id_text(purchase.package_id),
            "PackageCode": purchase.package_code,
            "PackageKind": purchase.package_kind,
            "Targets": [{"TargetKind": t.kind.value, "TargetId": str(t.id)} for t in purchase.targets],
            "Status": purchase.status.value,
            "PaymentStatus": purchase.payment_status.value,
            "BoostWeight": purchase.boost_weight,
            "StartsAt": _aware_iso(purchase.starts_at),
            "EndsAt": _aware_iso(purchase.ends_at),
            "Price": {
                "Amount": _amount_text(price.amount),
                "CurrencyId": _shared_id_text(price.currency_id),
                "Currency": {"Code": price.currency_code, "Symbol": price.currency_symbol},
            },
            "Version": purchase.version,
        }


def _aware_iso(value: datetime) -> str:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("a contract time must be timezone-aware")  # what the model's AwareDatetime refuses
    return utc_iso(value)


DOCUMENTS = ContractSet(
    "promotion", "PIN promotion integration events", (PromotionPurchaseChangedKafkaEvent,), lambda _: "PurchaseId"
)


if __name__ == "__main__":
    raise SystemExit(DOCUMENTS.main(sys.argv[1:]))
