"""Reading PostgreSQL's EXPLAIN (FORMAT JSON) plans in tests: which nodes a part of a statement runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# plan_cache_mode: each execution planned on its parameters (the roles' sessions), or one plan for any parameters
PLAN_CACHE_MODES = ("force_custom_plan", "force_generic_plan")


def explain(
    conn: Any, sql: str, params: dict[str, object], plan_cache_mode: str = "force_custom_plan"
) -> dict[str, Any]:
    """The plan tree of ``sql`` (not executed): with ``params``, or with ``plan_cache_mode = force_generic_plan``
    the generic plan, made for any parameters, that a statement psycopg prepared (after a few runs) keeps."""
    if plan_cache_mode == "force_custom_plan":
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
        assert row is not None
        custom: dict[str, Any] = row["QUERY PLAN"][0]["Plan"]
        return custom
    assert plan_cache_mode == "force_generic_plan", plan_cache_mode
    numbers: dict[str, int] = {}
    text = re.sub(r"%\((\w+)\)[sb]", lambda m: f"${numbers.setdefault(m.group(1), len(numbers) + 1)}", sql)
    with conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
        conn.execute(f"PREPARE generic_plan_of_test AS {text}", prepare=False)
        types = conn.execute(
            "SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = 'generic_plan_of_test'"
        ).fetchone()["types"]
        nulls = ", ".join(f"NULL::{kind}" for kind in types)
        row = conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE generic_plan_of_test({nulls})", prepare=False).fetchone()
        conn.execute("DEALLOCATE generic_plan_of_test", prepare=False)
    assert row is not None
    generic: dict[str, Any] = row["QUERY PLAN"][0]["Plan"]
    return generic


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
