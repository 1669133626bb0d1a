"""Use cases of the promotion context: list packages, activate, read, cancel.

Each loads through a unit of work, calls the domain, and commits; the aggregate's recorded events become
PromotionPurchaseChangedKafkaEvent outbox rows in the same transaction. "Now" is the database clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now
from pin.observability.tracing import current_traceparent
from pin.outbox.writer import MessageContext, OutboxPolicy
from pin.promotion import repository
from pin.promotion.contracts import PromotionPurchaseChangedKafkaEvent
from pin.promotion.domain import (
    Package,
    PromotionPurchase,
    PurchaseNotFoundError,
    Target,
    UnknownPackageError,
    VersionMismatchError,
)
from pin.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class TargetInput:
    """A target as the request names it (the kind is checked by the domain)."""

    kind: str
    id: uuid.UUID


def list_packages(pool: ConnectionPool[Conn]) -> list[Package]:
    """The packages on offer."""
    with pool.connection() as conn:
        return repository.package_list_on_offer(conn)


def activate_purchase(
    pool: ConnectionPool[Conn],
    *,
    tenant_id: uuid.UUID,
    buyer_user_id: uuid.UUID,
    package_id: uuid.UUID,
    targets: Sequence[TargetInput],
    ends_at: datetime | None,
    correlation_id: str,
    outbox: OutboxPolicy,
) -> PromotionPurchase:
    """A manager activates a package for some targets: Active at once (decision No. 10)."""
    parsed = [Target.parse(t.kind, t.id) for t in targets]
    with _unit_of_work(pool, correlation_id, outbox) as uow:
        package = repository.package_get(uow.conn, package_id)
        if package is None:
            raise UnknownPackageError
        purchase = PromotionPurchase.activate(
            purchase_id=uuid.uuid4(),
            tenant_id=tenant_id,
            buyer_user_id=buyer_user_id,
            package=package,
            targets=parsed,
            now=database_now(uow.conn),
            requested_ends_at=ends_at,
        )
        repository.purchase_insert(uow.conn, purchase)
        record_events(uow, purchase)
        uow.commit()
    return purchase


def get_purchase(pool: ConnectionPool[Conn], *, purchase_id: uuid.UUID, tenant_id: uuid.UUID) -> PromotionPurchase:
    """A purchase of the caller's tenant; another tenant's answers as missing."""
    with pool.connection() as conn:
        purchase = repository.purchase_get(conn, purchase_id, tenant_id)
    if purchase is None:
        raise PurchaseNotFoundError
    return purchase


def cancel_purchase(
    pool: ConnectionPool[Conn],
    *,
    purchase_id: uuid.UUID,
    tenant_id: uuid.UUID,
    if_match: int | None,
    correlation_id: str,
    outbox: OutboxPolicy,
) -> PromotionPurchase:
    """Active -> Cancelled by the company's manager; a terminal purchase is a conflict (INV-6).

    The row lock is taken first: it waits for an in-flight expire-promotions batch and then reads the committed
    state (Expired: conflict), and while held it makes the worker skip this purchase (seed 002, A1).
    """
    with _unit_of_work(pool, correlation_id, outbox) as uow:
        purchase = repository.purchase_get(uow.conn, purchase_id, tenant_id, lock=True)
        if purchase is None:
            raise PurchaseNotFoundError
        if if_match is not None and if_match != purchase.version:
            raise VersionMismatchError
        expected_version = purchase.version
        purchase.cancel(database_now(uow.conn))
        repository.purchase_update_status(uow.conn, purchase, expected_version=expected_version)
        record_events(uow, purchase)
        uow.commit()
    return purchase


def record_events(uow: UnitOfWork, purchase: PromotionPurchase) -> None:
    """Hand the aggregate's recorded events to the unit of work; they become outbox rows at its commit."""
    kind = PromotionPurchaseChangedKafkaEvent
    for event in purchase.events:
        payload = kind.payload_of(event.purchase)
        uow.record(kind, payload["PurchaseId"], payload, event.occurred_at)
    purchase.events.clear()


def _unit_of_work(pool: ConnectionPool[Conn], correlation_id: str, outbox: OutboxPolicy) -> UnitOfWork:
    return UnitOfWork(pool, MessageContext(correlation_id), outbox=outbox, traceparent_provider=current_traceparent)
