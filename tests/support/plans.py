"""Reading PostgreSQL's EXPLAIN (FORMAT JSON) plans in tests: which nodes a part of a statement runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def explain(conn: Any, sql: str, params: dict[str, object]) -> dict[str, Any]:
    """The plan tree of ``sql`` with ``params`` (not executed)."""
    row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
    assert row is not None
    plan: dict[str, Any] = row["QUERY PLAN"][0]["Plan"]
    return plan


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan tree, the root first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def cte(plan: dict[str, Any], name: str) -> dict[str, Any]:
    """The subtree of the CTE ``name`` (e.g. "claimed"); fails when the plan has none."""
    for node in nodes(plan):
        if node.get("Subplan Name") == f"CTE {name}":
            return node
    raise AssertionError(f"no CTE {name} in the plan")


def seq_scanned(plan: dict[str, Any]) -> set[str]:
    """The tables a plan reads with a sequential scan."""
    return {n["Relation Name"] for n in nodes(plan) if n["Node Type"] == "Seq Scan"}


def index_names(plan: dict[str, Any]) -> set[str]:
    """The indexes a plan reads."""
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


def node_types(plan: dict[str, Any]) -> set[str]:
    """The kinds of node in a plan."""
    return {n["Node Type"] for n in nodes(plan)}
