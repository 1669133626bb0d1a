"""The promotion contract's one payload builder (``payload_of``) writes what the committed schema publishes and
the model reads.

Each payload is checked three ways: against the committed JSON Schema (docs/contracts), by the model reading it
back to the purchase's values, and by the model writing it again to the same bytes.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import jsonschema_rs
import pytest

from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.promotion.domain import Money, Package, PromotionPurchase, Target, TargetKind

pytestmark = pytest.mark.unit

EVENT = PromotionPurchaseChangedKafkaEvent
SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "contracts" / "pin.promotion.purchase-changed.v1.schema.json"
# the envelope the outbox writer adds around every payload (the committed schema requires it)
_ENVELOPE = {"MessageId": str(uuid.uuid4()), "ContractVersion": 1, "OccurredAt": "2026-01-01T00:00:00Z"}
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def _validator() -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")), validate_formats=True)


def _purchase(amount: Decimal, at: datetime) -> PromotionPurchase:
    package = Package(
        id=uuid.uuid4(), code="TOP-1D", kind="Top", boost_weight=50, duration=timedelta(days=1),
        price=Money(amount, uuid.uuid4(), "RUB", "₽"),
    )  # fmt: skip
    return PromotionPurchase.activate(
        purchase_id=uuid.uuid4(), tenant_id=uuid.uuid4(), buyer_user_id=uuid.uuid4(), package=package,
        targets=[Target(kind, uuid.uuid4()) for kind in TargetKind], now=at,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("amount", "at", "text"),
    [
        (Decimal("990"), NOW, "990.00"),
        (Decimal("0.5"), NOW.astimezone(timezone(timedelta(hours=3))), "0.50"),  # another offset: written in UTC
        (Decimal("12.345"), NOW.replace(microsecond=123456), "12.34"),  # two decimals, banker's rounding
    ],
)
def test_the_payload_of_a_purchase_is_its_published_contract(amount: Decimal, at: datetime, text: str) -> None:
    purchase = _purchase(amount, at)
    purchase.expire(purchase.ends_at)

    for event in purchase.events:
        snapshot = event.purchase
        payload = EVENT.payload_of(snapshot)

        assert [e.message for e in _validator().iter_errors({**payload, **_ENVELOPE})] == []
        read = EVENT.model_validate(payload)
        assert (read.purchase_id, read.tenant_id, read.buyer_user_id, read.package_id) == (
            snapshot.id, snapshot.tenant_id, snapshot.buyer_user_id, snapshot.package_id,
        )  # fmt: skip
        assert (read.package_code, read.package_kind, read.boost_weight, read.version) == (
            "TOP-1D",
            "Top",
            50,
            snapshot.version,
        )
        assert (read.status, read.payment_status) == (snapshot.status, snapshot.payment_status)
        assert (read.starts_at, read.ends_at) == (snapshot.starts_at, snapshot.ends_at)
        assert [(t.target_kind, t.target_id) for t in read.targets] == [(t.kind, t.id) for t in snapshot.targets]
        price = snapshot.price
        assert (read.price.currency_id, read.price.currency.code, read.price.currency.symbol) == (
            price.currency_id, "RUB", "₽",
        )  # fmt: skip
        assert payload["Price"]["Amount"] == text
        assert payload["StartsAt"].endswith("Z")
        assert payload["PurchaseId"] == read.message_key() == str(snapshot.id)
        assert json.dumps(read.to_payload()) == json.dumps(payload)  # the same keys, in the same order, the same text
    assert [event.purchase.status.value for event in purchase.events] == ["Active", "Expired"]


def test_a_payload_with_a_naive_time_is_refused() -> None:
    purchase = _purchase(Decimal(1), NOW)
    purchase.ends_at = purchase.ends_at.replace(tzinfo=None)

    with pytest.raises(ValueError, match="timezone-aware"):
        EVENT.payload_of(purchase)
