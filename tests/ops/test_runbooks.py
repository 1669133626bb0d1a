"""The runbooks' SQL runs against the real schema, and every `pin` command they cite exists with its options.

A runbook read at 3 a.m. must not contain a query with a wrong table or column name, or a command that does
not exist: both are executed here (the SQL in a transaction that is rolled back).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from pin.cli import app

RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
EXPECTED = {"appointment-timeout.md", "expire-promotions.md", "outbox-backlog.md", "consumers.md"}


def _blocks(language: str) -> list[tuple[str, str]]:
    found = []
    for path in sorted(RUNBOOKS.glob("*.md")):
        for match in re.finditer(rf"```{language}\n(.*?)```", path.read_text(), re.DOTALL):
            found.append((path.name, match.group(1)))
    return found


def _statements(sql: str) -> list[str]:
    """The statements of a block, psql variables bound to sample values, BEGIN/COMMIT left to the test."""

    def bind(match: re.Match[str]) -> str:
        name = match.group(1)
        return "'1'" if name == "dead_letter_id" else f"'{uuid.uuid4()}'"

    sql = re.sub(r":'(\w+)'", bind, sql)
    sql = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    parts = [part.strip() for part in sql.split(";")]
    return [part for part in parts if part and part.upper() not in ("BEGIN", "COMMIT")]


def test_the_seeds_runbooks_exist() -> None:
    assert {path.name for path in RUNBOOKS.glob("*.md")} >= EXPECTED


@pytest.mark.integration
def test_every_sql_block_runs_against_the_schema(database_url: str) -> None:
    blocks = _blocks("sql")
    assert len(blocks) >= 20
    with psycopg.connect(database_url) as conn:
        for name, block in blocks:
            for statement in _statements(block):
                try:
                    with conn.transaction(force_rollback=True):
                        conn.execute(statement)
                except psycopg.Error as exc:
                    pytest.fail(f"{name}: {exc}\n{statement}")


def _command_lines() -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    for path in sorted(RUNBOOKS.glob("*.md")):
        text = path.read_text()
        lines += [(path.name, m.group(1)) for m in re.finditer(r"`(pin [^`]+)`", text)]
        for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
            lines += [(path.name, line.split("#")[0].strip()) for line in block.splitlines()]
    return [(name, line) for name, line in lines if line.startswith("pin ")]


def test_every_pin_command_in_the_runbooks_exists_with_its_options() -> None:
    runner = CliRunner()
    lines = _command_lines()
    assert len(lines) >= 10
    problems = []
    for name, line in lines:
        words = line.split()[1:]
        command = [w for w in words if re.fullmatch(r"[a-z][a-z-]*", w)]
        command = command[: next((i for i, w in enumerate(words) if w.startswith("-")), len(words))]
        options = [w.split("=")[0] for w in words if w.startswith("--")]
        result = runner.invoke(app, [*command, "--help"])
        if result.exit_code != 0:
            problems.append(f"{name}: `{line}`: `pin {' '.join(command)}` does not exist")
            continue
        problems += [f"{name}: `{line}`: no option {o}" for o in options if o not in result.output]
    assert not problems, "\n".join(problems)
