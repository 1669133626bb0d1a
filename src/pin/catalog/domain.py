"""catalog's boost rules (seed 002; SPEC section 7). No IO."""

from __future__ import annotations

from enum import StrEnum


class CardKind(StrEnum):
    """The cards catalog keeps a boost for."""

    PROJECT = "Project"
    PROPERTY_OBJECT = "PropertyObject"


class TargetKind(StrEnum):
    """TargetKind of a purchase as catalog knows it (Post belongs to news)."""

    PROJECT = "Project"
    PROPERTY_OBJECT = "PropertyObject"
    POST = "Post"


class PurchaseStatus(StrEnum):
    """Status of a promotion purchase."""

    ACTIVE = "Active"
    EXPIRED = "Expired"
    CANCELLED = "Cancelled"


def contributes(status: PurchaseStatus | None) -> bool:
    """Only an Active purchase boosts; Expired, Cancelled and a status catalog does not know do not (fail safe)."""
    return status is PurchaseStatus.ACTIVE


def card_kind_of(target: TargetKind) -> CardKind | None:
    """The card a target boosts in catalog, or None for another context's target."""
    return {TargetKind.PROJECT: CardKind.PROJECT, TargetKind.PROPERTY_OBJECT: CardKind.PROPERTY_OBJECT}.get(target)
