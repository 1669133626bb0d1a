"""The relay's read does not walk the dead rows a held xmin horizon keeps (docs/design/outbox-storage.md).

Counted, not timed: the shared buffers the relay's read touches (EXPLAIN (ANALYZE, BUFFERS) of the read itself),
before and after 50,000 rows were published and deleted while a transaction held the horizon, so that vacuum could
remove none of them. A read from each vpart's head (the floors given as 0) is the control: it
does walk them, which shows they are there.
"""

from __future__ import annotations

import json

import pytest

from pin.db import Conn, connect
from pin.outbox.relay import queries
from pin.outbox.relay.kept_floors import KeptFloors
from pin.outbox.writer import VPARTS
from tests.outbox.support import hold_vparts
from tests.support.contention import holding_connection

pytestmark = pytest.mark.integration

OWNER = "horizon-test"
DEAD_ROWS = 50_000
LIVE_ROWS = 640  # ten per vpart


def _insert(conn: Conn, count: int) -> None:
    conn.execute(
        "INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version, payload,"
        " value, occurred_at)"
        " SELECT gen_random_uuid(), g %% 64, 'pin.test.horizon.v1', 'k-' || g, 'e', 1, '{}', '{}', now()"
        " FROM generate_series(1, %s) AS g",
        (count,),
    )


def _advance(conn: Conn, floors: KeptFloors) -> int:
    """The heartbeat's advance of the kept floors; returns the buffers it touched."""
    with conn.transaction():
        conn.execute(queries.RELAY_PLAN_BY_INDEX)
        touched = _buffers(conn, queries.RELAY_FLOOR_ADVANCE, floors.params())
        floors.advance(conn)
        return touched


def _read_buffers(conn: Conn, floors: KeptFloors, *, from_heads: bool = False) -> int:
    given = floors.params()
    if from_heads:  # the control: every floor id put back to 0
        given["floor_ids"] = [0] * len(given["vparts"])  # type: ignore[arg-type]
    with conn.transaction():
        conn.execute(queries.RELAY_PLAN_BY_INDEX)
        params = {**given, "owner": OWNER, "per_vpart": 32, "limit": 2000, "in_flight": "{}"}
        return _buffers(conn, queries.OUTBOX_READ_OWNED, params)


def _buffers(conn: Conn, statement: str, params: dict[str, object]) -> int:
    row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", params).fetchone()
    assert row is not None
    plan = next(iter(row.values()))
    top = (plan if isinstance(plan, list) else json.loads(str(plan)))[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def _publish_all(conn: Conn) -> None:
    conn.execute("DELETE FROM outbox.message")


@pytest.mark.parametrize("analyzed", [True, False], ids=["analyzed-small", "never-analyzed"])
def test_the_reads_cost_does_not_grow_with_the_dead_rows_of_a_held_horizon(database_url: str, analyzed: bool) -> None:
    relay = connect(database_url, autocommit=True)
    holder = holding_connection(database_url)
    try:
        hold_vparts(relay, OWNER)
        floors = KeptFloors()
        floors.load(relay, range(VPARTS))
        _insert(relay, LIVE_ROWS)
        # statistics of a small table, as autovacuum leaves them early on: a few rows per vpart, so that a plan
        # free to choose would scan a whole vpart rather than probe it (a table never analyzed is the other case)
        if analyzed:
            relay.execute("ANALYZE outbox.message")
        _advance(relay, floors)
        before = _read_buffers(relay, floors)
        _publish_all(relay)

        holder.execute("SELECT pg_current_xact_id()")  # from here on vacuum may remove nothing
        for _ in range(DEAD_ROWS // 5_000):  # published in batches, the floors moving as the relay moves them
            _insert(relay, 5_000)
            _advance(relay, floors)
            _publish_all(relay)
        _insert(relay, LIVE_ROWS)
        _advance(relay, floors)
        advance = _advance(relay, floors)
        after = _read_buffers(relay, floors)
        from_heads = _read_buffers(relay, floors, from_heads=True)  # the control: the read from each vpart's head
    finally:
        holder.close()
        relay.close()

    print(f"buffers: read before {before}, after {after}, from the heads {from_heads}; advance {advance}")
    # from the heads, every dead row costs at least a visit to its page (a page holds a few dozen rows)
    assert from_heads - before > DEAD_ROWS // 2, f"the dead rows are not there to walk: {from_heads} buffers"
    assert after <= 1.25 * before + 64, f"the read walked dead rows: {before} buffers before, {after} after"
    assert advance <= before, f"the floors' advance walked dead rows: {advance} buffers (the read: {before})"
