"""The promotion purchase aggregate (SPEC section 3): its states, transitions and invariants. No IO.

A purchase is created Active and ends once, Expired by expire-promotions or Cancelled by its company's manager;
INV-6 TerminalFrozen: nothing leaves Expired or Cancelled. Every transition bumps Version and records PurchaseChanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum

from pin.domain_errors import DocumentedError

# A request may promote at most this many targets at once.
MAX_TARGETS = 100


class PurchaseStatus(StrEnum):
    """Where a purchase is in its life; Expired and Cancelled are terminal (INV-6)."""

    ACTIVE = "Active"  # boosting its targets until EndsAt
    EXPIRED = "Expired"  # EndsAt passed; set by expire-promotions only
    CANCELLED = "Cancelled"  # ended early by the company's manager

    @property
    def is_terminal(self) -> bool:
        """INV-6 TerminalFrozen: no transition out of this status."""
        return self is not PurchaseStatus.ACTIVE


class PaymentStatus(StrEnum):
    """Payment of a purchase; activation without payment is the only mode (decision No. 10)."""

    NOT_REQUIRED = "NotRequired"


class TargetKind(StrEnum):
    """What a purchase promotes: cards of catalog (Project, PropertyObject) or news posts (Post)."""

    PROJECT = "Project"
    PROPERTY_OBJECT = "PropertyObject"
    POST = "Post"


class DomainError(DocumentedError):
    """A rule of the promotion context was broken; the docstring of each subclass is its message."""


class PurchaseTerminalError(DomainError):
    """The purchase is already Expired or Cancelled (INV-6 TerminalFrozen)."""


class PurchaseNotDueError(DomainError):
    """The purchase's EndsAt is still in the future; it cannot expire yet."""


class PurchaseHasNoTargetsError(DomainError):
    """The purchase has no targets; a purchase always promotes at least one."""


class NoTargetsError(DomainError):
    """At least one target is required."""


class TooManyTargetsError(DomainError):
    """Too many targets in one purchase."""


class DuplicateTargetError(DomainError):
    """The same target is listed twice."""


class UnknownTargetKindError(DomainError):
    """Unknown target kind; expected Project, PropertyObject or Post."""


class EndsAtNotInFutureError(DomainError):
    """endsAt must be in the future."""


class EndsAtBeyondPackageError(DomainError):
    """endsAt may only shorten the package's duration, not extend it."""


class PackageNotOnOfferError(DomainError):
    """The package is not on offer."""


class UnknownPackageError(DomainError):
    """Unknown package."""


class PurchaseNotFoundError(DomainError):
    """No such purchase."""


class VersionMismatchError(DomainError):
    """The purchase's version is not the one If-Match names."""


class VersionConflictError(DomainError):
    """The purchase changed since it was read; read it again."""


@dataclass(frozen=True)
class Money:
    """A price with its currency snapshot (Price {Amount, CurrencyId, Currency {Code, Symbol}})."""

    amount: Decimal
    currency_id: uuid.UUID
    currency_code: str
    currency_symbol: str


@dataclass(frozen=True)
class Package:
    """A promotion package on offer (reference data of the promotion context)."""

    id: uuid.UUID
    code: str
    kind: str
    boost_weight: int
    duration: timedelta
    price: Money
    on_offer: bool = True


@dataclass(frozen=True)
class Target:
    """One promoted target: a logical reference into another context (no FK)."""

    kind: TargetKind
    id: uuid.UUID

    @classmethod
    def parse(cls, kind: str, target_id: uuid.UUID) -> Target:
        """A target from request input; an unknown kind is a domain error, not a crash."""
        if kind not in TargetKind._value2member_map_:
            raise UnknownTargetKindError
        return cls(TargetKind(kind), target_id)


@dataclass(frozen=True)
class PurchaseChanged:
    """A purchase changed status (activated, expired or cancelled): becomes PromotionPurchaseChangedKafkaEvent."""

    purchase: PromotionPurchase
    occurred_at: datetime


@dataclass
class PromotionPurchase:
    """The aggregate: a company's activation of a package for some targets."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    buyer_user_id: uuid.UUID
    package_id: uuid.UUID
    package_code: str
    package_kind: str
    boost_weight: int
    price: Money
    targets: tuple[Target, ...]
    starts_at: datetime
    ends_at: datetime
    status: PurchaseStatus
    payment_status: PaymentStatus
    version: int
    created_at: datetime
    updated_at: datetime
    events: list[PurchaseChanged] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def activate(
        cls,
        *,
        purchase_id: uuid.UUID,
        tenant_id: uuid.UUID,
        buyer_user_id: uuid.UUID,
        package: Package,
        targets: Sequence[Target],
        now: datetime,
        requested_ends_at: datetime | None = None,
    ) -> PromotionPurchase:
        """Activate a package (decision No. 10): Active at once, StartsAt = now, EndsAt = now + Duration or earlier."""
        if not package.on_offer:
            raise PackageNotOnOfferError
        checked = _checked_targets(targets)
        ends_at = _ends_at(package, now, requested_ends_at)
        purchase = cls(
            id=purchase_id,
            tenant_id=tenant_id,
            buyer_user_id=buyer_user_id,
            package_id=package.id,
            package_code=package.code,
            package_kind=package.kind,
            boost_weight=package.boost_weight,
            price=package.price,
            targets=checked,
            starts_at=now,
            ends_at=ends_at,
            status=PurchaseStatus.ACTIVE,
            payment_status=PaymentStatus.NOT_REQUIRED,
            version=1,
            created_at=now,
            updated_at=now,
        )
        purchase.events.append(PurchaseChanged(purchase.snapshot(), now))
        return purchase

    def expire(self, as_of: datetime) -> None:
        """Active -> Expired when ``EndsAt <= AsOf`` (seed 002, step 3); UpdatedAt = AsOf, Version + 1."""
        self._require_active()
        if self.ends_at > as_of:
            raise PurchaseNotDueError
        if not self.targets:
            raise PurchaseHasNoTargetsError  # A2: an unexpected state is a poison item, never a half-empty event
        self._transition(PurchaseStatus.EXPIRED, as_of)

    def cancel(self, now: datetime) -> None:
        """Active -> Cancelled by the company's manager."""
        self._require_active()
        self._transition(PurchaseStatus.CANCELLED, now)

    def snapshot(self) -> PromotionPurchase:
        """A copy without recorded events (what an event carries)."""
        # the fields as they are, without dataclasses.replace's call of __init__ by keyword (200 per batch)
        copy = object.__new__(PromotionPurchase)
        copy.__dict__.update(self.__dict__)
        copy.events = []
        return copy

    def _require_active(self) -> None:
        if self.status.is_terminal:
            raise PurchaseTerminalError  # INV-6 TerminalFrozen

    def _transition(self, status: PurchaseStatus, at: datetime) -> None:
        self.status = status
        self.version += 1
        self.updated_at = at
        self.events.append(PurchaseChanged(self.snapshot(), at))


def _checked_targets(targets: Sequence[Target]) -> tuple[Target, ...]:
    if not targets:
        raise NoTargetsError
    if len(targets) > MAX_TARGETS:
        raise TooManyTargetsError(f"at most {MAX_TARGETS} targets per purchase")
    if len(set(targets)) != len(targets):
        raise DuplicateTargetError
    return tuple(targets)


def _ends_at(package: Package, now: datetime, requested: datetime | None) -> datetime:
    full_term = now + package.duration
    if requested is None:
        return full_term
    if requested <= now:
        raise EndsAtNotInFutureError
    if requested > full_term:
        raise EndsAtBeyondPackageError
    return requested
