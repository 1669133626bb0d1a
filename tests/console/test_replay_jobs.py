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
