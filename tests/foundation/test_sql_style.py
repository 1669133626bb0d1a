"""One SQL style: a context's statements are named in its ``queries.sql`` and loaded by ``pin.db.load_queries``.

For the packages listed here no statement is written in Python, and every statement a query file names is used by
its package. What is left outside them is plumbing: the pool's check and session settings (``pin.db``), the
health probe's ``SELECT 1`` and the migrations' advisory lock.
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
    "calendar": None,
    "promotion": ("repository.py", "service.py", "expiry.py"),
    "observability": ("database_health.py",),
    "outbox": ("writer.py", "dead_letters.py", "gauges.py", "floors.py"),
    "outbox.relay": None,
    "messaging.consumer": None,
    "messaging.consumer.dead_letters": None,
    "operations": None,
}

# package -> its query files (queries.sql when not named)
QUERY_FILES = {
    "calendar": ("queries.sql", "expiry.sql"),
    "promotion": ("queries.sql", "expiry.sql"),
    "observability": ("database_health.sql",),
    "outbox": ("queries.sql", "gauges.sql"),
}

# what a statement written in Python starts with (a query file's statement is read from the file, never written here)
_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|EXISTS|SET)\b")


def _folder(package: str) -> Path:
    return SRC.joinpath(*package.split("."))


def _files(package: str) -> tuple[str, ...]:
    return QUERY_FILES.get(package, ("queries.sql",))


def _modules(package: str) -> list[Path]:
    names = CONVERTED[package]
    return [_folder(package) / n for n in names] if names else sorted(_folder(package).glob("*.py"))


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, f-strings' literal parts included, with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


@pytest.mark.parametrize("package", sorted(CONVERTED))
def test_no_statement_is_written_in_python(package):
    inline = [
        f"{path.name}:{line}: {text.strip().splitlines()[0]}"
        for path in _modules(package)
        for line, text in _strings(path)
        if _STATEMENT.match(text)
    ]
    assert inline == [], f"write these in {_folder(package).relative_to(SRC.parent)}/{_files(package)[0]}: {inline}"


@pytest.mark.parametrize("package", sorted(CONVERTED))
def test_every_named_statement_is_used(package):
    names = [name for file in _files(package) for name in load_queries(f"pin.{package}", file)]
    code = "\n".join(path.read_text(encoding="utf-8") for path in _folder(package).glob("*.py"))
    unused = [name for name in names if f'"{name}"' not in code]
    assert names
    assert unused == []
