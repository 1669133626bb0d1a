"""A small reader of PostgreSQL's pgoutput logical decoding protocol (version 1), for tests.

It decodes what ``pg_logical_slot_get_binary_changes(slot, NULL, NULL, 'proto_version', '1',
'publication_names', ...)`` returns: Begin, Relation, Insert, Update, Delete, Truncate, Message and Commit
messages, columns in text form (the form Debezium's connector reads them in). Only what the cdc tests need; an
unknown message type fails loudly. Format: PostgreSQL's "Logical Replication Message Formats".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass
class Change:
    """One row change of a transaction: the operation letter (I, U, D), the relation and its new columns."""

    xid: int
    relation: str
    op: str
    row: dict[str, str | None]


@dataclass
class Transaction:
    """A committed transaction as the stream gives it, in commit order: its changes and logical messages."""

    xid: int
    final_lsn: int
    changes: list[Change] = field(default_factory=list)
    messages: list[tuple[str, bytes]] = field(default_factory=list)


class _Reader:
    """Big-endian fields of one message."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(f"!{fmt}", self._data, self._at)
        self._at += struct.calcsize(fmt)
        return int(value)

    def byte(self) -> str:
        value = self._data[self._at : self._at + 1].decode("ascii")
        self._at += 1
        return value

    def string(self) -> str:
        end = self._data.index(b"\0", self._at)
        value = self._data[self._at : end].decode("utf-8")
        self._at = end + 1
        return value

    def raw(self, length: int) -> bytes:
        value = self._data[self._at : self._at + length]
        self._at += length
        return value


class PgOutputDecoder:
    """Decodes a slot's messages in order; relations are remembered as the stream announces them."""

    def __init__(self) -> None:
        self._relations: dict[int, tuple[str, list[str]]] = {}
        self.transactions: list[Transaction] = []
        self.non_transactional_messages: list[tuple[str, bytes]] = []
        self._open: Transaction | None = None

    def feed(self, data: bytes) -> None:
        """One message (one row of pg_logical_slot_get_binary_changes)."""
        reader = _Reader(data)
        kind = reader.byte()
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:
            raise ValueError(f"pgoutput message type {kind!r} is not handled by this reader")
        handler(reader)

    def _on_B(self, r: _Reader) -> None:  # noqa: N802 - the protocol's letters
        final_lsn = r.take("Q")
        r.take("q")  # commit timestamp
        self._open = Transaction(xid=r.take("I"), final_lsn=final_lsn)

    def _on_C(self, r: _Reader) -> None:  # noqa: N802
        assert self._open is not None, "a commit without a begin"
        self.transactions.append(self._open)
        self._open = None

    def _on_O(self, r: _Reader) -> None:  # noqa: N802 - origin: nothing to keep
        del r

    def _on_Y(self, r: _Reader) -> None:  # noqa: N802 - a type: columns are read as text anyway
        del r

    def _on_R(self, r: _Reader) -> None:  # noqa: N802
        relid = r.take("I")
        name = f"{r.string()}.{r.string()}"
        r.take("b")  # replica identity
        columns = []
        for _ in range(r.take("h")):
            r.take("b")  # flags
            columns.append(r.string())
            r.take("I")  # type oid
            r.take("i")  # type modifier
        self._relations[relid] = (name, columns)

    def _tuple(self, r: _Reader, columns: list[str]) -> dict[str, str | None]:
        values: dict[str, str | None] = {}
        count = r.take("h")
        for name in columns[:count]:
            kind = r.byte()
            if kind == "n":
                values[name] = None
            elif kind == "t":
                values[name] = r.raw(r.take("i")).decode("utf-8")
            else:  # "u": an unchanged TOASTed value, only in updates
                raise ValueError(f"column {name}: tuple data kind {kind!r}")
        return values

    def _change(self, op: str, r: _Reader) -> None:
        assert self._open is not None, "a change outside a transaction"
        name, columns = self._relations[r.take("I")]
        marker = r.byte()
        if op in "UD" and marker in "KO":  # the old key or row first; keep the new tuple (updates) only
            old = self._tuple(r, columns)
            if op == "D":
                self._open.changes.append(Change(self._open.xid, name, op, old))
                return
            marker = r.byte()
        assert marker == "N", marker
        self._open.changes.append(Change(self._open.xid, name, op, self._tuple(r, columns)))

    def _on_I(self, r: _Reader) -> None:  # noqa: N802
        self._change("I", r)

    def _on_U(self, r: _Reader) -> None:  # noqa: N802
        self._change("U", r)

    def _on_D(self, r: _Reader) -> None:  # noqa: N802
        self._change("D", r)

    def _on_T(self, r: _Reader) -> None:  # noqa: N802
        assert self._open is not None
        self._open.changes.append(Change(self._open.xid, "*", "T", {}))
        del r

    def _on_M(self, r: _Reader) -> None:  # noqa: N802 - a logical decoding message (pg_logical_emit_message)
        transactional = r.take("b") == 1
        r.take("Q")  # lsn
        prefix = r.string()
        content = r.raw(r.take("I"))
        if transactional and self._open is not None:
            self._open.messages.append((prefix, content))
        else:
            self.non_transactional_messages.append((prefix, content))
