"""catalog's cards and which purchase targets are theirs (seed 002; SPEC section 7). No IO."""

from __future__ import annotations

from enum import StrEnum

from pin.boost.domain import TargetKind


class CardKind(StrEnum):
    """The cards catalog keeps a boost for."""

    PROJECT = "Project"
    PROPERTY_OBJECT = "PropertyObject"


def card_kind_of(target: TargetKind) -> CardKind | None:
    """The card a target boosts in catalog, or None for another context's target."""
    return {TargetKind.PROJECT: CardKind.PROJECT, TargetKind.PROPERTY_OBJECT: CardKind.PROPERTY_OBJECT}.get(target)
