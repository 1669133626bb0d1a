"""The promotion's HTTP routes (SPEC section 9), for managers of the purchase's own company only (another
tenant's purchase answers 404, as a missing one does)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Response
from pydantic import PlainSerializer

from pin.api.auth import Principal, Role, require_roles
from pin.api.bodies import RequestBody, ResponseBody, Rfc3339, UtcTime, Uuid
from pin.api.deps import CorrelationId, IfMatch, Outbox, Pool, tagged
from pin.api.problems import DomainProblem, ProblemTable
from pin.promotion import domain, service
from pin.promotion.domain import Money, Package, PromotionPurchase

router = APIRouter(prefix="/promotions", tags=["promotion"])

# How the promotion's domain errors answer (pin.api.problems looks an error up along its MRO: DomainError last).
PROBLEMS: ProblemTable = {
    domain.UnknownPackageError: DomainProblem(422, "unknown-package"),
    domain.PackageNotOnOfferError: DomainProblem(422, "package-not-on-offer"),
    domain.NoTargetsError: DomainProblem(422, "no-targets"),
    domain.TooManyTargetsError: DomainProblem(422, "too-many-targets"),
    domain.DuplicateTargetError: DomainProblem(422, "duplicate-target"),
    domain.UnknownTargetKindError: DomainProblem(422, "unknown-target-kind"),
    domain.EndsAtNotInFutureError: DomainProblem(422, "ends-at-not-in-future"),
    domain.EndsAtBeyondPackageError: DomainProblem(422, "ends-at-beyond-package"),
    domain.PurchaseNotFoundError: DomainProblem(404, "purchase-not-found"),
    domain.PurchaseTerminalError: DomainProblem(409, "purchase-terminal"),
    domain.VersionMismatchError: DomainProblem(412, "version-mismatch"),
    domain.VersionConflictError: DomainProblem(409, "version-conflict"),
    domain.DomainError: DomainProblem(409, "conflict"),
}

Manager = Annotated[Principal, require_roles(Role.MANAGER)]


class TargetBody(RequestBody):
    """One target of an activation request."""

    target_kind: str
    target_id: Uuid


class ActivateBody(RequestBody):
    """POST /promotions: a package for some targets, optionally ending earlier than the package's duration."""

    package_id: Uuid
    targets: list[TargetBody]
    ends_at: Rfc3339 | None = None


# An amount of money is a decimal string with two places ("1500.00"), never a JSON number.
Amount = Annotated[Decimal, PlainSerializer(lambda amount: f"{amount:.2f}", return_type=str)]


class CurrencyOut(ResponseBody):
    """The currency snapshot of a price."""

    code: str
    symbol: str


class PriceOut(ResponseBody):
    """A price: Price {Amount, CurrencyId, Currency {Code, Symbol}}."""

    amount: Amount
    currency_id: uuid.UUID
    currency: CurrencyOut

    @classmethod
    def of(cls, price: Money) -> PriceOut:
        """The price as the API shows it."""
        currency = CurrencyOut(code=price.currency_code, symbol=price.currency_symbol)
        return cls(amount=price.amount, currency_id=price.currency_id, currency=currency)


class PackageOut(ResponseBody):
    """A package on offer."""

    id: uuid.UUID
    code: str
    kind: str
    boost_weight: int
    duration_seconds: int
    price: PriceOut

    @classmethod
    def of(cls, package: Package) -> PackageOut:
        """The package as the API shows it."""
        seconds = int(package.duration.total_seconds())
        return cls(
            id=package.id,
            code=package.code,
            kind=package.kind,
            boost_weight=package.boost_weight,
            duration_seconds=seconds,
            price=PriceOut.of(package.price),
        )


class TargetOut(ResponseBody):
    """A promoted target."""

    target_kind: domain.TargetKind
    target_id: uuid.UUID


class PurchaseOut(ResponseBody):
    """A promotion purchase."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    buyer_user_id: uuid.UUID
    package_id: uuid.UUID
    package_code: str
    package_kind: str
    boost_weight: int
    price: PriceOut
    targets: list[TargetOut]
    starts_at: UtcTime
    ends_at: UtcTime
    status: domain.PurchaseStatus
    payment_status: domain.PaymentStatus
    version: int
    created_at: UtcTime
    updated_at: UtcTime

    @classmethod
    def of(cls, purchase: PromotionPurchase) -> PurchaseOut:
        """The purchase as the API shows it."""
        same = {name: getattr(purchase, name) for name in cls.model_fields if name not in {"price", "targets"}}
        targets = [TargetOut(target_kind=target.kind, target_id=target.id) for target in purchase.targets]
        return cls(**same, price=PriceOut.of(purchase.price), targets=targets)


def _purchase(response: Response, purchase: PromotionPurchase) -> PurchaseOut:
    return tagged(response, PurchaseOut.of(purchase), purchase.version)


@router.get("/packages", response_model=list[PackageOut])
def list_packages(pool: Pool, _: Manager) -> list[PackageOut]:
    """The packages on offer."""
    return [PackageOut.of(package) for package in service.list_packages(pool)]


@router.post("", status_code=201, response_model=PurchaseOut)
def activate(  # noqa: PLR0917 - FastAPI injects each dependency as a parameter
    body: ActivateBody, response: Response, pool: Pool, caller: Manager, correlation_id: CorrelationId, outbox: Outbox
) -> PurchaseOut:
    """Activate a package: the purchase is Active at once (decision No. 10)."""
    purchase = service.activate_purchase(
        pool,
        tenant_id=caller.tenant_id,
        buyer_user_id=caller.user_id,
        package_id=body.package_id,
        targets=[service.TargetInput(t.target_kind, t.target_id) for t in body.targets],
        ends_at=body.ends_at,
        correlation_id=correlation_id,
        outbox=outbox,
    )
    response.headers["Location"] = f"/promotions/{purchase.id}"
    return _purchase(response, purchase)


@router.get("/{purchase_id}", response_model=PurchaseOut)
def read(purchase_id: uuid.UUID, response: Response, pool: Pool, caller: Manager) -> PurchaseOut:
    """A purchase of the caller's company (ETag = its Version)."""
    return _purchase(response, service.get_purchase(pool, purchase_id=purchase_id, tenant_id=caller.tenant_id))


@router.post("/{purchase_id}/cancel", response_model=PurchaseOut)
def cancel(  # noqa: PLR0917 - FastAPI injects each dependency as a parameter
    purchase_id: uuid.UUID,
    response: Response,
    pool: Pool,
    caller: Manager,
    if_match: IfMatch,
    correlation_id: CorrelationId,
    outbox: Outbox,
) -> PurchaseOut:
    """Active -> Cancelled (If-Match: its Version, 412 on a mismatch); an Expired or Cancelled one answers 409."""
    purchase = service.cancel_purchase(
        pool,
        purchase_id=purchase_id,
        tenant_id=caller.tenant_id,
        if_match=if_match,
        correlation_id=correlation_id,
        outbox=outbox,
    )
    return _purchase(response, purchase)
