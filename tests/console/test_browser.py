"""The console in a real browser: Debian's chromium (scripts/test-tools installs it; nothing is downloaded) driven by
Playwright, against a real `pin api`, a real consumer, broker and PostgreSQL. An operator logs in through the form,
finds a key held in retry, parks it, sees the dead letter (a hostile header shown as text, nothing run), replays it
with a dry run and then for real, sees it applied and audited, pauses and resumes the group.

Slow (a browser, an API process, a consumer group): it runs under `make test-deep` only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.messaging import topics
from pin.settings import Settings
from tests.consumers.conftest import producer, settings  # noqa: F401 - the fixtures
from tests.consumers.support import Producing, cancelled, feed_entries, held_messages, rows, running, wait_for
from tests.support.api import ApiServer, start_api
from tests.support.processes import RoleProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deep(only=True),
]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = "<script>document.title='owned'</script>"
TOPIC = topics.APPOINTMENT_CANCELLED


@pytest.fixture
def browser_page() -> Iterator[Any]:
    """A page of a fresh headless chromium context; every dialog (an alert a script would raise) is recorded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context()
        page = context.new_page()
        page.dialogs = []  # type: ignore[attr-defined]
        page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))  # type: ignore[attr-defined]
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


@pytest.fixture
def api(settings: Settings, spawn_role: Callable[..., RoleProcess]) -> ApiServer:  # noqa: F811
    """A real `pin api` on the test's database and broker."""
    return start_api(spawn_role, env={"PIN_KAFKA_BOOTSTRAP_SERVERS": settings.kafka.require_bootstrap_servers()})


def _refuse(pool: ConnectionPool[Conn], appointment: str) -> None:
    """The database refuses this appointment's feed entry until the row of crm.browser_refusal goes."""
    with pool.connection() as conn:
        conn.execute("CREATE TABLE crm.browser_refusal (appointment_id uuid PRIMARY KEY)")
        conn.execute("INSERT INTO crm.browser_refusal VALUES (%s)", (appointment,))
        conn.execute(
            "CREATE FUNCTION crm.browser_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " IF EXISTS (SELECT 1 FROM crm.browser_refusal r WHERE r.appointment_id = NEW.appointment_id) THEN"
            " RAISE EXCEPTION 'refused for the test' USING ERRCODE = 'data_exception'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER browser_refuse BEFORE INSERT ON crm.lead_feed_entry FOR EACH ROW"
            " EXECUTE FUNCTION crm.browser_refuse()"
        )


def test_an_operator_parks_replays_and_pauses_in_a_real_browser(
    *,
    settings: Settings,  # noqa: F811
    pool: ConnectionPool[Conn],
    producer: Producing,  # noqa: F811
    api: ApiServer,
    browser_page: Any,
    token: Callable[..., str],
) -> None:
    page = browser_page
    base = f"http://127.0.0.1:{api.port}"
    event = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
    key = event["AppointmentId"]
    _refuse(pool, key)
    with running("crm", settings, pool, backoff_base=0.1, backoff_cap=1.0):
        producer.send(TOPIC, event, partition=0, headers={"x-note": HOSTILE})
        wait_for(lambda: held_messages(pool, "crm"), what="the message held in retry")

        # log in through the form
        page.goto(f"{base}/console")
        assert page.locator("textarea[name=token]").is_visible()
        page.fill("textarea[name=token]", token(uuid.uuid4(), uuid.uuid4(), "operator"))
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/console")
        assert page.locator("h1").inner_text() == "The system at a glance"

        # find the key held in retry, and park it
        page.goto(f"{base}/console/keys/{key}")
        assert "holds its message" in page.locator("#answer").inner_text()
        park = page.locator("form[action='/console/held/park']")
        park.locator("input[name=reason]").fill("waiting for the CRM fix")
        park.locator("button").click()
        page.wait_for_selector("#done")
        [letter] = wait_for(
            lambda: rows(pool, "SELECT id FROM messaging.dead_letter_index WHERE consumer_group = 'crm'"),
            what="the parked message's dead letter",
        )

        # the dead letter, its hostile header shown as text and run nowhere
        page.goto(f"{base}/console/dead-letters?group=crm")
        page.click(f"a[href='/console/dead-letters/group/{letter['id']}']")
        page.wait_for_url(f"{base}/console/dead-letters/group/{letter['id']}")
        assert HOSTILE in page.locator("body").inner_text()
        assert page.title() != "owned"
        assert page.dialogs == []

        # the cause fixed: a dry run, then the replay for real
        with pool.connection() as conn:
            conn.execute("DELETE FROM crm.browser_refusal")
        act = page.locator("form[action='/console/dead-letters/act']")
        act.locator("input[name=reason]").fill("the CRM fix is deployed")
        act.locator("button[value=replay-dry-run]").click()
        page.wait_for_selector("#preview")
        assert (page.inner_text("#apply"), page.inner_text("#skip"), page.inner_text("#refuse")) == ("1", "0", "0")
        assert not feed_entries(pool, key)
        page.click("button[value=replay]")
        page.wait_for_selector("#done")
        wait_for(lambda: feed_entries(pool, key), what="the replayed message applied")
        page.goto(f"{base}/console/audit")
        audit = page.locator("main").inner_text()
        assert "dlq.replay" in audit
        assert "dlq.park" in audit
        assert "the CRM fix is deployed" in audit

        # pause the group: nothing new applied; resume: applied
        page.goto(f"{base}/console/groups/crm")
        pause = page.locator("form[action='/console/pauses']")
        pause.locator("input[name=reason]").fill("maintenance")
        pause.locator("button[value=pause]").click()
        page.wait_for_url(f"{base}/console/groups/crm")
        assert "maintenance" in page.inner_text("#paused")
        time.sleep(5)
        later = cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")
        producer.send(TOPIC, later, partition=0)
        time.sleep(3)
        assert not feed_entries(pool, later["AppointmentId"])
        resume = page.locator("form[action='/console/pauses']")
        resume.locator("input[name=reason]").fill("maintenance over")
        resume.locator("button[value=resume]").click()
        page.wait_for_url(f"{base}/console/groups/crm")
        wait_for(lambda: feed_entries(pool, later["AppointmentId"]), timeout=15, what="consuming after the resume")
        assert page.locator("#paused").count() == 0
    assert page.dialogs == []
