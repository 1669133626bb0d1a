"""The console's outbox page over HTTP on a real PostgreSQL: it reads the outbox's new storage as
docs/design/outbox-storage.md allows (the rows past each vpart's floor, never outbox.message walked by id), and
shows the vpart → lease map with each floor, red where the floor went stale."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from psycopg_pool import ConnectionPool

from pin.console import pages
from pin.console.replay_jobs import ReplayJobs
from pin.db import Conn
from pin.messaging.topics import APPOINTMENT_CANCELLED, APPOINTMENT_CREATED
from pin.settings import Settings
from tests.console.conftest import TestClient

pytestmark = pytest.mark.integration

_SEED = """
INSERT INTO outbox.message (message_id, vpart, topic, message_key, event_type, contract_version, payload, value,
                            headers, occurred_at)
SELECT gen_random_uuid(), mod(i, 64), CASE WHEN mod(i, 3) = 0 THEN %(other)s ELSE %(topic)s END, 'key-' || i,
       'AppointmentCancelledEvent', 1, '{}', '{}', '{}', now()
FROM generate_series(1, %(count)s) AS i
"""
_ROW = re.compile(r"<tr><td>(\d+)</td><td>(pin\.[a-z.0-9-]+)</td>")


def _listed(client: TestClient, headers: dict[str, str], query: str = "") -> list[int]:
    """Every row the page lists, following its "Next page" links."""
    ids: list[int] = []
    path = f"/console/outbox{query}"
    for _ in range(100):
        answer = client.get(path, headers=headers)
        assert answer.status_code == 200, answer.text[:500]
        ids += [int(found[0]) for found in _ROW.findall(answer.text.split("<h2>Rows waiting", 1)[1])]
        following = re.search(r'<a href="(/console/outbox\?[^"]*after=\d+[^"]*)">Next page</a>', answer.text)
        if following is None:
            return ids
        path = following[1].replace("&amp;", "&")
    raise AssertionError("more pages than rows")


def test_the_rows_waiting_are_those_past_the_floors_oldest_first_each_once_across_pages(
    client: TestClient, pool: ConnectionPool[Conn], bearer_of: Callable[[str], dict[str, str]]
) -> None:
    with pool.connection() as conn:
        conn.execute(_SEED, {"topic": APPOINTMENT_CANCELLED, "other": APPOINTMENT_CREATED, "count": 300})
        conn.commit()
        conn.execute(_SEED.replace("mod(i, 64)", "5"), {"topic": APPOINTMENT_CANCELLED, "other": "-", "count": 1})
        conn.commit()  # one more row of vpart 5, in a transaction of its own
        fifth = conn.execute("SELECT id, xid FROM outbox.message WHERE vpart = 5 ORDER BY id").fetchall()
        # vpart 5's floor moved past all its rows as an advance might: the seed's rows (one transaction) are below
        # it and not read (the invariant says no live row is there; a reader that walked outbox.message from its
        # head would list them); the last row's transaction was running at the floor's snapshot: listed (the
        # floor's third part)
        conn.execute(
            "UPDATE outbox.relay_floor SET floor_id = %(floor)s, floor_xmax = %(xmax)s, floor_xip = %(xip)s"
            " WHERE vpart = 5",
            {"floor": fifth[-1]["id"], "xmax": fifth[-1]["xid"] + 1_000, "xip": [fifth[-1]["xid"]]},
        )
        conn.commit()
        expected = [int(row["id"]) for row in conn.execute("SELECT id FROM outbox.unpublished ORDER BY id")]
        of_topic = [
            int(row["id"])
            for row in conn.execute(
                "SELECT id FROM outbox.unpublished WHERE topic = %s ORDER BY id", (APPOINTMENT_CREATED,)
            )
        ]
    assert fifth[0]["id"] not in expected
    assert fifth[-1]["id"] in expected
    viewer = bearer_of("viewer")
    assert _listed(client, viewer) == expected  # oldest first, every page, none twice, none below a floor
    assert _listed(client, viewer, f"?topic={APPOINTMENT_CREATED}") == of_topic
    page = client.get("/console/outbox", headers=viewer).text
    # the per-topic figures count the same rows (outbox.unpublished)
    for topic, count in ((APPOINTMENT_CANCELLED, len(expected) - len(of_topic)), (APPOINTMENT_CREATED, len(of_topic))):
        assert re.search(rf">{topic}</a></td><td class=\"\">{count}</td>", page), (topic, count)


def test_a_backlog_past_the_pages_cap_is_counted_up_to_it_and_says_so(
    client: TestClient,
    pool: ConnectionPool[Conn],
    bearer_of: Callable[[str], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pages, "OUTBOX_COUNT_CAP", 101)  # the page's bound, small enough to pass here
    with pool.connection() as conn:
        conn.execute(_SEED, {"topic": APPOINTMENT_CANCELLED, "other": APPOINTMENT_CREATED, "count": 300})
    for path in ("/console/outbox", "/console"):
        page = client.get(path, headers=bearer_of("viewer")).text
        assert "counts capped: the first 101 rows waiting read" in page, path
    monkeypatch.setattr(pages, "OUTBOX_COUNT_CAP", 301)
    assert "counts capped" not in client.get("/console/outbox", headers=bearer_of("viewer")).text


def test_the_lease_map_shows_each_floor_and_a_stale_one_in_red(
    client: TestClient, pool: ConnectionPool[Conn], bearer_of: Callable[[str], dict[str, str]]
) -> None:
    # vpart 7: a live lease whose floor was stored just now; vpart 8: a lease its owner took a minute ago, whose
    # instance row expired 55 s ago (its heartbeat stopped, nobody took it over); vpart 9: taken a moment ago, its
    # floor never stored
    leases = {
        7: ("relay-a", "5 s", "1 minute", 1234, "0 s"),
        8: ("relay-b", "-55 s", "1 minute", 99, "1 minute"),
        9: ("relay-a", "5 s", "0 s", 0, None),
    }
    with pool.connection() as conn:
        for vpart, (owner, expires_in, acquired_ago, floor_id, floor_ago) in leases.items():
            conn.execute(
                "INSERT INTO outbox.relay_instance (instance_id, expires_at) VALUES (%s, now() + %s::interval)"
                " ON CONFLICT (instance_id) DO NOTHING",
                (owner, expires_in),
            )
            conn.execute(
                "UPDATE outbox.relay_lease SET owner = %s, epoch = 1, acquired_at = now() - %s::interval"
                " WHERE vpart = %s",
                (owner, acquired_ago, vpart),
            )
            conn.execute(
                "UPDATE outbox.relay_floor SET floor_id = %s, floor_at = now() - %s::interval WHERE vpart = %s",
                (floor_id, floor_ago, vpart),
            )
    page = client.get("/console/outbox", headers=bearer_of("viewer")).text

    def row(vpart: int) -> str:
        return page.split(f'<tr id="vpart-{vpart}">', 1)[1].split("</tr>", 1)[0]

    assert "relay-a" in row(7)
    assert "1234" in row(7)
    assert "stale" not in row(7)
    assert 'class="red"' not in row(7)
    assert "relay-b" in row(8)
    assert "99" in row(8)
    assert 'class="red"' in row(8)
    assert "stale: heartbeat failing" in row(8)
    assert "stale" not in row(9)
    assert "never" in row(9)
    assert "stale" not in row(10)
    assert "—" in row(10)
    assert "2 of 64 vparts leased to a live relay" in page


_RELAY_LETTERS = """
INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version, payload,
                                headers, occurred_at, created_at, attempts, error)
SELECT i, gen_random_uuid(), mod(i, 64), %(topic)s, 'letter-' || i, 'AppointmentCancelledEvent', 1, '{}', '{}', now(),
       now(), 5, CASE WHEN i <= %(matching)s THEN 'MSG_SIZE_TOO_LARGE: refused' ELSE 'timed out' END
FROM generate_series(1, %(count)s) AS i
"""


def test_a_replay_of_more_than_a_page_of_the_relays_letters_is_a_bounded_job(
    client: TestClient, pool: ConnectionPool[Conn], bearer_of: Callable[[str], dict[str, str]], database_url: str
) -> None:
    with pool.connection() as conn:  # 70 letters match the filter, 5 do not
        conn.execute(_RELAY_LETTERS, {"topic": APPOINTMENT_CANCELLED, "matching": 70, "count": 75})
    act = {"reason": "size limit raised", "kind": "relay", "scope": "filter", "f_error": "msg_size"}
    operator = bearer_of("operator")
    dry = client.post("/console/dead-letters/act", data={**act, "action": "replay-dry-run"}, headers=operator)
    assert dry.status_code == 200, dry.text[:500]
    assert "<strong>70</strong> letter(s) match" in dry.text  # how many the job would replay
    assert '<input type="hidden" name="kind" value="relay">' in dry.text  # its form starts the relay's job
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone() == {"n": 0}  # a dry run
    started = client.post(
        "/console/dead-letters/act", data={**act, "action": "replay"}, headers=operator, follow_redirects=False
    )
    assert started.status_code == 303, started.text[:500]
    settings = Settings.model_validate({"database_url": database_url, "jwt_secret": "x" * 32})
    jobs = ReplayJobs(settings, pool, per_turn=30)  # the relay's turns, at most 30 letters each
    turns = [jobs.run_once() for _ in range(4)]
    assert [turn.get("replayed") for turn in turns] == [30, 30, 10, 0]
    with pool.connection() as conn:
        left = conn.execute("SELECT error, count(*) AS n FROM outbox.dead_letter GROUP BY error").fetchall()
        assert left == [{"error": "timed out", "n": 5}]  # the letters the filter did not select stay
        assert conn.execute("SELECT count(*) AS n FROM outbox.message").fetchone() == {"n": 70}
        [job] = conn.execute("SELECT state, total, replayed, apply, filter FROM operations.replay_job").fetchall()
        assert job == {"state": "done", "total": 70, "replayed": 70, "apply": 70,
                       "filter": {"kind": "relay", "error": "msg_size"}}  # fmt: skip
        [record] = conn.execute("SELECT action, counts, reason FROM operations.audit").fetchall()
        assert record == {"action": "outbox.replay-job", "counts": {"letters": 70}, "reason": "size limit raised"}
    assert jobs.run_once() == {}  # nothing left to do
