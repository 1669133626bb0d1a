"""Which purchases boost, and the targets they name (seed 002; SPEC section 7). No IO."""

from __future__ import annotations

from enum import StrEnum


class TargetKind(StrEnum):
    """TargetKind of a purchase (Project and PropertyObject are catalog's cards, Post is news')."""

    PROJECT = "Project"
    PROPERTY_OBJECT = "PropertyObject"
    POST = "Post"


class PurchaseStatus(StrEnum):
    """Status of a promotion purchase."""

    ACTIVE = "Active"
    EXPIRED = "Expired"
    CANCELLED = "Cancelled"


def contributes(status: PurchaseStatus | None) -> bool:
    """Only an Active purchase boosts; Expired, Cancelled and a status the consumer does not know do not (fail safe)."""
    return status is PurchaseStatus.ACTIVE
