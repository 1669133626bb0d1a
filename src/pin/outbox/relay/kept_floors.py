"""The floors one relay instance keeps in memory for the vparts it holds (docs/design/outbox-storage.md).

The relay reads past these floors and advances them at every heartbeat by a read-only statement; it stores them in
``outbox.relay_floor`` (for ``outbox.unpublished``, the gauges, the console and the vpart's next owner) only when
they moved, at most every :data:`FLOOR_WRITE_SECONDS`, and when it gives a vpart back. A floor computed by a valid
advance stays valid for ever, so the stored one, however old, is a valid place to start: it only walks more rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from pin.db import Conn
from pin.outbox.relay import queries

# How often at most a vpart's floor is stored while it moves: under a held xmin horizon every write leaves a row
# version no vacuum may remove (at most 64 / 10 = 6.4 a second, against 64 a second when every heartbeat rewrote
# the floors), and the other readers of the stored floors walk at most this long of a vpart's published rows.
FLOOR_WRITE_SECONDS = 10.0


@dataclass(frozen=True)
class Floor:
    """A floor: an id, and the snapshot it was taken under (its xmax and its transactions in progress)."""

    floor_id: int
    xmax: int
    xip: tuple[int, ...]


def given(floors: dict[int, Floor]) -> dict[str, object]:
    """The parameters of the ``{given}`` row source (relay/queries.sql: relay_floors_given): one array per column."""
    vparts = sorted(floors)
    return {
        "vparts": vparts,
        "floor_ids": [floors[v].floor_id for v in vparts],
        "floor_xmaxs": [floors[v].xmax for v in vparts],
        "floor_xips": ["{" + ",".join(map(str, floors[v].xip)) + "}" for v in vparts],
    }


def _floor_of(row: dict[str, object]) -> Floor:
    xip = row["floor_xip"]
    assert isinstance(xip, list)
    return Floor(int(str(row["floor_id"])), int(str(row["floor_xmax"])), tuple(int(x) for x in xip))


class KeptFloors:
    """vpart -> floor for the vparts this instance holds.

    Its owner (``Leases``) changes it under its lock; ``params`` needs none, from any thread: every change replaces
    the mapping whole, so a reader takes one mapping and keeps it, and a floor older than the newest is still valid
    (docs/design/outbox-storage.md), so the relay's read, which takes the floors while a heartbeat moves them, at
    worst walks a few rows more. It never waits for the heartbeat's transaction."""

    def __init__(self, write_seconds: float = FLOOR_WRITE_SECONDS) -> None:
        self._floors: dict[int, Floor] = {}
        self._stored: dict[int, int] = {}  # vpart -> the floor id last stored
        self._write_seconds = write_seconds
        self._written_at = float("-inf")

    def params(self) -> dict[str, object]:
        """The floors as the relay's read takes them."""
        return given(self._floors)

    def floor_ids(self) -> dict[int, int]:
        """vpart -> floor id, for tests and logs."""
        return {vpart: floor.floor_id for vpart, floor in self._floors.items()}

    def keep_only(self, vparts: Iterable[int]) -> None:
        """Forget the floors of the vparts this instance no longer holds."""
        held = set(vparts)
        self._floors = {v: floor for v, floor in self._floors.items() if v in held}
        self._stored = {v: floor_id for v, floor_id in self._stored.items() if v in held}

    def load(self, conn: Conn, vparts: Iterable[int]) -> None:
        """Take the stored floors of vparts this instance holds and does not keep yet (it just took them)."""
        missing = sorted(set(vparts) - set(self._floors))
        if not missing:
            return
        floors = dict(self._floors)
        for row in conn.execute(queries.RELAY_FLOOR_LOAD, {"vparts": missing}):
            vpart = int(str(row["vpart"]))
            floors[vpart] = _floor_of(row)
            self._stored[vpart] = floors[vpart].floor_id
        self._floors = floors

    def advance(self, conn: Conn) -> None:
        """Move every kept floor up under this statement's snapshot (a read; run after ``RELAY_PLAN_BY_INDEX`` in
        the same transaction, so that each part is read along its index; it adds ``RELAY_PLAN_ADVANCE``)."""
        if not self._floors:
            return
        conn.execute(queries.RELAY_PLAN_ADVANCE)
        rows = conn.execute(queries.RELAY_FLOOR_ADVANCE, self.params()).fetchall()
        self._floors = {int(str(row["vpart"])): _floor_of(row) for row in rows}

    def write(self, conn: Conn, owner: str, *, vparts: Iterable[int] | None = None, now: bool = False) -> int:
        """Store the floors that moved since they were last stored, if :data:`FLOOR_WRITE_SECONDS` passed since the
        last write (or ``now``), only those of ``vparts`` when given; returns how many were written."""
        if not now and time.monotonic() - self._written_at < self._write_seconds:
            return 0
        wanted = set(self._floors if vparts is None else vparts)
        moved = {v: floor for v, floor in self._floors.items() if v in wanted and self._stored.get(v) != floor.floor_id}
        if vparts is None:
            self._written_at = time.monotonic()
        if not moved:
            return 0
        conn.execute(queries.RELAY_FLOOR_WRITE, {**given(moved), "owner": owner})
        for vpart, floor in moved.items():
            self._stored[vpart] = floor.floor_id
        return len(moved)
