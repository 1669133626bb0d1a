"""The shared plumbing imports no context and nothing above it, and no layer of it imports a higher one.

Read from the code's own import statements (at any depth, a lazy import inside a function too): a module that
imports upward would tie the ground to what stands on it (settings to the topics, messaging to the contexts'
contracts, `pin acls` to `pin status`), and the cure is to put the fact it needs in the lower layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "pin"

# The plumbing's layers, the ground first: a module may import its own layer's and the lower ones', nothing else of
# pin. Whatever of src/pin is on none (the contexts, the unit of work, the roles, `pin up`, `pin status`, the
# contract gate, the composition root and the command line) stands above them all.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"settings", "domain_errors", "rfc3339", "backoff"}),
    frozenset({"db", "faults", "cancellation", "operations"}),
    frozenset({"observability"}),
    frozenset({"messaging", "jobs"}),
    frozenset({"outbox", "api"}),
)
CONTEXTS = frozenset({"calendar", "promotion", "crm", "notifications", "catalog", "news", "boost"})


def _top(module: str) -> str:
    """``pin.messaging.groups`` -> ``messaging``: the package or module of src/pin a dotted name falls in."""
    return module.split(".")[1] if "." in module else module


def imports_of(path: Path) -> set[str]:
    """The parts of pin (as :func:`_top` names them) that ``path`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "pin":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("pin."):
                found.add(_top(node.module))
        elif isinstance(node, ast.Import):
            found |= {_top(alias.name) for alias in node.names if alias.name.startswith("pin.")}
    return found


def _layer_of(part: str) -> int:
    return next((i for i, layer in enumerate(LAYERS) if part in layer), len(LAYERS))


def upward_imports() -> list[str]:
    """``file -> part`` for every import of a plumbing module that reaches a higher layer or above the plumbing."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        part = _top(".".join(path.relative_to(SRC.parent).with_suffix("").parts))
        mine = _layer_of(part)
        if mine == len(LAYERS):
            continue
        found += [f"{path.relative_to(SRC)} -> {t}" for t in sorted(imports_of(path)) if _layer_of(t) > mine]
    return found


def test_no_plumbing_module_imports_upward() -> None:
    assert upward_imports() == []


def test_every_layer_names_a_part_of_the_tree_and_no_context() -> None:
    parts = {p.stem for p in SRC.glob("*.py")} | {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    named = frozenset().union(*LAYERS)
    assert named <= parts, named - parts  # a part renamed or gone: the rule would check nothing for it
    assert parts >= CONTEXTS
    assert not CONTEXTS & named


def test_the_rule_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "groups.py"
    module.write_text("def published():\n    from pin.contract_check import CONTRACT_SETS\n    return CONTRACT_SETS\n")
    assert imports_of(module) == {"contract_check"}
    assert _layer_of("contract_check") > _layer_of("messaging")
