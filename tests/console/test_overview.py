"""The console's overview over HTTP on a real PostgreSQL: the xmin horizon's holder as `pin status` reads it, red
where LongRunningTransaction's threshold is crossed, and the consumer instances as they record themselves (partitions
held, messages held in retry, heartbeat) on the overview and a group's page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pin.console.http import page_html
from pin.db import Conn
from pin.observability.thresholds import THRESHOLDS
from pin.settings import Settings
from pin.status.collect import collect_status
from pin.status.snapshot import Horizon, HorizonHolderView, Snapshot
from tests.console.conftest import TestClient

pytestmark = pytest.mark.integration


def test_the_overview_names_the_xmin_horizons_holder_as_pin_status_does(
    client: TestClient, database_url: str, bearer_of: Callable[[str], dict[str, str]]
) -> None:
    with psycopg.connect(database_url, application_name="held-by-the-test") as holder:
        holder.execute("SELECT pg_current_xact_id()")  # an open transaction with an xid: it holds the horizon
        pid = holder.info.backend_pid
        page = client.get("/console", headers=bearer_of("viewer")).text
        table = page.split('<table id="horizon">', 1)[1].split("</table>", 1)[0]
        [row] = [r for r in table.split("<tr>") if "held-by-the-test" in r]
        assert f"<td>transaction</td><td>{pid}</td><td>held-by-the-test</td>" in row
        assert 'class="red"' not in row  # seconds old: under LongRunningTransaction's threshold
    after = client.get("/console", headers=bearer_of("viewer")).text
    assert "held-by-the-test" not in after


def test_a_holder_past_long_running_transactions_threshold_is_red_and_a_slot_carries_no_age(
    client: TestClient, database_url: str
) -> None:
    settings = Settings.model_validate({"database_url": database_url, "jwt_secret": "x" * 32})
    snapshot = collect_status(settings, kafka=False)
    limit = THRESHOLDS["database.transaction-age"].value
    holders = (
        HorizonHolderView("transaction", 4242, "psql", None, limit + 1, 10.0),
        HorizonHolderView("slot", None, None, "cdc_slot", None, 20.0),
        HorizonHolderView("transaction", 4343, "young", None, limit - 1, 5.0),
    )
    html = render_overview(replace(snapshot, horizon=Horizon(holders)))
    table = html.split('<table id="horizon">', 1)[1].split("</table>", 1)[0]
    psql, slot, young = (next(r for r in table.split("<tr>") if word in r) for word in ("psql", "cdc_slot", "young"))
    assert 'class="red"' in psql
    assert 'class="red"' not in slot
    assert "carries no time" in slot
    assert 'class="red"' not in young


def render_overview(snapshot: Snapshot) -> str:
    """The overview's HTML for ``snapshot`` (nothing else on it)."""
    return page_html(
        "overview.html", who=None, paused=[], path="/console", prometheus=None, s=snapshot, outbox=snapshot.outbox,
        letters={}, cycles=[], members=[],
    )  # fmt: skip


def test_consumer_instances_with_their_partitions_and_held_messages_on_the_overview_and_their_groups_page(
    client: TestClient, pool: ConnectionPool[Conn], bearer_of: Callable[[str], dict[str, str]]
) -> None:
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO messaging.consumer_member (consumer_group, member, partitions, stale_after_seconds,"
            " heartbeat_at) VALUES ('crm', 'host-a:101', 3, 15, now()), ('crm', 'host-b:202', 0, 15,"
            " now() - interval '1 minute'), ('news', 'host-c:303', 2, 15, now())"
        )
        conn.execute(
            'INSERT INTO messaging.held_message (consumer_group, topic, "partition", "offset", member, fault,'
            " error_type, error, attempts, next_attempt_at) VALUES"
            " ('crm', 'pin.calendar.appointment-cancelled.v1', 0, 7, 'host-a:101', 'poison', 'ValueError', 'x', 2,"
            " now()), ('crm', 'pin.calendar.appointment-cancelled.v1', 1, 9, 'host-a:101', 'contended', 'E', 'y', 1,"
            " now())"
        )
    viewer = bearer_of("viewer")

    def rows(path: str) -> dict[str, str]:
        table = client.get(path, headers=viewer).text.split('<table id="members">', 1)[1].split("</table>", 1)[0]
        return {r.split("<code>", 1)[1].split("</code>", 1)[0]: r for r in table.split("<tr>") if "<code>" in r}

    overview = rows("/console")
    assert set(overview) == {"host-a:101", "host-b:202", "host-c:303"}
    assert '<td class="">3</td>' in overview["host-a:101"]
    assert '<td class="amber">2</td>' in overview["host-a:101"]  # two messages held in retry
    assert ">yes</td>" in overview["host-a:101"]
    assert 'class="red">no (no heartbeat for 15 s)</td>' in overview["host-b:202"]
    group = rows("/console/groups/crm")
    assert set(group) == {"host-a:101", "host-b:202"}
    assert '<td class="amber">2</td>' in group["host-a:101"]
