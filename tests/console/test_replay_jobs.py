"""A replay larger than a page is a job: started from the console (a dry run first, saying how many match), carried
out a bounded number of letters per turn by the relay's loop (run_once here, against a real broker and PostgreSQL),
its progress on the page, cancelled by an operator, finished when nothing matches; all on the audit trail."""

from __future__ import annotations

import json
import uuid

import pytest
from psycopg_pool import ConnectionPool

from pin.console.replay_jobs import ReplayJobs
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.store import Origin
from pin.settings import Settings
from tests.console.conftest import TestClient
from tests.console.test_cli import _RELAY_LETTER, _cli
from tests.consumers.conftest import settings  # noqa: F401 - the fixture
from tests.consumers.support import rows

pytestmark = pytest.mark.integration


def _letters(pool: ConnectionPool[Conn], group: str, count: int) -> None:
    with pool.connection() as conn:
        for offset in range(count):
            message_id = uuid.uuid4()
            value = json.dumps({"MessageId": str(message_id)}).encode()
            origin = Origin(group, topics.APPOINTMENT_CANCELLED, 0, offset, 0, "ParkedByOperator", "parked", 4)
            index.write(conn, origin, f"key-{offset}".encode(), value, [("message-id", str(message_id).encode())])


def _open(pool: ConnectionPool[Conn], group: str) -> int:
    sql = "SELECT count(*) AS n FROM messaging.dead_letter_index WHERE consumer_group = %s AND resolution IS NULL"
    return int(rows(pool, sql, group)[0]["n"])


def test_a_replay_of_more_than_a_page_is_a_bounded_job_with_progress_and_a_cancel(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    operator: TestClient,
) -> None:
    _letters(pool, "crm", 130)
    _letters(pool, "news", 70)
    form = {"kind": "group", "scope": "filter", "reason": "the CRM fix is out"}
    dry = operator.post("/console/dead-letters/act", data={**form, "f_group": "crm", "action": "replay-dry-run"})
    assert dry.status_code == 200, dry.text
    assert "<strong>130</strong> letter(s) match" in dry.text
    assert _open(pool, "crm") == 130  # a dry run does nothing
    started = operator.post(
        "/console/dead-letters/act", data={**form, "f_group": "crm", "action": "replay"}, follow_redirects=False
    )
    assert started.status_code == 303, started.text  # a job, not a request holding 130 letters
    assert _open(pool, "crm") == 130
    jobs = ReplayJobs(settings, pool, per_turn=50)
    assert jobs.run_once()["replayed"] == 50  # one turn: at most the rate
    assert _open(pool, "crm") == 80
    page = operator.get("/console/dead-letters").text
    assert "50 / 130" in page
    other = operator.post(
        "/console/dead-letters/act", data={**form, "f_group": "news", "action": "replay"}, follow_redirects=False
    )
    assert other.status_code == 303
    [crm_job, news_job] = rows(pool, "SELECT id FROM operations.replay_job ORDER BY id")
    cancel = operator.post(f"/console/replay-jobs/{crm_job['id']}/cancel", data={"reason": "wrong filter"})
    assert cancel.status_code == 200  # followed to the page
    assert jobs.run_once()["replayed"] == 50  # the news job now; the cancelled one takes nothing more
    assert jobs.run_once()["replayed"] == 20
    assert jobs.run_once() == {"letters": 0, "apply": 0, "skip": 0, "refuse": 0, "replayed": 0}  # finished
    assert jobs.run_once() == {}  # no job running
    assert (_open(pool, "crm"), _open(pool, "news")) == (80, 0)
    states = rows(pool, "SELECT state, replayed, total FROM operations.replay_job ORDER BY id")
    assert states == [
        {"state": "cancelled", "replayed": 50, "total": 130},
        {"state": "done", "replayed": 70, "total": 70},
    ]
    actions = [r["action"] for r in rows(pool, "SELECT action FROM operations.audit ORDER BY id")]
    assert actions == ["dlq.replay-job", "dlq.replay-job", "dlq.replay-job-cancel"]
    assert news_job["id"] > crm_job["id"]


def test_a_discard_of_more_than_a_page_is_a_job_with_a_dry_run_counting_it_on_the_audit_trail(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    operator: TestClient,
) -> None:
    _letters(pool, "crm", 130)
    _letters(pool, "news", 70)
    form = {"kind": "group", "scope": "filter", "reason": "test traffic from the load run", "f_group": "crm"}
    dry = operator.post("/console/dead-letters/act", data={**form, "action": "discard-dry-run"})
    assert dry.status_code == 200, dry.text
    assert '<p id="discard-letters"><strong>130</strong> open letter(s) (group) would be discarded' in dry.text
    assert 'name="f_group" value="crm"' in dry.text  # its button starts the job of the same filter
    assert _open(pool, "crm") == 130  # a dry run does nothing
    assert rows(pool, "SELECT 1 FROM operations.audit") == []
    # a crafted form selecting more letters than a page: refused, never a job of everything
    many = {
        "kind": "group",
        "scope": "selected",
        "reason": "x",
        "action": "discard",
        "id": [str(i) for i in range(1, 60)],
    }
    crafted = operator.post("/console/dead-letters/act", data=many)
    assert crafted.status_code == 400
    started = operator.post("/console/dead-letters/act", data={**form, "action": "discard"}, follow_redirects=False)
    assert started.status_code == 303, started.text  # a job, not a request holding 130 letters
    assert _open(pool, "crm") == 130
    [record] = rows(pool, "SELECT id, action, target, counts, reason FROM operations.audit")
    assert {k: v for k, v in record.items() if k != "id"} == {
        "action": "dlq.discard-job", "target": {"kind": "group", "filter": {"group": "crm"}},
        "counts": {"letters": 130}, "reason": "test traffic from the load run",
    }  # fmt: skip
    jobs = ReplayJobs(settings, pool, per_turn=50)
    assert jobs.run_once() == {"letters": 50, "discarded": 50}  # one turn: at most the rate
    assert _open(pool, "crm") == 80
    page = operator.get("/console/dead-letters").text
    assert "50 / 130 discarded" in page
    assert jobs.run_once()["discarded"] == 50
    assert jobs.run_once()["discarded"] == 30
    assert jobs.run_once() == {"letters": 0, "discarded": 0}  # finished
    assert jobs.run_once() == {}
    assert (_open(pool, "crm"), _open(pool, "news")) == (0, 70)
    resolved = rows(
        pool, "SELECT resolution, resolved_audit_id, count(*) AS n FROM messaging.dead_letter_index"
        " WHERE consumer_group = 'crm' GROUP BY 1, 2",
    )  # fmt: skip
    assert resolved == [{"resolution": "discarded", "resolved_audit_id": record["id"], "n": 130}]
    [job] = rows(pool, "SELECT action, state, replayed, total, apply, skip, refuse FROM operations.replay_job")
    assert job == {"action": "discard", "state": "done", "replayed": 130, "total": 130, "apply": 0, "skip": 0,
                   "refuse": 0}  # fmt: skip


def test_the_command_line_discards_and_replays_more_than_a_page_as_a_job(
    settings: Settings,  # noqa: F811
    database_url: str,
    pool: ConnectionPool[Conn],
) -> None:
    _letters(pool, "news", 70)
    dry = _cli(database_url, "dlq", "discard", "--group", "news", "--dry-run")
    assert json.loads(dry.stdout) == {"group": "news", "dryRun": True, "job": True, "letters": 70}
    replay_dry = json.loads(_cli(database_url, "dlq", "replay", "--group", "news", "--dry-run").stdout)
    assert replay_dry == {"group": "news", "dryRun": True, "job": True, "letters": 70,
                          "newest": {"letters": 50, "apply": 50, "skip": 0, "refuse": 0}}  # fmt: skip
    assert _open(pool, "news") == 70
    _cli(database_url, "dlq", "discard", "--group", "news", code=2)  # no reason: refused, nothing done
    answer = json.loads(_cli(database_url, "dlq", "discard", "--group", "news", "--reason", "test data").stdout)
    assert answer == {**answer, "group": "news", "action": "discard", "letters": 70}
    jobs = ReplayJobs(settings, pool, per_turn=50)
    while jobs.run_once():
        pass
    assert _open(pool, "news") == 0
    [job] = rows(pool, "SELECT id, action, state, replayed FROM operations.replay_job")
    assert job == {"id": answer["job"], "action": "discard", "state": "done", "replayed": 70}
    [record] = rows(pool, "SELECT action, counts, reason FROM operations.audit")
    assert record == {"action": "dlq.discard-job", "counts": {"letters": 70}, "reason": "test data"}


def test_a_discard_job_of_the_relays_letters_sets_them_aside(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    operator: TestClient,
) -> None:
    with pool.connection() as conn:
        for row_id in range(1, 61):
            conn.execute(_RELAY_LETTER, (row_id, uuid.uuid4(), topics.APPOINTMENT_CANCELLED, f"key-{row_id}"))
    form = {"kind": "relay", "scope": "filter", "reason": "obsolete", "f_topic": topics.APPOINTMENT_CANCELLED}
    dry = operator.post("/console/dead-letters/act", data={**form, "action": "discard-dry-run"})
    assert "<strong>60</strong> open letter(s) (relay) would be discarded" in dry.text
    started = operator.post("/console/dead-letters/act", data={**form, "action": "discard"}, follow_redirects=False)
    assert started.status_code == 303, started.text
    jobs = ReplayJobs(settings, pool, per_turn=50)
    assert jobs.run_once() == {"letters": 50, "discarded": 50}
    assert jobs.run_once() == {"letters": 10, "discarded": 10}
    assert jobs.run_once() == {"letters": 0, "discarded": 0}
    counts = (
        "SELECT (SELECT count(*) FROM outbox.dead_letter) AS letters,"
        " (SELECT count(*) FROM outbox.dead_letter_discarded) AS aside"
    )
    assert rows(pool, counts) == [{"letters": 0, "aside": 60}]
    assert [r["action"] for r in rows(pool, "SELECT action FROM operations.audit")] == ["outbox.discard-job"]
