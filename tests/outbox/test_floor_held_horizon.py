"""The relay's read does not walk the dead rows a held xmin horizon keeps (docs/design/outbox-storage.md).

Counted, not timed: the shared buffers the relay's read touches (EXPLAIN (ANALYZE, BUFFERS) of the read itself),
before and after 50,000 rows were published and deleted while a transaction held the horizon, so that vacuum could
remove none of them. A read from each vpart's head (the floors given as 0) is the control: it
does walk them, which shows they are there.

The statistics are the test's own: autovacuum is off for ``outbox.message`` in the test's database. In a loaded suite
an automatic analyze ran at a moment of its timing, once under the horizon with every row dead, and the plan of the
second read was no longer that of the first; that state is a case of its own here (analyzed-while-dead), as are a
table analyzed while small and one never analyzed. In it the back-off guard, as an anti-join, scanned its whole
index once per row read (relay/queries.sql: outbox_read_sendable), and the floors' advance, free to sort, read the
whole vpart (relay_plan_advance): the last test counts both walks.
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


def _insert(conn: Conn, count: int, *, keys: str = "k-") -> None:
    conn.execute(
        "INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version, payload,"
        " value, occurred_at)"
        " SELECT gen_random_uuid(), g %% 64, 'pin.test.horizon.v1', %s || g, 'e', 1, '{}', '{}', now()"
        " FROM generate_series(1, %s) AS g",
        (keys, count),
    )


def _statistics_of_the_test(conn: Conn) -> None:
    """No automatic analyze of outbox.message in the test's database: its statistics are those the test gives it."""
    conn.execute("ALTER TABLE outbox.message SET (autovacuum_enabled = off)")


def _advance(conn: Conn, floors: KeptFloors) -> int:
    """The heartbeat's advance of the kept floors; returns the buffers it touched."""
    with conn.transaction():
        conn.execute(queries.RELAY_PLAN_BY_INDEX)
        conn.execute(queries.RELAY_PLAN_ADVANCE)
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


@pytest.mark.parametrize(
    ("analyzed", "analyzed_dead"),
    [(True, False), (False, False), (True, True)],
    ids=["analyzed-small", "never-analyzed", "analyzed-while-dead"],
)
def test_the_reads_cost_does_not_grow_with_the_dead_rows_of_a_held_horizon(
    database_url: str, analyzed: bool, analyzed_dead: bool
) -> None:
    relay = connect(database_url, autocommit=True)
    holder = holding_connection(database_url)
    try:
        _statistics_of_the_test(relay)
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
        for batch in range(DEAD_ROWS // 5_000):  # published in batches, the floors moving as the relay moves them
            _insert(relay, 5_000)
            _advance(relay, floors)
            _publish_all(relay)
            if analyzed_dead and batch == 0:  # as autovacuum may: many pages, every row dead
                relay.execute("ANALYZE outbox.message")
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


def test_the_back_off_guard_does_not_walk_the_dead_rows_of_other_keys(database_url: str) -> None:
    """Rows that went through a back-off (a broker outage), published under a held horizon, stay in the back-off
    guard's index (ix_outbox_message_backoff); the read probes it by the key of each row it reads, so that its cost
    does not grow with them: counted after 5,000 of them and after 50,000, other keys than those read."""
    relay = connect(database_url, autocommit=True)
    holder = holding_connection(database_url)
    counted: list[int] = []
    try:
        _statistics_of_the_test(relay)
        hold_vparts(relay, OWNER)
        floors = KeptFloors()
        floors.load(relay, range(VPARTS))
        _insert(relay, LIVE_ROWS)
        relay.execute("ANALYZE outbox.message")
        _publish_all(relay)
        holder.execute("SELECT pg_current_xact_id()")  # from here on vacuum may remove nothing
        for batch in range(DEAD_ROWS // 5_000):
            _insert(relay, 5_000, keys="outage-")
            relay.execute("UPDATE outbox.message SET attempts = 1, next_attempt_at = now() - interval '1 second'")
            _advance(relay, floors)
            _publish_all(relay)
            if batch == 0:  # as autovacuum may: many pages, every row dead (the floors' advance sorted the vpart)
                relay.execute("ANALYZE outbox.message")
            if batch in (0, DEAD_ROWS // 5_000 - 1):
                _insert(relay, LIVE_ROWS)
                _advance(relay, floors)
                advance = _advance(relay, floors)
                counted.append(_read_buffers(relay, floors))
                _publish_all(relay)
    finally:
        holder.close()
        relay.close()

    first, last = counted
    print(f"buffers: read after 5,000 rows in back-off {first}, after 50,000 {last}; advance {advance}")
    assert advance <= first, f"the floors' advance walked dead rows: {advance} buffers (the read: {first})"
    # a walk of the 45,000 more costs a buffer each (the guard reads each row's next_attempt_at on its page); probes
    # by key cost the same but for an index grown a level, one buffer more a probe (640 rows read: ~1,100 buffers)
    added = DEAD_ROWS - 5_000
    assert last - first < added // 20, f"the back-off guard walked dead rows: {first} buffers, then {last}"
