"""A small JSON Schema check covering the keywords the published contract documents use (docs/contracts).

No third-party validator is needed for so few keywords, and a test of this module shows it can fail.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Any

_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
}


def errors(schema: dict[str, Any], value: Any, path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it conforms)."""
    if "anyOf" in schema:
        matches = any(not errors(option, value, path) for option in schema["anyOf"])
        return [] if matches else [f"{path}: matches no option of anyOf"]
    problems = _scalar_errors(schema, value, path)
    if problems:
        return problems
    if schema.get("type") == "array":
        return [p for i, item in enumerate(value) for p in errors(schema.get("items", {}), item, f"{path}[{i}]")]
    if schema.get("type") != "object":
        return problems
    problems = [f"{path}: missing {name}" for name in schema.get("required", []) if name not in value]
    if schema.get("additionalProperties") is False:
        problems += [f"{path}: unexpected {name}" for name in value if name not in schema["properties"]]
    for name, sub in schema.get("properties", {}).items():
        if name in value:
            problems += errors(sub, value[name], f"{path}.{name}")
    return problems


def _scalar_errors(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    problems = []
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: {value!r} != const {schema['const']!r}")
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        return [*problems, f"{path}: {value!r} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        problems.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if not _format_ok(schema.get("format"), value):
        problems.append(f"{path}: {value!r} is not a {schema['format']}")
    return problems


def _format_ok(fmt: str | None, value: Any) -> bool:
    try:
        if fmt == "uuid":
            return str(uuid.UUID(value)) == value  # canonical, lower case
        if fmt == "date-time":  # contracts write UTC with a Z
            return bool(value.endswith("Z") and datetime.fromisoformat(value).utcoffset() == timedelta(0))
    except ValueError:
        return False
    return True


def kafka_headers(row: dict[str, Any]) -> dict[str, Any]:
    """The Kafka headers the relay sends for an outbox row: the row's own plus the envelope's."""
    return {
        **row["headers"],
        "message-id": str(row["message_id"]),
        "contract-version": str(row["contract_version"]),
        "event-type": row["event_type"],
    }
