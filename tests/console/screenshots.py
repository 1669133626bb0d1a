"""`make screenshots`: a screenshot of every console page, taken by the browser of the browser tests (Debian's
chromium through Playwright) from a real `pin api` over a database seeded with one of everything the pages show,
written to docs/console/ for docs/console.md. Not a test of behaviour (tests/console/test_*.py are): run only by
`make screenshots`, which names this file."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pin.console import replay_jobs
from pin.console.actions import Said
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer.dead_letters import index
from pin.messaging.consumer.dead_letters.store import Origin
from pin.operations import pauses
from tests.console.test_browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.api import start_api
from tests.support.processes import RoleProcess

OUT = Path(os.environ.get("PIN_SCREENSHOTS_DIR", Path(__file__).resolve().parents[2] / "docs" / "console"))
KEY = "6f1c2a9e-0b8a-4a51-9f57-1d3c2b7a0042"


def _seed(pool: ConnectionPool[Conn]) -> None:
    """One of everything: letters of both kinds, a held message, a consumer instance with its partitions and lanes, a
    discard job, a poison item, a waiting row, a pause, a cycle."""
    with pool.connection() as conn:
        for offset, error in enumerate(("UnreadableMessageError: not JSON", "ParkedByOperator: parked (audit 1)")):
            message_id = uuid.uuid4()
            value = json.dumps({"MessageId": str(message_id), "AppointmentId": KEY, "Note": "<script>x</script>"})
            origin = Origin("crm", topics.APPOINTMENT_CANCELLED, 0, offset, 0, *error.split(": ", 1), 3)
            index.write(conn, origin, KEY.encode(), value.encode(), [("message-id", str(message_id).encode())])
        conn.execute(
            "INSERT INTO outbox.dead_letter (id, message_id, vpart, topic, message_key, event_type, contract_version,"
            " payload, headers, occurred_at, created_at, attempts, error, permanent) VALUES (7, %s, 3, %s, %s,"
            ' \'AppointmentCancelledEvent\', 1, \'{"AppointmentId": "6f1c"}\', \'{"correlation-id": "c1"}\', now(),'
            " now(), 1, 'MSG_SIZE_TOO_LARGE: the broker refused the record', true)",
            (uuid.uuid4(), topics.APPOINTMENT_CANCELLED, KEY),
        )
        conn.execute(
            'INSERT INTO messaging.held_message (consumer_group, topic, "partition", "offset", message_key,'
            " message_id, member, fault, error_type, error, attempts, next_attempt_at) VALUES ('notifications', %s, 1,"
            " 17, %s, %s, 'host:42', 'poison', 'DataError', 'value out of range', 6, now() + interval '20 s')",
            (topics.APPOINTMENT_CANCELLED, KEY.encode(), uuid.uuid4()),
        )
        conn.execute(
            "INSERT INTO jobs.item_failure (job, item_id, attempts, last_error) VALUES"
            " ('expire-promotions', %s, 4, 'DataError: the purchase refuses its targets')",
            (uuid.uuid4(),),
        )
        conn.execute(
            "INSERT INTO jobs.cycle (job, instance, run_id, as_of, duration_ms, counters, succeeded) VALUES"
            " ('appointment-timeout', 'host:7', %s, now(), 41, '{\"expired\": 3, \"budget_exhausted\": 0}', true)",
            (uuid.uuid4(),),
        )
        conn.execute(
            "INSERT INTO messaging.consumer_member (consumer_group, member, partitions, assignment, lanes, lanes_held,"
            " lanes_held_total, stale_after_seconds) VALUES ('notifications', 'host:42', 2, %s, 4, %s, 1, 600)",
            (Jsonb({topics.APPOINTMENT_CANCELLED: [0, 1]}),
             Jsonb([{"lane": 2, "topic": topics.APPOINTMENT_CANCELLED, "partition": 1, "offset": 17, "whole": False,
                     "key": KEY, "behind": 3}])),
        )  # fmt: skip
        said = Said("oncall-1", "letters of the load test", {"kind": "group", "filter": {"group": "crm"}})
        replay_jobs.start(conn, index.LetterFilter(group="crm"), said, action=replay_jobs.DISCARD)
        pauses.pause(conn, kind=pauses.GROUP, name="news", actor="oncall-1", reason="reindexing the news replica")


def test_screenshots_of_every_page(
    pool: ConnectionPool[Conn], spawn_role: Callable[..., RoleProcess], token: Callable[..., str]
) -> None:
    from playwright.sync_api import sync_playwright

    _seed(pool)
    api = start_api(spawn_role)
    base = f"http://127.0.0.1:{api.port}"
    OUT.mkdir(parents=True, exist_ok=True)
    pages = {
        "login": "/console/login",
        "overview": "/console",
        "jobs": "/console/jobs",
        "outbox": "/console/outbox",
        "groups": "/console/groups",
        "group": "/console/groups/notifications",
        "dead-letters": "/console/dead-letters",
        "dead-letter": "/console/dead-letters/group/1",
        "relay-dead-letter": "/console/dead-letters/relay/7",
        "key": f"/console/keys/{KEY}",
        "audit": "/console/audit",
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base}/console/login")
        page.screenshot(path=str(OUT / "login.png"))
        page.fill("textarea[name=token]", token(uuid.uuid4(), uuid.uuid4(), "operator"))
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/console")
        for name, path in pages.items():
            if name != "login":
                page.goto(f"{base}{path}")
                page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
        browser.close()
    assert all((OUT / f"{name}.png").stat().st_size > 0 for name in pages)
