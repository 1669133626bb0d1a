"""No row is ever left below a vpart's floor (docs/design/outbox-storage.md), with real concurrent transactions.

Several connections insert and commit out of id order, one holds the xmin horizon, writers commit late (after the
floor moved past their ids), rows go to the dead letters and come back under their original ids; between any two
steps the relay's own read (``OUTBOX_READ_OWNED``), the floor's advance (the lease renewal) and the view
``outbox.unpublished`` are run against the real table. The property checked after every step: the read and the view
give exactly the rows the table holds (every live row is a candidate; none twice), the read leaving out only the
keys held behind a dead letter. A threaded run then publishes (reads and deletes) while writers commit late and a
transaction holds the horizon, and checks that every committed row was published once, in id order per key.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pin.db import Conn, connect
from pin.outbox.dead_letters import dead_letter_replay
from pin.outbox.relay import queries
from pin.outbox.writer import OutboxMode, outbox_insert
from tests.outbox.support import event_row
from tests.support.contention import holding_connection
from tests.support.deep import DEEP, examples

pytestmark = pytest.mark.integration

OWNER = "floor-test"
WRITERS = 4
# few keys, so that keys share vparts and have several rows each
KEYS = [f"thing-{n}" for n in range(6)]
EVERYTHING = 1_000_000  # a read's limits when the whole candidate set is wanted
# the settle's acknowledged positions (outbox.acked_position): none, there is no broker here
_NO_MARKS = {"topics": "{}", "partitions": "{}", "offsets": "{}"}


def _own_every_vpart(conn: Conn) -> None:
    conn.execute(
        "UPDATE outbox.relay_lease SET owner = %s, expires_at = now() + interval '1 hour', epoch = epoch + 1",
        (OWNER,),
    )


def _advance(conn: Conn) -> None:
    """The lease renewal, which moves every owned vpart's floor (autocommit connection: its own transaction)."""
    with conn.transaction():
        conn.execute(queries.RELAY_PLAN_BY_INDEX)
        conn.execute(queries.RELAY_LEASE_RENEW, {"owner": OWNER, "ttl": 3600})


def _read(conn: Conn, per_vpart: int = EVERYTHING) -> list[dict[str, object]]:
    """The relay's read, as the pipeline runs it (nothing in flight)."""
    conn.execute(queries.RELAY_PLAN_BY_INDEX)
    params = {"owner": OWNER, "per_vpart": per_vpart, "limit": EVERYTHING, "in_flight": "{}"}
    with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
        rows = cur.execute(queries.OUTBOX_READ_OWNED, params).fetchall()
    return [{"id": row[0], "message_id": row[1], "epoch": row[3], "key": row[5]} for row in rows]


def _check_every_live_row_is_read(conn: Conn) -> int:
    """In one snapshot: the read and the view give exactly the table's rows (the read without the keys behind a
    dead letter), none twice. Returns how many live rows were at or below their vpart's floor (found only
    because the floor's snapshot had not seen their transaction end)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        live = {
            int(str(r["id"])): str(r["message_key"]) for r in conn.execute("SELECT id, message_key FROM outbox.message")
        }
        held = {str(r["message_key"]) for r in conn.execute("SELECT message_key FROM outbox.dead_letter")}
        read = [int(str(r["id"])) for r in _read(conn)]
        view = [int(str(r["id"])) for r in conn.execute("SELECT id FROM outbox.unpublished")]
        below = conn.execute(
            "SELECT count(*) AS n FROM outbox.message m JOIN outbox.relay_lease l USING (vpart)"
            " WHERE m.id <= l.floor_id"
        ).fetchone()
    assert len(view) == len(set(view)), "a row is in two parts of outbox.unpublished"
    assert set(view) == set(live), "outbox.unpublished is not the table's rows"
    assert len(read) == len(set(read)), "the relay read a row twice"
    assert set(read) == {row_id for row_id, key in live.items() if key not in held}, "the relay's read missed a row"
    assert below is not None
    return int(str(below["n"]))


class _World:
    """The writers' connections (each with its transaction, open or not), the horizon's holder, and the relay's."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url
        self.relay = connect(database_url, autocommit=True)
        _own_every_vpart(self.relay)
        self.writers = [connect(database_url) for _ in range(WRITERS)]
        self.open = [False] * WRITERS
        self.holder = holding_connection(database_url)
        self.holder.execute("SELECT pg_current_xact_id()")  # holds the xmin horizon until released
        self.published: list[str] = []  # message ids, in publication order
        self.dead: list[str] = []  # message ids in the dead letters
        self.late_rows_seen = 0

    def close(self) -> None:
        for conn in [*self.writers, self.holder, self.relay]:
            conn.close()

    def step(self, op: tuple[str, int, int]) -> None:
        kind, who, what = op
        w = who % WRITERS
        if kind == "insert":
            outbox_insert(self.writers[w], [event_row(KEYS[what % len(KEYS)], what)])
            self.open[w] = True
        elif kind == "commit":
            self.writers[w].commit()
            self.open[w] = False
        elif kind == "rollback":
            self.writers[w].rollback()
            self.open[w] = False
        elif kind == "advance":
            _advance(self.relay)
        elif kind == "publish":
            self._publish(what + 1)
        elif kind == "dead_letter":
            self._dead_letter()
        elif kind == "replay" and self.dead and not self.open[w]:
            dead_letter_replay(self.writers[w], uuid.UUID(self.dead.pop(what % len(self.dead))), mode=OutboxMode.RELAY)
        elif kind == "release":
            self.holder.commit()
            self.holder.execute("SELECT pg_current_xact_id()")
        self.late_rows_seen += _check_every_live_row_is_read(self.relay)

    def _publish(self, per_vpart: int) -> None:
        rows = _read(self.relay, per_vpart)
        ids = "{" + ",".join(str(r["id"]) for r in rows) + "}"
        self.relay.execute(queries.OUTBOX_DELETE_PUBLISHED, {**_NO_MARKS, "ids": ids})
        self.published += [str(r["message_id"]) for r in rows]

    def _dead_letter(self) -> None:
        rows = _read(self.relay, 1)
        if rows:
            row = rows[0]
            fence = {"id": row["id"], "owner": OWNER, "epoch": row["epoch"], "error": "test", "permanent": True}
            if self.relay.execute(queries.OUTBOX_DEAD_LETTER, fence).fetchone():
                self.dead.append(str(row["message_id"]))

    def finish(self) -> None:
        """Every writer commits, the horizon is released, the dead letters replayed, and the outbox drained."""
        for w in range(WRITERS):
            self.step(("commit", w, 0))
        self.holder.commit()
        for message_id in list(self.dead):
            dead_letter_replay(self.writers[0], uuid.UUID(message_id), mode=OutboxMode.RELAY)
        self.dead = []
        for _ in range(10):
            _advance(self.relay)
            self._publish(EVERYTHING)
        left = self.relay.execute("SELECT count(*) AS n FROM outbox.message").fetchone()
        assert left is not None
        assert left["n"] == 0, "rows left behind after a drain"


_OPS = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 7), st.integers(0, 50)),
    st.tuples(st.sampled_from(["commit", "commit", "rollback"]), st.integers(0, 7), st.just(0)),
    st.tuples(st.sampled_from(["advance", "advance", "publish", "dead_letter", "replay", "release"]),
              st.integers(0, 7), st.integers(0, 3)),
)  # fmt: skip


@contextmanager
def _world(database_url: str) -> Iterator[_World]:
    world = _World(database_url)
    try:
        yield world
    finally:
        world.close()


@pytest.mark.deep
@settings(
    max_examples=examples(200, share=10, least=20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(_OPS, min_size=5, max_size=60))
def test_every_live_row_is_read_whatever_the_interleaving(database_url: str, ops: list[tuple[str, int, int]]) -> None:
    with _world(database_url) as world:
        with connect(database_url, autocommit=True) as conn:  # each example from an empty outbox
            conn.execute("DELETE FROM outbox.message")
            conn.execute("DELETE FROM outbox.dead_letter")
        for op in ops:
            world.step(op)
        event(f"late rows below a floor: {'some' if world.late_rows_seen else 'none'}")
        world.finish()


def test_a_late_commit_and_a_replay_below_the_floor_are_read(database_url: str) -> None:
    """The two ways a live row ends up at or below its vpart's floor, made to happen: a transaction that took its
    id early and commits after the floor moved past it (found because the floor's snapshot saw it running), and a
    dead letter replayed under its original id after the floor moved on (its transaction began after the floor's
    snapshot); all the while another transaction holds the horizon."""
    key = KEYS[0]
    with _world(database_url) as world:
        late, other = world.writers[0], world.writers[1]
        outbox_insert(late, [event_row("late-key", 1)])  # takes the smallest id, commits last
        outbox_insert(other, [event_row("dead-key", 0)])
        other.commit()
        for seq in range(3):
            outbox_insert(other, [event_row(key, seq)])
            other.commit()
        world.step(("dead_letter", 0, 0))  # the smallest committed row (dead-key's) goes to the dead letters
        world.step(("publish", 0, 3))
        world.step(("advance", 0, 0))
        world.step(("publish", 0, 3))
        world.step(("advance", 0, 0))
        assert world.relay.execute("SELECT count(*) AS n FROM outbox.message").fetchone() == {"n": 0}
        assert world.relay.execute("SELECT min(floor_id) AS f FROM outbox.relay_lease").fetchone() == {"f": 5}
        late.commit()  # the late row is now live, at or below its floor
        assert _check_every_live_row_is_read(world.relay) >= 1
        world.step(("replay", 2, 0))  # the dead letter back under its original id, below its floor
        assert _check_every_live_row_is_read(world.relay) >= 1
        world.finish()


@pytest.mark.deep
def test_every_committed_row_is_published_once_in_order_per_key_while_writers_commit_late(database_url: str) -> None:
    """Writer threads commit out of id order (some hold their transaction a while after inserting), a transaction
    holds the horizon throughout, and a publisher reads with the relay's read, deletes what it read and advances
    the floors all along: every committed row is published exactly once, and each key's rows in id order (per
    key, id order is commit order: the writers serialize a key as the aggregate's row lock does)."""
    seconds = 20.0 if DEEP else 4.0
    stop = threading.Event()
    committed: list[int] = []
    lock = threading.Lock()

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        with connect(database_url) as conn:
            while not stop.is_set():
                key = rng.choice(KEYS)
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))  # the aggregate's row lock
                rows = [event_row(key, 0) for _ in range(rng.randint(1, 3))]
                outbox_insert(conn, rows)
                found = conn.execute(
                    "SELECT id FROM outbox.message WHERE message_id = ANY(%s)", ([row.message_id for row in rows],)
                )
                ids = [int(str(r["id"])) for r in found]
                if rng.random() < 0.15:
                    time.sleep(rng.uniform(0.2, 1.0))  # a late commit: the floor moves past its ids meanwhile
                if rng.random() < 0.1:
                    conn.rollback()
                    continue
                conn.commit()
                with lock:
                    committed.extend(ids)

    published: list[tuple[int, str]] = []
    holder = holding_connection(database_url)
    holder.execute("SELECT pg_current_xact_id()")
    relay = connect(database_url, autocommit=True)
    _own_every_vpart(relay)
    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + seconds
        last_advance = 0.0
        while True:
            done = time.monotonic() >= deadline
            if done:
                stop.set()
                for thread in threads:
                    thread.join(timeout=10)
            if time.monotonic() - last_advance > 0.2 or done:
                _advance(relay)
                last_advance = time.monotonic()
            rows = _read(relay, 5)
            if rows:
                relay.execute(
                    queries.OUTBOX_DELETE_PUBLISHED,
                    {**_NO_MARKS, "ids": "{" + ",".join(str(r["id"]) for r in rows) + "}"},
                )
                published += [(int(str(r["id"])), str(r["key"])) for r in rows]
            elif done:
                break
        floors = relay.execute("SELECT max(floor_id) AS f FROM outbox.relay_lease").fetchone()
    finally:
        stop.set()
        holder.close()
        relay.close()
    ids = [row_id for row_id, _ in published]
    assert len(ids) == len(set(ids)), "a row was published twice"
    assert sorted(ids) == sorted(committed), "a committed row was never published (or a rolled-back one was)"
    per_key: dict[str, list[int]] = defaultdict(list)
    for row_id, key in published:
        per_key[key].append(row_id)
    assert all(rows == sorted(rows) for rows in per_key.values()), "a key's rows were published out of order"
    assert floors is not None
    assert int(str(floors["f"])) > 0, "the floors never moved: the test read from the heads"
