"""The contract compatibility gate: each kind of breaking change is caught and named, additive changes pass.

The schemas compared are generated from pydantic models exactly as the published ones are (``ContractSet``),
so a test changes a model the way a developer would, and the gate judges the generated schema against the
schema of the unchanged model.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pin.contract_check import current_schemas
from pin.messaging.contract_compat import breaking_changes, compare, schema_files
from pin.messaging.contract_docs import ContractSet
from pin.messaging.contracts import Contract, UtcDateTime

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "contracts"
CANCELLED = "pin.calendar.appointment-cancelled.v1.schema.json"
PURCHASE = "pin.promotion.purchase-changed.v1.schema.json"


class Outcome(StrEnum):
    """The known values of v1."""

    DONE = "Done"
    FAILED = "Failed"


class FewerOutcomes(StrEnum):
    """Failed removed."""

    DONE = "Done"


class MoreOutcomes(StrEnum):
    """Skipped added."""

    DONE = "Done"
    FAILED = "Failed"
    SKIPPED = "Skipped"


class _Thing(Contract):
    TOPIC: ClassVar[str] = "pin.test.thing-happened.v1"
    EVENT_TYPE: ClassVar[str] = "pin.test.thing-happened"


class V1(_Thing):
    """The committed v1."""

    thing_id: uuid.UUID
    outcome: Outcome
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None


class FieldRemoved(_Thing):
    """HappenedAt removed."""

    thing_id: uuid.UUID
    outcome: Outcome
    note_id: uuid.UUID | None = None


class FieldRenamed(_Thing):
    """Outcome renamed to Result."""

    thing_id: uuid.UUID
    result: Outcome
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None


class FieldRetyped(_Thing):
    """ThingId from a UUID string to an integer."""

    thing_id: int
    outcome: Outcome
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None


class OptionalMadeRequired(_Thing):
    """NoteId still nullable, but no longer optional."""

    thing_id: uuid.UUID
    outcome: Outcome
    happened_at: UtcDateTime
    note_id: uuid.UUID | None


class EnumValueRemoved(_Thing):
    """Outcome no longer knows Failed."""

    thing_id: uuid.UUID
    outcome: FewerOutcomes
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None


class RequiredFieldAdded(_Thing):
    """A new field every reader would have to have."""

    thing_id: uuid.UUID
    outcome: Outcome
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None
    batch_id: uuid.UUID


class RequiredMadeOptional(_Thing):
    """HappenedAt may now be absent or null: a reader relying on it breaks."""

    thing_id: uuid.UUID
    outcome: Outcome
    happened_at: UtcDateTime | None = None
    note_id: uuid.UUID | None = None


class Additive(_Thing):
    """A new optional field and a new enum value: v1 may do both."""

    thing_id: uuid.UUID
    outcome: MoreOutcomes
    happened_at: UtcDateTime
    note_id: uuid.UUID | None = None
    batch_id: uuid.UUID | None = None


def _schema(model: type[Contract]) -> dict[str, Any]:
    return ContractSet("test", "test", (model,), lambda _: "ThingId").message_schema(model)


def _lines(model: type[Contract]) -> list[str]:
    return [found.line("pin.test.thing-happened.v1") for found in breaking_changes(_schema(V1), _schema(model))]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (FieldRemoved, "pin.test.thing-happened.v1: HappenedAt: removed"),
        (FieldRenamed, "pin.test.thing-happened.v1: Outcome: renamed (to Result?)"),
        (FieldRetyped, 'pin.test.thing-happened.v1: ThingId: retyped (string format="uuid" -> integer)'),
        (OptionalMadeRequired, "pin.test.thing-happened.v1: NoteId: made required"),
        (EnumValueRemoved, "pin.test.thing-happened.v1: Outcome: enum value removed (Failed)"),
        (RequiredFieldAdded, "pin.test.thing-happened.v1: BatchId: added as required"),
    ],
)
def test_each_breaking_change_is_one_line_naming_the_field_and_the_kind(model: type[Contract], expected: str) -> None:
    assert _lines(model) == [expected]


@pytest.mark.unit
def test_a_required_field_made_optional_and_nullable_is_two_breaks() -> None:
    assert _lines(RequiredMadeOptional) == [
        "pin.test.thing-happened.v1: HappenedAt: made optional (a reader relies on it)",
        'pin.test.thing-happened.v1: HappenedAt: retyped (string format="date-time" -> null string format="date-time")',
    ]


@pytest.mark.unit
def test_a_new_optional_field_and_a_new_enum_value_are_compatible() -> None:
    assert _lines(V1) == []
    assert _lines(Additive) == []
    additive = _schema(Additive)
    assert "BatchId" in additive["properties"]  # really added
    assert "BatchId" not in additive["required"]
    assert breaking_changes(additive, _schema(V1))  # and taking them back out is a break


@pytest.mark.unit
def test_breaks_inside_nested_parts_and_of_routing_and_openness_are_named() -> None:
    committed = json.loads((DOCS / PURCHASE).read_text(encoding="utf-8"))
    current = copy.deepcopy(committed)
    price = current["properties"]["Price"]
    price["properties"]["Amount"] = {"type": "number"}
    price["additionalProperties"] = False
    target_kind = current["properties"]["Targets"]["items"]["properties"]["TargetKind"]
    target_kind["anyOf"] = [{"enum": ["Project", "PropertyObject"]}]  # Post removed, and no longer open
    del current["properties"]["Price"]["properties"]["Currency"]["properties"]["Symbol"]
    current["x-key"] = "TenantId"
    lines = [found.line("c") for found in breaking_changes(committed, current)]
    assert lines == [
        "c: x-key: changed ('PurchaseId' -> 'TenantId')",
        "c: Targets[].TargetKind: enum value removed (Post)",
        "c: Targets[].TargetKind: enum closed (unknown values would be rejected)",
        "c: Price: closed to additional properties",
        'c: Price.Amount: retyped (string pattern="^-?[0-9]+\\\\.[0-9]{2}$" -> number)',
        "c: Price.Currency.Symbol: removed",
    ]


@pytest.mark.unit
def test_the_committed_schemas_are_compatible_with_the_models_and_a_retired_contract_is_a_break() -> None:
    committed = schema_files(DOCS)
    assert set(committed) == set(current_schemas())  # every published contract has its golden file
    assert compare(committed, current_schemas()) == []
    without_cancelled = {name: schema for name, schema in current_schemas().items() if name != CANCELLED}
    (line,) = compare(committed, without_cancelled)
    assert line.startswith("pin.calendar.appointment-cancelled.v1: (contract): removed (")


def _golden_where_v1_knew_more(tmp_path: Path) -> Path:
    """A copy of docs/contracts whose appointment-cancelled v1 also knew Reason "Rescheduled"."""
    for path in DOCS.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    schema = json.loads((tmp_path / CANCELLED).read_text(encoding="utf-8"))
    schema["properties"]["Reason"]["anyOf"][0]["enum"].append("Rescheduled")
    (tmp_path / CANCELLED).write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    return tmp_path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.unit
def test_the_gate_command_exits_0_1_or_2(tmp_path: Path) -> None:
    ok = _run("pin.contract_check")
    assert (ok.returncode, ok.stderr) == (0, ""), ok.stderr
    assert "every change is additive" in ok.stdout

    broken = _run("pin.contract_check", "--committed", str(_golden_where_v1_knew_more(tmp_path)))
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert broken.stdout.splitlines() == [
        "pin.calendar.appointment-cancelled.v1: Reason: enum value removed (Rescheduled)"
    ]
    assert "new contract version" in broken.stderr

    for usage in (["--committed", str(tmp_path / "missing")], ["--frobnicate"]):
        bad = _run("pin.contract_check", *usage)
        assert bad.returncode == 2, bad.stderr
        assert len(bad.stderr.splitlines()) == 1, bad.stderr
        assert bad.stderr.startswith("usage error: "), bad.stderr
        assert "Traceback" not in bad.stderr


@pytest.mark.unit
def test_regenerating_the_documents_refuses_to_overwrite_a_golden_file_with_a_break(tmp_path: Path) -> None:
    golden = _golden_where_v1_knew_more(tmp_path)
    before = {path.name: path.read_text(encoding="utf-8") for path in golden.iterdir()}
    run = _run("pin.calendar.contracts", str(golden))
    assert run.returncode == 1
    assert "Reason: enum value removed (Rescheduled)" in run.stderr
    assert {path.name: path.read_text(encoding="utf-8") for path in golden.iterdir()} == before  # nothing written
    fresh = _run("pin.calendar.contracts", str(tmp_path / "fresh"))
    assert fresh.returncode == 0, fresh.stderr
