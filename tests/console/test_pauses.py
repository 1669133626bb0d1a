"""Pause and resume for the whole cluster, through the console, against a real consumer and a real worker loop on
a real broker and PostgreSQL: within 5 s of the pause nothing new is taken; after the resume the work goes on; the
paused part exports that it is paused; every page says what is paused, by whom and why."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.jobs.runner import JobRunner, RunnerConfig
from pin.messaging import topics
from pin.operations.pauses import JOB, PauseFlag
from pin.settings import Settings
from tests.console.conftest import TestClient
from tests.consumers.conftest import producer, settings  # noqa: F401 - the fixtures
from tests.consumers.support import Producing, cancelled, feed_entries, running, wait_for

pytestmark = pytest.mark.integration

# The bound: every instance follows a pause within this many seconds.
PAUSE_BOUND_SECONDS = 5.0


def _paused_gauge(kind: str, name: str) -> float | None:
    if kind == "group":
        return REGISTRY.get_sample_value("pin_consumer_paused", {"group": name})
    return REGISTRY.get_sample_value("pin_worker_paused", {"worker": name})


def _event() -> dict[str, Any]:
    return cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")


def test_a_paused_group_stops_consuming_within_5_s_and_resumes(
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    producer: Producing,  # noqa: F811
    operator: TestClient,
) -> None:
    form = {"kind": "group", "name": "crm", "reason": "the CRM database is migrating"}
    with running("crm", settings, pool):
        first = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, first)
        wait_for(lambda: feed_entries(pool, first["AppointmentId"]), what="the group consuming")
        assert (
            operator.post("/console/pauses", data={**form, "action": "pause"}, follow_redirects=False).status_code
            == 303
        )
        time.sleep(PAUSE_BOUND_SECONDS)
        assert _paused_gauge("group", "crm") == 1
        held_back = _event()
        producer.send(topics.APPOINTMENT_CANCELLED, held_back)
        time.sleep(3)  # well past a poll, a batch and the pause's next read
        assert not feed_entries(pool, held_back["AppointmentId"]), "a paused group applied a message"
        page = operator.get("/console/groups").text
        assert 'id="paused"' in page
        assert "the CRM database is migrating" in page
        assert (
            operator.post("/console/pauses", data={**form, "action": "resume"}, follow_redirects=False).status_code
            == 303
        )
        wait_for(
            lambda: feed_entries(pool, held_back["AppointmentId"]),
            timeout=PAUSE_BOUND_SECONDS + 10,
            what="the message applied after the resume",
        )
        assert _paused_gauge("group", "crm") == 0
    assert 'id="paused"' not in operator.get("/console").text


class _CountingJob:
    """A job whose cycles are counted (the runner and the pause flag are the real ones)."""

    name = "appointment-timeout"

    def __init__(self) -> None:
        self.cycles = 0

    def run_once(self) -> Any:
        self.cycles += 1
        return _Result()

    def seconds_until_next_due(self) -> float | None:
        return None


class _Result:
    is_full = False
    budget_exhausted = False


def test_a_paused_worker_starts_no_cycle_within_5_s_and_resumes(
    pool: ConnectionPool[Conn], operator: TestClient
) -> None:
    job, stop = _CountingJob(), threading.Event()
    runner = JobRunner(job, RunnerConfig(interval_seconds=0.1), stop, PauseFlag(pool, kind=JOB, name=job.name))
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    form = {"kind": "job", "name": job.name, "reason": "a bad deploy"}
    try:
        wait_for(lambda: job.cycles >= 3, what="the worker's cycles")
        operator.post("/console/pauses", data={**form, "action": "pause"})
        time.sleep(PAUSE_BOUND_SECONDS)
        assert _paused_gauge("job", job.name) == 1
        during = job.cycles
        time.sleep(2)
        assert job.cycles == during, "a paused worker started a cycle"
        operator.post("/console/pauses", data={**form, "action": "resume"})
        wait_for(lambda: job.cycles > during, timeout=PAUSE_BOUND_SECONDS, what="cycles after the resume")
    finally:
        stop.set()
        thread.join(10)
    audit = operator.get("/console/audit").text
    assert audit.index("job.resume") < audit.index("job.pause")
