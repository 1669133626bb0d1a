"""HTTP routes of the promotion context (SPEC section 9): parse, call one use case, map the result or error.

Every route needs the manager role; a purchase is visible to the managers of its own company only (another
tenant's purchase answers 404, as a missing one does). Responses carry ``ETag`` = Version; cancel honours
``If-Match`` (412 on a mismatch).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response

from pin.api.auth import Principal, Role, require_roles
from pin.api.bodies import RequestBody, Rfc3339, Uuid
from pin.api.deps import IfMatch, Pool, etag
from pin.api.problems import ApiProblem
from pin.messaging.contracts import utc_iso
from pin.promotion import domain, repository, service
from pin.promotion.domain import Package, PromotionPurchase

router = APIRouter(prefix="/promotions", tags=["promotion"])

Manager = Annotated[Principal, require_roles(Role.MANAGER)]

# The one place promotion errors become problem documents: (status, stable code).
_PROBLEMS: dict[type, tuple[int, str]] = {
    service.UnknownPackageError: (422, "unknown-package"),
    domain.PackageNotOnOfferError: (422, "package-not-on-offer"),
    domain.NoTargetsError: (422, "no-targets"),
    domain.TooManyTargetsError: (422, "too-many-targets"),
    domain.DuplicateTargetError: (422, "duplicate-target"),
    domain.UnknownTargetKindError: (422, "unknown-target-kind"),
    domain.EndsAtNotInFutureError: (422, "ends-at-not-in-future"),
    domain.EndsAtBeyondPackageError: (422, "ends-at-beyond-package"),
    service.PurchaseNotFoundError: (404, "purchase-not-found"),
    domain.PurchaseTerminalError: (409, "purchase-terminal"),
    service.VersionMismatchError: (412, "version-mismatch"),
    repository.VersionConflictError: (409, "version-conflict"),
    domain.DomainError: (409, "conflict"),  # any other rule of the aggregate: a state conflict
}


class TargetBody(RequestBody):
    """One target of an activation request."""

    target_kind: str
    target_id: Uuid


class ActivateBody(RequestBody):
    """POST /promotions: a package for some targets, optionally ending earlier than the package's duration."""

    package_id: Uuid
    targets: list[TargetBody]
    ends_at: Rfc3339 | None = None


@router.get("/packages")
def list_packages(pool: Pool, _: Manager) -> list[dict[str, Any]]:
    """The packages on offer."""
    return [_package_json(package) for package in service.list_packages(pool)]


@router.post("", status_code=201)
def activate(body: ActivateBody, request: Request, response: Response, pool: Pool, caller: Manager) -> dict[str, Any]:
    """Activate a package: the purchase is Active at once (decision No. 10)."""
    with _problems():
        purchase = service.activate_purchase(
            pool,
            tenant_id=caller.tenant_id,
            buyer_user_id=caller.user_id,
            package_id=body.package_id,
            targets=[service.TargetInput(t.target_kind, t.target_id) for t in body.targets],
            ends_at=body.ends_at,
            correlation_id=_correlation_id(request),
        )
    response.headers["Location"] = f"/promotions/{purchase.id}"
    return _purchase_response(purchase, response)


@router.get("/{purchase_id}")
def read(purchase_id: uuid.UUID, response: Response, pool: Pool, caller: Manager) -> dict[str, Any]:
    """A purchase of the caller's company."""
    with _problems():
        purchase = service.get_purchase(pool, purchase_id=purchase_id, tenant_id=caller.tenant_id)
    return _purchase_response(purchase, response)


@router.post("/{purchase_id}/cancel")
def cancel(  # noqa: PLR0917 - FastAPI injects each dependency as a parameter
    purchase_id: uuid.UUID, request: Request, response: Response, pool: Pool, caller: Manager, if_match: IfMatch
) -> dict[str, Any]:
    """Active -> Cancelled; a purchase already Expired or Cancelled answers 409."""
    with _problems():
        purchase = service.cancel_purchase(
            pool,
            purchase_id=purchase_id,
            tenant_id=caller.tenant_id,
            if_match=if_match,
            correlation_id=_correlation_id(request),
        )
    return _purchase_response(purchase, response)


@contextmanager
def _problems() -> Iterator[None]:
    """Map a promotion domain error to its problem document."""
    try:
        yield
    except domain.DomainError as exc:
        status, code = next(_PROBLEMS[t] for t in type(exc).__mro__ if t in _PROBLEMS)
        raise ApiProblem(status, code, str(exc)) from exc


def _correlation_id(request: Request) -> str:
    """The caller's X-Request-Id when it is a UUID (so it cannot carry free text), else a new one."""
    header = request.headers.get("x-request-id", "")
    try:
        return str(uuid.UUID(header))
    except ValueError:
        return str(uuid.uuid4())


def _purchase_response(purchase: PromotionPurchase, response: Response) -> dict[str, Any]:
    response.headers["ETag"] = etag(purchase.version)
    return _purchase_json(purchase)


def _purchase_json(purchase: PromotionPurchase) -> dict[str, Any]:
    return {
        "id": str(purchase.id),
        "tenantId": str(purchase.tenant_id),
        "buyerUserId": str(purchase.buyer_user_id),
        "packageId": str(purchase.package_id),
        "packageCode": purchase.package_code,
        "packageKind": purchase.package_kind,
        "boostWeight": purchase.boost_weight,
        "price": _price_json(purchase.price),
        "targets": [{"targetKind": t.kind.value, "targetId": str(t.id)} for t in purchase.targets],
        "startsAt": _time(purchase.starts_at),
        "endsAt": _time(purchase.ends_at),
        "status": purchase.status.value,
        "paymentStatus": purchase.payment_status.value,
        "version": purchase.version,
        "createdAt": _time(purchase.created_at),
        "updatedAt": _time(purchase.updated_at),
    }


def _package_json(package: Package) -> dict[str, Any]:
    return {
        "id": str(package.id),
        "code": package.code,
        "kind": package.kind,
        "boostWeight": package.boost_weight,
        "durationSeconds": int(package.duration.total_seconds()),
        "price": _price_json(package.price),
    }


def _price_json(price: domain.Money) -> dict[str, Any]:
    return {
        "amount": f"{price.amount:.2f}",
        "currencyId": str(price.currency_id),
        "currency": {"code": price.currency_code, "symbol": price.currency_symbol},
    }


def _time(value: datetime) -> str:
    return utc_iso(value)
