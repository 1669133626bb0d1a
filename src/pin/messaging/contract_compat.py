"""Is a contract's current JSON Schema a compatible evolution of its committed one? A structural comparison over the
shape :mod:`pin.messaging.contract_docs` generates (the rules: docs/contracts/README.md; why structural:
docs/design/contracts.md, "The compatibility gate").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BREAKING_HELP = "a breaking change is a new contract version on a new topic: see docs/contracts/README.md"
# The keywords that fix what a value of a field looks like; any change of one is a retype.
_SHAPE_KEYWORDS = ("format", "pattern", "const")
# Top-level annotations a consumer is wired to; any change is a break.
_ROUTING_KEYWORDS = ("x-topic", "x-key", "x-event-type")


@dataclass(frozen=True)
class Break:
    """One breaking change: where (a field path such as ``Price.Currency.Code`` or ``Targets[].TargetKind``),
    what kind, and the detail."""

    path: str
    kind: str
    detail: str = ""

    def line(self, contract: str) -> str:
        """One line for the operator: the contract, the field, the kind of break and its detail."""
        return f"{contract}: {self.path}: {self.kind}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class _Shape:
    """What a field accepts, normalized across ``anyOf`` options."""

    types: frozenset[str]
    keywords: frozenset[tuple[str, str]]  # (keyword, JSON of its value) of _SHAPE_KEYWORDS
    known: tuple[str, ...]  # enum values, in their order
    open_enum: bool  # an enum that also accepts any value of its type
    node: dict[str, Any]  # the option holding properties or items, if any


def breaking_changes(committed: dict[str, Any], current: dict[str, Any]) -> list[Break]:
    """Every break from the committed schema of a message to the current one (empty: compatible)."""
    found = [
        Break(keyword, "changed", f"{committed.get(keyword)!r} -> {current.get(keyword)!r}")
        for keyword in _ROUTING_KEYWORDS
        if committed.get(keyword) != current.get(keyword)
    ]
    return found + _object_breaks("", committed, current)


def _object_breaks(prefix: str, committed: dict[str, Any], current: dict[str, Any]) -> list[Break]:
    old_props: dict[str, Any] = committed.get("properties", {})
    new_props: dict[str, Any] = current.get("properties", {})
    old_required, new_required = set(committed.get("required", [])), set(current.get("required", []))
    found: list[Break] = []
    if committed.get("additionalProperties", True) is not False and current.get("additionalProperties", True) is False:
        found.append(Break(prefix.rstrip(".") or "(message)", "closed to additional properties"))
    added = [name for name in new_props if name not in old_props]
    for name, old in old_props.items():
        path = prefix + name
        if name not in new_props:
            twins = [n for n in added if _shape(new_props[n]) == _shape(old)]
            if twins:  # a new field of the same shape: most likely this one, renamed (reported once)
                added.remove(twins[0])
            found.append(Break(path, "renamed", f"to {twins[0]}?") if twins else Break(path, "removed"))
            continue
        if name in new_required and name not in old_required:
            found.append(Break(path, "made required"))
        if name in old_required and name not in new_required:
            found.append(Break(path, "made optional", "a reader relies on it"))
        found += _field_breaks(path, _shape(old), _shape(new_props[name]))
    found += [Break(prefix + name, "added as required") for name in added if name in new_required]
    return found


def _field_breaks(path: str, old: _Shape, new: _Shape) -> list[Break]:
    found: list[Break] = []
    if old.types != new.types or old.keywords != new.keywords:
        found.append(Break(path, "retyped", f"{_describe(old)} -> {_describe(new)}"))
    removed = [value for value in old.known if value not in new.known]
    found += [Break(path, "enum value removed", value) for value in removed]
    if old.open_enum and not new.open_enum and new.known:
        found.append(Break(path, "enum closed", "unknown values would be rejected"))
    if "object" in old.types and "object" in new.types:
        found += _object_breaks(path + ".", old.node, new.node)
    if "array" in old.types and "array" in new.types:
        old_items, new_items = _shape(old.node.get("items", {})), _shape(new.node.get("items", {}))
        found += _field_breaks(path + "[]", old_items, new_items)
    return found


def _shape(node: dict[str, Any]) -> _Shape:
    """Normalize a field's schema: the union of its ``anyOf`` options (nested ones flattened)."""
    options = _options(node)
    types: set[str] = set()
    keywords: set[tuple[str, str]] = set()
    known: list[str] = []
    typed_plain: set[str] = set()  # types accepted with no enum restriction
    holder: dict[str, Any] = {}
    for option in options:
        if "enum" in option:
            values = option["enum"]
            known += [value for value in values if value not in known]
            types.update(_json_type(value) for value in values)
        elif "type" in option:
            types.add(option["type"])
            if option["type"] != "null":
                typed_plain.add(option["type"])
        if "const" in option:
            types.add(_json_type(option["const"]))
        keywords.update((k, json.dumps(option[k], sort_keys=True)) for k in _SHAPE_KEYWORDS if k in option)
        if "properties" in option or "items" in option:
            holder = option
    open_enum = bool(known) and any(_json_type(value) in typed_plain for value in known)
    return _Shape(frozenset(types), frozenset(keywords), tuple(known), open_enum, holder)


def _options(node: dict[str, Any]) -> list[dict[str, Any]]:
    if "anyOf" in node:
        return [flat for option in node["anyOf"] for flat in _options(option)]
    return [node]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


def _describe(shape: _Shape) -> str:
    parts = sorted(shape.types) + [f"{k}={v}" for k, v in sorted(shape.keywords)]
    return " ".join(parts) or "anything"


def schema_files(directory: Path) -> dict[str, dict[str, Any]]:
    """The committed message schemas of a directory: file name -> schema."""
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(directory.glob("*.schema.json"))}


def compare(committed: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]) -> list[str]:
    """One line per break between two sets of message schemas (file name -> schema); a new contract is fine."""
    lines: list[str] = []
    for name, old in committed.items():
        contract = name.removesuffix(".schema.json")
        if name not in current:
            lines.append(f"{contract}: (contract): removed (retiring a contract deletes its committed schema too)")
            continue
        lines += [found.line(contract) for found in breaking_changes(old, current[name])]
    return lines
