"""The purchase aggregate alone (no IO): activation rules, transitions, INV-6, versions and recorded events."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.promotion.domain import (
    MAX_TARGETS,
    DuplicateTargetError,
    EndsAtBeyondPackageError,
    EndsAtNotInFutureError,
    Money,
    NoTargetsError,
    Package,
    PackageNotOnOfferError,
    PaymentStatus,
    PromotionPurchase,
    PurchaseHasNoTargetsError,
    PurchaseNotDueError,
    PurchaseStatus,
    PurchaseTerminalError,
    Target,
    TargetKind,
    TooManyTargetsError,
    UnknownTargetKindError,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
PACKAGE = Package(
    id=uuid.uuid4(),
    code="TOP-1D",
    kind="Top",
    boost_weight=50,
    duration=timedelta(days=1),
    price=Money(Decimal("990.00"), uuid.uuid4(), "RUB", "₽"),
)


def _activate(*targets: Target, ends_at: datetime | None = None, package: Package = PACKAGE) -> PromotionPurchase:
    return PromotionPurchase.activate(
        purchase_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        buyer_user_id=uuid.uuid4(),
        package=package,
        targets=list(targets) or [Target(TargetKind.PROJECT, uuid.uuid4())],
        now=NOW,
        requested_ends_at=ends_at,
    )


def test_activation_is_active_at_once_and_free_for_the_package_duration() -> None:
    purchase = _activate()

    assert (purchase.status, purchase.payment_status, purchase.version) == (
        PurchaseStatus.ACTIVE,
        PaymentStatus.NOT_REQUIRED,
        1,
    )
    assert (purchase.starts_at, purchase.ends_at) == (NOW, NOW + timedelta(days=1))
    assert (purchase.package_code, purchase.package_kind, purchase.boost_weight) == ("TOP-1D", "Top", 50)
    (event,) = purchase.events
    assert (event.purchase.status, event.purchase.version, event.occurred_at) == (PurchaseStatus.ACTIVE, 1, NOW)


def test_an_earlier_ends_at_shortens_the_term() -> None:
    assert _activate(ends_at=NOW + timedelta(minutes=5)).ends_at == NOW + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("ends_at", "error"),
    [
        (NOW, EndsAtNotInFutureError),
        (NOW - timedelta(seconds=1), EndsAtNotInFutureError),
        (NOW + timedelta(days=1, seconds=1), EndsAtBeyondPackageError),
    ],
)
def test_ends_at_must_be_in_the_future_and_within_the_package(ends_at: datetime, error: type[Exception]) -> None:
    with pytest.raises(error):
        _activate(ends_at=ends_at)


def test_targets_are_checked() -> None:
    target = Target(TargetKind.POST, uuid.uuid4())
    with pytest.raises(NoTargetsError):
        PromotionPurchase.activate(
            purchase_id=uuid.uuid4(),
            tenant_id=uuid.uuid4(),
            buyer_user_id=uuid.uuid4(),
            package=PACKAGE,
            targets=[],
            now=NOW,
        )
    with pytest.raises(DuplicateTargetError):
        _activate(target, target)
    with pytest.raises(TooManyTargetsError):
        _activate(*[Target(TargetKind.POST, uuid.uuid4()) for _ in range(MAX_TARGETS + 1)])
    with pytest.raises(UnknownTargetKindError):
        Target.parse("Villa", uuid.uuid4())
    assert Target.parse("PropertyObject", target.id) == Target(TargetKind.PROPERTY_OBJECT, target.id)


def test_a_withdrawn_package_cannot_be_activated() -> None:
    withdrawn = Package(**{**PACKAGE.__dict__, "on_offer": False})
    with pytest.raises(PackageNotOnOfferError):
        _activate(package=withdrawn)


def test_expire_needs_ends_at_reached_and_records_the_event() -> None:
    purchase = _activate()
    purchase.events.clear()
    with pytest.raises(PurchaseNotDueError):
        purchase.expire(purchase.ends_at - timedelta(microseconds=1))

    purchase.expire(purchase.ends_at)  # EndsAt <= AsOf

    assert (purchase.status, purchase.version, purchase.updated_at) == (PurchaseStatus.EXPIRED, 2, purchase.ends_at)
    (event,) = purchase.events
    assert (event.purchase.status, event.purchase.version) == (PurchaseStatus.EXPIRED, 2)


def test_cancel_moves_active_to_cancelled() -> None:
    purchase = _activate()
    purchase.cancel(NOW + timedelta(hours=1))
    assert (purchase.status, purchase.version) == (PurchaseStatus.CANCELLED, 2)


@pytest.mark.parametrize("terminal", ["expire", "cancel"])
def test_inv6_nothing_leaves_a_terminal_status(terminal: str) -> None:
    purchase = _activate()
    if terminal == "expire":
        purchase.expire(purchase.ends_at)
    else:
        purchase.cancel(NOW)
    with pytest.raises(PurchaseTerminalError):
        purchase.expire(purchase.ends_at + timedelta(days=1))
    with pytest.raises(PurchaseTerminalError):
        purchase.cancel(purchase.ends_at)
    assert purchase.version == 2


def test_a_purchase_without_targets_is_a_poison_for_the_worker() -> None:
    purchase = _activate()
    purchase.targets = ()
    with pytest.raises(PurchaseHasNoTargetsError):
        purchase.expire(purchase.ends_at)
    assert purchase.status is PurchaseStatus.ACTIVE


def test_the_event_snapshot_is_not_changed_by_later_transitions() -> None:
    purchase = _activate()
    activated = purchase.events[0].purchase
    purchase.cancel(NOW)
    payload = PromotionPurchaseChangedKafkaEvent.payload_of(activated)
    assert (payload["Status"], payload["Version"]) == ("Active", 1)
    assert PromotionPurchaseChangedKafkaEvent.payload_of(purchase)["Status"] == "Cancelled"
