"""SQL adapter of the promotion context: packages, purchases and their targets (psycopg 3, dict rows).

Queries are named ``<entity>_<verb>_<qualifier>`` and written in queries.sql. Transitions are guarded (``WHERE
id = %s AND status = 'Active' AND version = %s``); zero rows is a conflict, never a silent success. The INV-6
trigger's constraint name becomes :class:`~pin.promotion.domain.PurchaseTerminalError`; a guarded write that
matched no row raises :class:`~pin.promotion.domain.VersionConflictError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Any, LiteralString

from psycopg import errors
from psycopg.rows import tuple_row

from pin.db import Conn, load_queries
from pin.outbox.writer import OutboxRow, insert_unnest_params, insert_unnest_sql
from pin.promotion.domain import (
    Money,
    Package,
    PaymentStatus,
    PromotionPurchase,
    PurchaseStatus,
    PurchaseTerminalError,
    Target,
    TargetKind,
    VersionConflictError,
)

TERMINAL_FROZEN_CONSTRAINT = "purchase_terminal_frozen"

# expire-promotions' statements (its batch write here; the rest in expiry.py)
_EXPIRY = load_queries(__package__, "expiry.sql")


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn the database's known constraint violations into domain errors."""
    try:
        yield
    except errors.CheckViolation as exc:
        if exc.diag.constraint_name == TERMINAL_FROZEN_CONSTRAINT:
            raise PurchaseTerminalError from exc
        raise


_QUERIES = load_queries(__package__)
# The purchase's read shape, written once in queries.sql: its columns (the order of purchase_from_values) and the
# lateral join of its targets, shared by purchase_get and the expire-promotions claim (expiry.py).
_PURCHASE_COLUMNS = _QUERIES["purchase_columns"]
_PURCHASE_NAMES = tuple(name.strip().removeprefix("p.").removeprefix("t.") for name in _PURCHASE_COLUMNS.split(","))
_TARGETS = _QUERIES["purchase_targets"]


def with_purchase_shape(statement: LiteralString) -> LiteralString:
    """A statement of queries.sql with the purchase's read shape filled in."""
    return statement.replace("{purchase_columns}", _PURCHASE_COLUMNS).replace("{purchase_targets}", _TARGETS)


_PACKAGE_LIST_ON_OFFER = _QUERIES["package_list_on_offer"]
_PACKAGE_GET = _QUERIES["package_get"]
_PURCHASE_INSERT = _QUERIES["purchase_insert"]
_PURCHASE_TARGET_INSERT = _QUERIES["purchase_target_insert"]
_PURCHASE_GET = {
    False: with_purchase_shape(_QUERIES["purchase_get"]),
    True: with_purchase_shape(_QUERIES["purchase_get_locked"]),
}
_PURCHASE_UPDATE_STATUS = _QUERIES["purchase_update_status"]


def package_list_on_offer(conn: Conn) -> list[Package]:
    """The packages a manager can activate, cheapest first."""
    rows = conn.execute(_PACKAGE_LIST_ON_OFFER).fetchall()
    return [_package(row) for row in rows]


def package_get(conn: Conn, package_id: uuid.UUID) -> Package | None:
    """One package by id (on offer or withdrawn)."""
    row = conn.execute(_PACKAGE_GET, (package_id,)).fetchone()
    return _package(row) if row else None


def purchase_insert(conn: Conn, purchase: PromotionPurchase) -> None:
    """Insert a new purchase and its targets."""
    conn.execute(
        _PURCHASE_INSERT,
        (
            purchase.id,
            purchase.tenant_id,
            purchase.buyer_user_id,
            purchase.package_id,
            purchase.package_code,
            purchase.package_kind,
            purchase.boost_weight,
            purchase.price.amount,
            purchase.price.currency_id,
            purchase.price.currency_code,
            purchase.price.currency_symbol,
            purchase.starts_at,
            purchase.ends_at,
            purchase.status.value,
            purchase.payment_status.value,
            purchase.version,
            purchase.created_at,
            purchase.updated_at,
        ),
    )
    with conn.cursor() as cur:
        cur.executemany(
            _PURCHASE_TARGET_INSERT,
            [(purchase.id, position, t.kind.value, t.id) for position, t in enumerate(purchase.targets)],
        )


def purchase_get(
    conn: Conn, purchase_id: uuid.UUID, tenant_id: uuid.UUID, *, lock: bool = False
) -> PromotionPurchase | None:
    """A purchase of ``tenant_id`` (another tenant's is None, like a missing one); ``lock`` takes its row lock.

    The lock is ``FOR NO KEY UPDATE``: it waits for (and then re-reads past) an in-flight transition, and while
    held it makes the expire-promotions claim skip this row (seed 002, A1).
    """
    row = conn.execute(_PURCHASE_GET[lock], (purchase_id, tenant_id)).fetchone()
    return purchase_from_row(row) if row else None


def purchase_update_status(conn: Conn, purchase: PromotionPurchase, *, expected_version: int) -> None:
    """Write a transition, guarded: only an Active row at ``expected_version`` changes; zero rows is a conflict."""
    with translated_errors():
        cursor = conn.execute(
            _PURCHASE_UPDATE_STATUS,
            (purchase.status.value, purchase.version, purchase.updated_at, purchase.id, expected_version),
        )
    if cursor.rowcount != 1:
        raise VersionConflictError


# The set-based write of an expire-promotions batch: expiry.sql's purchase_expire_many, with the outbox rows of
# exactly the rows it changed inserted by the writer's fragment. The rows were locked by the claim before. The
# arrays go in binary format (%b): psycopg's text format escapes every element with a regular expression, which
# for 200 JSON payloads costs more than the whole statement on the server.
EXPIRE_MANY = _EXPIRY["purchase_expire_many"].format(
    outbox_insert=insert_unnest_sql(where="m.message_key IN (SELECT c.id::text FROM changed AS c)")
)


def purchase_expire_many(
    conn: Conn,
    transitions: Sequence[tuple[PromotionPurchase, int]],
    outbox_rows: Sequence[OutboxRow],
) -> set[uuid.UUID]:
    """Write many transitions (``(purchase, expected_version)``) and the outbox rows of their events (from
    :meth:`~pin.unit_of_work.UnitOfWork.take_outbox_rows`; a row's key is its PurchaseId) in one statement; returns
    the ids it changed. A purchase missing from the result changed since it was
    read (the conflict of the one-row form), and its outbox rows were not written. One failing row fails the
    whole statement: the caller isolates it (a savepoint, then one purchase at a time)."""
    if not transitions:
        return set()
    params = {
        "ids": [p.id for p, _ in transitions],
        "statuses": [p.status.value for p, _ in transitions],
        "versions": [p.version for p, _ in transitions],
        "updated_at": [p.updated_at for p, _ in transitions],
        "expected_versions": [expected for _, expected in transitions],
        # a parameter, not a literal: the guard then never matches ix_purchase_active_ends_at's predicate, whose
        # whole walk a plan cached on an empty table would prefer to the lookups by id (docs/design/claims.md)
        "expected_status": PurchaseStatus.ACTIVE.value,
        **insert_unnest_params(outbox_rows),
    }
    with translated_errors(), conn.cursor(row_factory=tuple_row, binary=True) as cur:
        rows = cur.execute(EXPIRE_MANY, params).fetchall()
    return {row[0] for row in rows}


def purchase_from_row(row: Mapping[str, Any]) -> PromotionPurchase:
    """Map a row of ``_PURCHASE_COLUMNS`` (by name) to the aggregate."""
    return purchase_from_values([row[name] for name in _PURCHASE_NAMES])


# Each enum's members by value: a dict lookup per column, where calling the enum costs several times more (an
# unknown value is a KeyError instead of a ValueError; the schema's CHECKs admit none).
_TARGET_KINDS = {kind.value: kind for kind in TargetKind}
_STATUSES = {status.value: status for status in PurchaseStatus}
_PAYMENT_STATUSES = {status.value: status for status in PaymentStatus}


def purchase_from_values(values: Sequence[Any]) -> PromotionPurchase:
    """Map the values of ``_PURCHASE_COLUMNS``, in their order, to the aggregate."""
    (
        purchase_id, tenant_id, buyer_user_id, package_id, package_code, package_kind, boost_weight,
        price_amount, currency_id, currency_code, currency_symbol, starts_at, ends_at, status,
        payment_status, version, created_at, updated_at, target_kinds, target_ids,
    ) = values  # fmt: skip
    return PromotionPurchase(
        id=purchase_id,
        tenant_id=tenant_id,
        buyer_user_id=buyer_user_id,
        package_id=package_id,
        package_code=package_code,
        package_kind=package_kind,
        boost_weight=boost_weight,
        price=Money(price_amount, currency_id, currency_code, currency_symbol),
        targets=tuple(Target(_TARGET_KINDS[k], i) for k, i in zip(target_kinds or (), target_ids or (), strict=True)),
        starts_at=starts_at,
        ends_at=ends_at,
        status=_STATUSES[status],
        payment_status=_PAYMENT_STATUSES[payment_status],
        version=version,
        created_at=created_at,
        updated_at=updated_at,
    )


def _package(row: Mapping[str, Any]) -> Package:
    duration = row["duration"]
    amount = row["price_amount"]
    assert isinstance(duration, timedelta)
    assert isinstance(amount, Decimal)
    return Package(
        id=row["id"],
        code=row["code"],
        kind=row["kind"],
        boost_weight=row["boost_weight"],
        duration=duration,
        price=Money(amount, row["currency_id"], row["currency_code"], row["currency_symbol"]),
        on_offer=row["on_offer"],
    )
