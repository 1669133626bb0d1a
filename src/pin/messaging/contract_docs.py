"""Published documents of a context's integration events: a JSON Schema per message value and an AsyncAPI 3 document,
written by ``python -m pin.<context>.contracts [DIR]`` from the context's :class:`ContractSet` (what the schemas
say: docs/design/contracts.md, "What the published schemas say").
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pin.messaging.contract_compat import BREAKING_HELP, compare, schema_files
from pin.messaging.contracts import Contract
from pin.messaging.topics import PARTITIONS

HEADERS = ("message-id", "contract-version", "event-type", "correlation-id", "traceparent")
# The JSON Schema keywords a published property keeps; pydantic's titles and descriptions of enums are dropped.
_KEPT = ("type", "format", "const", "pattern")
ENVELOPE = ("MessageId", "ContractVersion", "OccurredAt")
OPEN_ENUM = "Open enum: the values v1 knows; more may be added, a reader keeps an unknown value and goes on."


@dataclass(frozen=True)
class ContractSet:
    """The contracts one context publishes, and how their documents are named."""

    slug: str  # file prefix of the AsyncAPI document: "<slug>.asyncapi.json"
    title: str
    contracts: tuple[type[Contract], ...]
    key_field: Callable[[type[Contract]], str]  # the payload field that is the Kafka key

    def documents(self) -> dict[str, str]:
        """File name -> content of every published document."""
        files = {name: _dump(schema) for name, schema in self.message_schemas().items()}
        files[f"{self.slug}.asyncapi.json"] = _dump(self.asyncapi_document())
        return files

    def message_schemas(self) -> dict[str, dict[str, Any]]:
        """File name (``<event type>.v<version>.schema.json``) -> the JSON Schema of each contract's message."""
        return self.message_schemas_of(self.contracts)

    def message_schemas_of(self, contracts: tuple[type[Contract], ...]) -> dict[str, dict[str, Any]]:
        """:meth:`message_schemas` of some of the set's contracts (a v1 and its v2 have a file each)."""
        return {f"{c.EVENT_TYPE}.v{c.CONTRACT_VERSION}.schema.json": self.message_schema(c) for c in contracts}

    def message_schema(self, contract: type[Contract]) -> dict[str, Any]:
        """The JSON Schema of a message value: the contract's fields plus the envelope, nothing else."""
        schema = _inline_refs(contract.model_json_schema(by_alias=True, mode="validation"))
        properties: dict[str, Any] = {name: _tidy(prop) for name, prop in schema["properties"].items()}
        properties["MessageId"] = {"type": "string", "format": "uuid"}
        properties["ContractVersion"] = {"const": contract.CONTRACT_VERSION}
        properties["OccurredAt"] = {"type": "string", "format": "date-time"}
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:pin:contract:{contract.EVENT_TYPE}:v{contract.CONTRACT_VERSION}",
            "title": contract.__name__,
            "description": (contract.__doc__ or "").strip(),
            "type": "object",
            "properties": properties,
            "required": [*schema.get("required", []), *ENVELOPE],
            "additionalProperties": True,
            "x-topic": contract.TOPIC,
            "x-event-type": contract.EVENT_TYPE,
            "x-key": self.key_field(contract),
        }

    def asyncapi_document(self) -> dict[str, Any]:
        """An AsyncAPI 3.0 document of the context's topics, the context being the producer."""
        channels: dict[str, Any] = {}
        operations: dict[str, Any] = {}
        messages: dict[str, Any] = {}
        for contract in self.contracts:
            name = contract.__name__
            channel = contract.EVENT_TYPE.rsplit(".", 1)[1]
            messages[name] = {
                "name": name,
                "title": contract.EVENT_TYPE,
                "contentType": "application/json",
                "headers": _headers_schema(contract),
                "payload": {k: v for k, v in self.message_schema(contract).items() if k not in ("$schema", "$id")},
                "bindings": {"kafka": {"key": {"type": "string", "format": "uuid"}, "bindingVersion": "0.5.0"}},
            }
            channels[channel] = {
                "address": contract.TOPIC,
                "description": f"Key = {self.key_field(contract)}; {PARTITIONS} partitions.",
                "messages": {name: {"$ref": f"#/components/messages/{name}"}},
                "bindings": {"kafka": {"topic": contract.TOPIC, "partitions": PARTITIONS, "bindingVersion": "0.5.0"}},
            }
            operations[f"publish-{channel}"] = {
                "action": "send",
                "channel": {"$ref": f"#/channels/{channel}"},
                "messages": [{"$ref": f"#/channels/{channel}/messages/{name}"}],
            }
        return {
            "asyncapi": "3.0.0",
            "info": {
                "title": self.title,
                "version": "1.0.0",
                "description": (
                    f"Published by the {self.slug} context through its transactional outbox (at least once)."
                ),
            },
            "defaultContentType": "application/json",
            "channels": channels,
            "operations": operations,
            "components": {"messages": messages},
        }

    def write_documents(self, directory: Path) -> list[Path]:
        """Write every published document into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for name, content in self.documents().items():
            path = directory / name
            path.write_text(content, encoding="utf-8")
            written.append(path)
        return written

    def main(self, argv: list[str]) -> int:
        """Write the documents into argv[0] (default docs/contracts) and list them; refuse a breaking change."""
        directory = Path(argv[0]) if argv else Path("docs/contracts")
        # the committed schemas are the golden files of the compatibility gate: regenerating must not overwrite
        # one with a breaking change (a break is a new contract version, a new file beside the old one)
        committed = {n: s for n, s in schema_files(directory).items() if n.startswith(f"pin.{self.slug}.")}
        breaks = compare(committed, self.message_schemas())
        if breaks:
            sys.stderr.write("".join(f"{line}\n" for line in breaks))
            sys.stderr.write(f"not written: breaking changes of published contracts ({BREAKING_HELP})\n")
            return 1
        for path in self.write_documents(directory):
            sys.stdout.write(f"{path}\n")
        return 0


def _headers_schema(contract: type[Contract]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "message-id": {"type": "string", "format": "uuid"},
        "contract-version": {"type": "string", "const": str(contract.CONTRACT_VERSION)},
        "event-type": {"type": "string", "const": contract.EVENT_TYPE},
        "correlation-id": {"type": "string"},
        "traceparent": {"type": "string", "description": "W3C trace context, when a trace is recording"},
    }
    return {"type": "object", "properties": properties, "required": list(HEADERS[:4])}


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve local ``#/$defs/...`` references, so a schema can be embedded in another document."""
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(copy.deepcopy(defs[ref.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _tidy(prop: dict[str, Any]) -> dict[str, Any]:
    """Keep what a consumer validates against (type, format, known enum values, ...), down nested parts."""
    if "anyOf" in prop:  # a nullable field: its options, an open enum's two flattened into the list
        options = [_tidy(option) for option in prop["anyOf"]]
        tidy: dict[str, Any] = {"anyOf": [flat for option in options for flat in option.get("anyOf", [option])]}
        if any(option.get("description") == OPEN_ENUM for option in options):
            tidy["description"] = OPEN_ENUM
        return tidy
    if "enum" in prop:
        return {"anyOf": [{"enum": list(prop["enum"])}, {"type": prop.get("type", "string")}], "description": OPEN_ENUM}
    tidy = {k: v for k, v in prop.items() if k in _KEPT}
    if "items" in prop:
        tidy["items"] = _tidy(prop["items"])
    if "properties" in prop:  # a nested part: open like the message itself
        tidy["properties"] = {name: _tidy(sub) for name, sub in prop["properties"].items()}
        tidy["required"] = list(prop.get("required", []))
        tidy["additionalProperties"] = True
    return tidy


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
