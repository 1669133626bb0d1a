"""Capture the statements a worker really issues, and turn them into a pgbench script.

Capture: the worker's own job class runs in this process on a connection pool built like
:func:`pin.db.create_pool` (same ``check``, same row factory), whose connections record every statement
(``execute``/``executemany`` through the cursor) and every transaction command psycopg sends by itself (BEGIN,
COMMIT, ROLLBACK, SAVEPOINT, RELEASE). Nothing in ``src/`` changes: only the connection and cursor classes of
the bench's pool do.

Conversion: each recorded statement becomes a pgbench command with the *same SQL text*; each parameter becomes a
pgbench variable (``-M prepared`` sends them as parameters of a prepared statement, as psycopg's auto-prepare
does after five executions). Values that identify the item (the appointment the claim returned, its slot,
event and reminders) are taken from earlier results with ``\\gset``, exactly as the worker takes them from the
rows it fetched; other values are constants passed with ``-D`` (a status, a version, the payload of the same
size). The one addition is a helper statement per item that yields what the worker computes on the client
without a round trip (new message ids, the reminder ids the seed derived from the appointment id).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool


@dataclass
class Statement:
    """One thing the client sent: a query with its parameters, or a transaction command (``params`` None)."""

    sql: str
    params: Any = None
    kind: str = "execute"  # execute | executemany | command

    @property
    def text(self) -> str:
        """The SQL with whitespace collapsed (for comparing shapes and for the report)."""
        return " ".join(self.sql.split())


TRACE: list[Statement] = []


def _sql_text(query: Any, conn: psycopg.Connection[Any]) -> str:
    if isinstance(query, bytes):
        return query.decode()
    if isinstance(query, str):
        return query
    return str(query.as_string(conn))


def _snapshot(params: Any) -> Any:
    """A copy of the parameters as they are now (lists copied)."""
    if isinstance(params, Mapping):
        return {k: list(v) if isinstance(v, list) else v for k, v in params.items()}
    if isinstance(params, list | tuple):
        return [list(v) if isinstance(v, list) else v for v in params]
    return params


class RecordingCursor(psycopg.Cursor[Any]):
    """A cursor that appends what it executes to TRACE."""

    # Recorded after the call: psycopg sends the BEGIN of an implicit transaction inside it, and that BEGIN
    # must come first in the script. Parameters are copied: callers may mutate a list they passed later on.

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        snapshot = _snapshot(params)
        result = super().execute(query, params, **kwargs)
        TRACE.append(Statement(_sql_text(query, self.connection), snapshot, "execute"))
        return result

    def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> None:  # type: ignore[override]
        params = list(params_seq)
        snapshot = [_snapshot(row) for row in params]
        super().executemany(query, params, **kwargs)
        TRACE.append(Statement(_sql_text(query, self.connection), snapshot, "executemany"))


class RecordingConnection(psycopg.Connection[Any]):
    """A connection that appends the transaction commands psycopg sends by itself to TRACE."""

    def _exec_command(self, command: Any, result_format: pq.Format = pq.Format.TEXT) -> Any:
        TRACE.append(Statement(_sql_text(command, self), None, "command"))
        return (yield from super()._exec_command(command, result_format))


def recording_pool(url: str) -> ConnectionPool[Any]:
    """A pool like pin.db.create_pool's (same check, dict rows) whose connections record their statements."""
    return ConnectionPool(
        url,
        min_size=1,
        max_size=2,
        name="bench-trace",
        open=True,
        check=ConnectionPool.check_connection,
        kwargs={"row_factory": dict_row, "cursor_factory": RecordingCursor},
        connection_class=RecordingConnection,
    )


# --------------------------------------------------------------------------------------------- conversion

_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)[sbt]|%[sbt]")


@dataclass
class Binder:
    """Turns parameter values into pgbench variable references.

    ``known`` maps a value's text to a variable that an earlier ``\\gset`` (or the helper) filled. Anything else
    becomes a constant (``-D``), except new uuids (message ids), which take the next helper column ``m<k>``.
    """

    known: dict[str, str]
    as_of: datetime | None = None
    constants: dict[str, str] = field(default_factory=dict)  # variable -> value
    _by_value: dict[str, str] = field(default_factory=dict)
    fresh_uuids: list[str] = field(default_factory=list)
    fresh_prefix: str = "h_m"
    list_constant: Callable[[list[Any]], str | None] | None = None
    # whole arrays an earlier \\gset (or the helper) filled as one variable: (values as text) -> the reference
    # (e.g. ``:h_ids::uuid[]``)
    known_lists: dict[tuple[str, ...], str] = field(default_factory=dict)

    def constant(self, text: str) -> str:
        """A -D variable holding ``text`` (one per distinct value)."""
        if text not in self._by_value:
            name = f"k{len(self._by_value)}"
            self._by_value[text] = name
            self.constants[name] = text
        return self._by_value[text]

    def ref(self, value: Any) -> str:  # noqa: PLR0911, PLR0912 - one case per parameter type
        """The SQL fragment that stands for ``value`` in the statement."""
        if value is None:
            return "NULL"
        if isinstance(value, uuid.UUID | str):
            text = str(value)
            cast = "::uuid" if isinstance(value, uuid.UUID) else ""
            if text in self.known:
                return f":{self.known[text]}{cast}"
            if isinstance(value, uuid.UUID):
                if text not in self.fresh_uuids:
                    self.fresh_uuids.append(text)
                return f":{self.fresh_prefix}{self.fresh_uuids.index(text)}::uuid"
            return f":{self.constant(text)}"
        if isinstance(value, bool):
            return f":{self.constant('true' if value else 'false')}::boolean"
        if isinstance(value, int | float | Decimal):
            return f":{self.constant(str(value))}"
        if isinstance(value, datetime):
            if self.as_of is not None and value == self.as_of:
                return ":as_of::timestamptz"
            if str(value) in self.known:
                return f":{self.known[str(value)]}::timestamptz"
            return f":{self.constant(value.isoformat())}::timestamptz"
        if isinstance(value, timedelta):
            return f":{self.constant(f'{value.total_seconds()} seconds')}::interval"
        if isinstance(value, Jsonb):
            return f":{self.constant(json.dumps(value.obj, separators=(',', ':')))}::jsonb"
        if isinstance(value, list | tuple):
            texts = [str(v) for v in value]
            if tuple(texts) in self.known_lists:
                return self.known_lists[tuple(texts)]
            typed = _typed_array(value)
            if typed is not None:  # an array of scalars other than uuids: one constant of its own type
                literal, cast = typed
                return f":{self.constant(literal)}::{cast}"
            if texts and all(t in self.known for t in texts):
                return "ARRAY[" + ", ".join(f":{self.known[t]}::uuid" for t in texts) + "]::uuid[]"
            if self.list_constant is not None:
                replaced = self.list_constant(list(value))
                if replaced is not None:
                    return replaced
            return f":{self.constant('{' + ','.join(texts) + '}')}::uuid[]"
        raise TypeError(f"bench: no pgbench binding for a parameter of type {type(value).__name__}")


_ARRAY_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean[]"),
    (int, "integer[]"),
    (Decimal, "numeric[]"),
    (float, "double precision[]"),
    (datetime, "timestamptz[]"),
    (str, "text[]"),
)


def _typed_array(values: Sequence[Any]) -> tuple[str, str] | None:
    """A non-empty array of one scalar type other than uuid (NULLs allowed: an outbox row without a traceparent):
    its PostgreSQL literal and array type."""
    if not values:
        return None
    present = [v for v in values if v is not None]
    if not present:
        return "{" + ",".join(["NULL"] * len(values)) + "}", "text[]"
    for kind, cast in _ARRAY_TYPES:
        if all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in present):
            texts = [None if v is None else v.isoformat() if isinstance(v, datetime) else str(v) for v in values]
            quoted = ["NULL" if t is None else '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in texts]
            return "{" + ",".join(quoted) + "}", cast
    return None


def bind_sql(statement_sql: str, params: Any, binder: Binder) -> str:
    """The statement's SQL with each placeholder replaced by its pgbench reference."""
    positional = iter(params) if isinstance(params, Sequence) and not isinstance(params, str) else iter(())

    def replace(match: re.Match[str]) -> str:
        placeholder = match.group(0)
        if placeholder == "%%":
            return "%"
        name = match.group(1)
        if name is not None:
            assert isinstance(params, Mapping)
            return binder.ref(params[name])
        return binder.ref(next(positional))

    return _PLACEHOLDER.sub(replace, statement_sql)


def pgbench_command(statement: Statement, binder: Binder, gset: str | None = None) -> str:
    """One pgbench command (or a pipeline block for executemany)."""
    if statement.kind == "command" or (statement.params is None and statement.kind == "execute"):
        sql = statement.sql.strip().rstrip(";")
        if not sql:
            # the pool's connection check sends an empty query; the cheapest statement pgbench can send instead
            sql = "SELECT"
        return sql + (f" \\gset {gset}" if gset else ";")
    if statement.kind == "executemany":
        lines = ["\\startpipeline"]
        lines += [bind_sql(statement.sql, row, binder).strip().rstrip(";") + ";" for row in statement.params]
        lines.append("\\endpipeline")
        return "\n".join(lines)
    sql = bind_sql(statement.sql, statement.params, binder).strip().rstrip(";")
    return sql + (f" \\gset {gset}" if gset else ";")


def references(statement: Statement, values: Iterable[str]) -> bool:
    """Whether any parameter of the statement equals one of ``values`` (as text; lists looked into)."""
    wanted = set(values)

    def flat(params: Any) -> Iterable[Any]:
        if params is None:
            return []
        if isinstance(params, Mapping):
            params = list(params.values())
        out: list[Any] = []
        for p in params:
            if isinstance(p, list | tuple):
                out.extend(flat(p) if p and isinstance(p[0], list | tuple) else p)
            else:
                out.append(p)
        return out

    if statement.kind == "executemany":
        return any(str(v) in wanted for row in statement.params for v in flat(row))
    return any(str(v) in wanted for v in flat(statement.params))


def item_segment(trace: Sequence[Statement], first: Iterable[str], second: Iterable[str]) -> tuple[int, int]:
    """[start, end) of the second item's statements in a per-item trace of at least three items.

    An item's statements run from just after the previous item's COMMIT to its own COMMIT. ``first`` and
    ``second`` are the ids of the first two items; the second item's segment is used because its claim already
    carries a non-empty "attempted" list, like most claims of a cycle.
    """
    first_ref = next(i for i, s in enumerate(trace) if references(s, first))
    second_ref = next(i for i, s in enumerate(trace) if references(s, second))
    commit_after_first = next(i for i in range(first_ref, second_ref) if trace[i].text.upper() == "COMMIT")
    start = commit_after_first + 1
    end = next(i for i in range(second_ref, len(trace)) if trace[i].text.upper() == "COMMIT") + 1
    return start, end
