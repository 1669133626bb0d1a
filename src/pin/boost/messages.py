"""The boost's tolerant-reader view of pin.promotion.purchase-changed (seed 002, «Межсервисные последовательности»)."""

from __future__ import annotations

import uuid

from pin.messaging.tolerant import TolerantModel


class PurchaseTarget(TolerantModel):
    """One target of a purchase; TargetKind is kept raw (additive upstream)."""

    target_kind: str
    target_id: uuid.UUID


class PurchaseChanged(TolerantModel):
    """The fields the boost needs."""

    purchase_id: uuid.UUID
    tenant_id: uuid.UUID
    targets: list[PurchaseTarget]
    status: str
    boost_weight: int
    version: int
