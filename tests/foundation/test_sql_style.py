"""One SQL style: a context's statements are named in its ``queries.sql`` and loaded by ``pin.db.load_queries``.

For the packages listed here no statement is written in Python any more (the calendar, the promotion worker's
statements, the outbox writer and the consumer runtime follow in their own changes), and every statement a query
file names is used by its package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pin.db import load_queries

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src" / "pin"

# package -> its modules that send SQL (every module of the package when None)
CONVERTED = {
    "crm": None,
    "notifications": None,
    "catalog": None,
    "news": None,
    "boost": None,
    "status": None,
    "jobs": ("bookkeeping.py",),
    "promotion": ("repository.py", "service.py"),
    "observability": ("database_health.py",),
}

# module -> the module-level names whose statements are still written in Python, converted by their own change:
# the expire-promotions worker's claim, set-based write and backlog
PENDING = {
    "promotion/repository.py": {"_EXPIRE_MANY", "_CLAIM", "BACKLOG_SQL", "NEXT_DEADLINE_SQL", "STILL_ACTIVE_SQL"},
}
# package -> its query file, where it is not queries.sql
QUERY_FILES = {"observability": "database_health.sql"}

# what a statement written in Python starts with (a query file's statement is read from the file, never written here)
_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|EXISTS|SET)\b")


def _modules(package: str) -> list[Path]:
    names = CONVERTED[package]
    return [SRC / package / n for n in names] if names else sorted((SRC / package).glob("*.py"))


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, f-strings' literal parts included, with their lines (but those of the
    module-level assignments PENDING names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pending = PENDING.get(f"{path.parent.name}/{path.name}", set())
    skipped = {
        id(n)
        for statement in tree.body
        if isinstance(statement, ast.Assign | ast.AnnAssign)
        and {t.id for t in _targets(statement) if isinstance(t, ast.Name)} & pending
        for n in ast.walk(statement)
    }
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skipped
    ]


def _targets(statement: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return statement.targets if isinstance(statement, ast.Assign) else [statement.target]


@pytest.mark.parametrize("package", sorted(CONVERTED))
def test_no_statement_is_written_in_python(package):
    inline = [
        f"{path.name}:{line}: {text.strip().splitlines()[0]}"
        for path in _modules(package)
        for line, text in _strings(path)
        if _STATEMENT.match(text)
    ]
    assert inline == [], f"write these in src/pin/{package}/{QUERY_FILES.get(package, 'queries.sql')}: {inline}"


@pytest.mark.parametrize("package", sorted(CONVERTED))
def test_every_named_statement_is_used(package):
    names = load_queries(f"pin.{package}", QUERY_FILES.get(package, "queries.sql"))
    code = "\n".join(path.read_text(encoding="utf-8") for path in (SRC / package).glob("*.py"))
    unused = [name for name in names if f'"{name}"' not in code]
    assert names
    assert unused == []
