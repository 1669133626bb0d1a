"""Recording purchases' boost contributions in one context's tables, a batch at a time, in the runtime's transaction.

A batch's messages are reduced in Python to the end state that applying them one after another in offset order
would leave (the Version guard included), then written with one set-based statement per table: the purchases, the
contributions a newer Version no longer names, the contributions named.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, LiteralString, NamedTuple, cast

from pin.boost.domain import PurchaseStatus, TargetKind, contributes
from pin.boost.messages import PurchaseChanged
from pin.db import Conn, load_queries
from pin.messaging.consumer import HandlingContext, Items, Route
from pin.messaging.tolerant import known

# The boost's statements as templates; each context's BoostTables fills them in once (see queries.sql).
_TEMPLATES = load_queries(__package__)
# A table or column name the templates take: written into the SQL as it is, so only plain lower-case names.
_NAME = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class BoostTables:
    """Where one context keeps its boost, and which targets are its (the key of a contribution row, or None)."""

    # the context's schema, holding its ``purchase`` table (the newest Version of each purchase seen) and its
    # ``boost_contribution`` table
    schema: str
    # the contribution key's columns and their PostgreSQL types, in the order ``key_of`` returns them
    key: tuple[tuple[str, str], ...]
    # the contribution's key for a target of this context, None for another context's target
    key_of: Callable[[TargetKind, uuid.UUID], tuple[Any, ...] | None]
    # the statements of boost/queries.sql on this context's tables, by name
    statements: Mapping[str, LiteralString] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "statements", boost_statements(self.schema, self.key))

    @property
    def key_columns(self) -> int:
        """How many columns a key has."""
        return len(self.key)


def boost_statements(schema: str, key: tuple[tuple[str, str], ...]) -> dict[str, LiteralString]:
    """The boost's statements for one context: the one place its SQL is generated (from the key's columns)."""
    names = [schema, *(part for column in key for part in column)]
    if not key or not all(_NAME.fullmatch(name) for name in names):
        raise ValueError(f"a boost's schema and key columns are plain names, got {schema!r}, {key!r}")
    columns = [column for column, _ in key]
    fields = {
        "purchase": f"{schema}.purchase",
        "contribution": f"{schema}.boost_contribution",
        "key": ", ".join(columns),
        "key_of_r": ", ".join(f"r.{column}" for column in columns),
        "key_arrays": ", ".join(f"%b::{sql_type}[]" for _, sql_type in key),
        "key_matches": " AND ".join(f"n.{column} = c.{column}" for column in columns),
    }
    # the names are checked above and the templates are the package's own file: as trusted as a literal
    return {name: template.format(**fields) for name, template in _TEMPLATES.items()}


class _Applied(NamedTuple):  # a named tuple: one per event, built at a third of a frozen dataclass's cost
    """An event that applies (its Version not older than the stored one) and the contribution keys it names."""

    event: PurchaseChanged
    active: bool
    keys: list[tuple[Any, ...]]


def apply_purchases(conn: Conn, items: Items[PurchaseChanged], tables: BoostTables, log: Any) -> None:
    """Record the purchases' contributions to this context's targets, each event only if its Version is not older."""
    statements = tables.statements
    # A purchase with one event in the batch needs no stored Version: its statements' own guards decide, as for a
    # lone message. Only a purchase with several events needs it, to tell which of them apply (one read, no more).
    repeated = sorted(pid for pid, n in Counter(event.purchase_id for event, _ in items).items() if n > 1)
    versions: dict[uuid.UUID, int] = {}
    if repeated:
        rows = conn.execute(statements["purchase_versions"], (repeated,)).fetchall()
        versions = {cast(uuid.UUID, row["purchase_id"]): cast(int, row["version"]) for row in rows}
    chains: dict[uuid.UUID, list[_Applied]] = {}
    checks: list[tuple[PurchaseChanged, HandlingContext, list[str] | None]] = []
    for event, context in items:
        status = known(PurchaseStatus, event.status)
        if status is None:
            context.unknown_value("Status", event.status)
        stored = versions.get(event.purchase_id)
        if stored is not None and event.version < stored:
            checks.append((event, context, None))  # an older Version: ignored, its targets not looked at
            continue
        versions[event.purchase_id] = event.version
        keys, unknown_kinds = _keys(event, tables)
        chains.setdefault(event.purchase_id, []).append(_Applied(event, contributes(status), keys))
        checks.append((event, context, unknown_kinds))
    applied = _no_purchases
    if chains:
        upserted = conn.execute(statements["purchase_upsert"], _purchase_rows(chains))
        conn.execute(statements["contributions_deactivate_dropped"], _dropped(chains, tables.key_columns))
        contributions = _contributions(chains, tables.key_columns)
        if contributions[0]:
            conn.execute(statements["contribution_upsert"], contributions)
        applied = cache(partial(_upserted, upserted, set(chains)))
    for event, context, unknown in checks:
        context.after_results(partial(_check, log, event, context, unknown, applied))


def _upserted(cursor: Any, sent: set[uuid.UUID]) -> set[uuid.UUID]:
    """The purchases whose upsert applied (all of them, the usual case, without converting the returned rows)."""
    if cursor.rowcount == len(sent):
        return sent
    return {cast(uuid.UUID, row["purchase_id"]) for row in cursor.fetchall()}


def _no_purchases() -> set[uuid.UUID]:
    return set()


def _check(
    log: Any,
    event: PurchaseChanged,
    context: HandlingContext,
    unknown_kinds: list[str] | None,
    applied: Callable[[], set[uuid.UUID]],
) -> None:
    """Once the results are in: an ignored Version is logged; an applied event's unknown TargetKinds are reported."""
    if unknown_kinds is None or event.purchase_id not in applied():
        log.info("older purchase version ignored", purchase_id=str(event.purchase_id), version=event.version)
        return
    for raw in unknown_kinds:  # an ignored Version's targets are not looked at
        context.unknown_value("TargetKind", raw)


def _keys(event: PurchaseChanged, tables: BoostTables) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The contribution keys of this context an event names, and the TargetKinds it does not know."""
    keys: list[tuple[Any, ...]] = []
    unknown_kinds: list[str] = []
    for target in event.targets:
        target_kind = known(TargetKind, target.target_kind)
        if target_kind is None:
            unknown_kinds.append(target.target_kind)
            continue
        key = tables.key_of(target_kind, target.target_id)
        if key is not None:  # None: another context's target, it keeps that boost
            keys.append(key)
    return keys, unknown_kinds


def _purchase_rows(chains: dict[uuid.UUID, list[_Applied]]) -> tuple[list[Any], ...]:
    """Per purchase: its first applying event's tenant (kept by later updates), its last one's status and Version."""
    rows = [(pid, chain[0].event.tenant_id, chain[-1].event.status, chain[-1].event.version)
            for pid, chain in chains.items()]  # fmt: skip
    return tuple(list(column) for column in zip(*rows, strict=True))


def _dropped(chains: dict[uuid.UUID, list[_Applied]], key_columns: int) -> tuple[list[Any], ...]:
    """The deactivation of stored contributions no applying event names: the first applying event drops them."""
    purchases = list(chains)
    first = [chain[0].event.version for chain in chains.values()]
    final = [chain[-1].event.version for chain in chains.values()]
    named = [(pid, *key) for pid, chain in chains.items() for key in {k for step in chain for k in step.keys}]
    columns = [list(column) for column in zip(*named, strict=True)] if named else [[] for _ in range(1 + key_columns)]
    return (purchases, first, final, *columns)


def _contributions(chains: dict[uuid.UUID, list[_Applied]], key_columns: int) -> tuple[list[Any], ...]:
    """Each named contribution's end state after its purchase's applying events, one after another.

    The last event naming a key sets its weight; if a later event drops it while active, that event's Version
    deactivates it (an inactive row is not touched again). A new row takes the tenant of the first event naming it.
    """
    rows: list[tuple[Any, ...]] = []
    for pid, chain in chains.items():
        last: dict[tuple[Any, ...], int] = {}
        tenant: dict[tuple[Any, ...], uuid.UUID] = {}
        for index, step in enumerate(chain):
            for key in step.keys:
                last[key] = index
                tenant.setdefault(key, step.event.tenant_id)
        final = chain[-1].event.version
        for key, index in last.items():
            step = chain[index]
            if index == len(chain) - 1:
                active, version = step.active, step.event.version
            else:
                active, version = False, chain[index + 1].event.version if step.active else step.event.version
            rows.append((pid, *key, tenant[key], step.event.boost_weight, active, version, final))
    if not rows:
        return tuple([] for _ in range(6 + key_columns))
    return tuple(list(column) for column in zip(*rows, strict=True))


def purchase_route(tables: BoostTables, log: Any) -> Route[PurchaseChanged]:
    """How a context reads purchase-changed: the boost's view of it, recorded in ``tables``."""

    def apply_many(conn: Conn, items: Items[PurchaseChanged]) -> None:
        apply_purchases(conn, items, tables, log)

    return Route(PurchaseChanged.model_validate, apply_many)
