"""The console's overview over HTTP on a real PostgreSQL: the xmin horizon's holder as `pin status` reads it, red
where LongRunningTransaction's threshold is crossed, and the consumer instances as they record themselves (partitions
held, lanes, messages held in retry, heartbeat) on the overview and a group's page (a real group of two members:
test_members.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pin.console.http import page_html
from pin.db import Conn, migrate
from pin.local.embedded.postgres import EmbeddedPostgres
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


def test_each_holder_is_red_past_its_kinds_rule_a_slot_or_standby_past_xmin_horizon_held(
    client: TestClient, database_url: str
) -> None:
    settings = Settings.model_validate({"database_url": database_url, "jwt_secret": "x" * 32})
    snapshot = collect_status(settings, kafka=False)
    transaction = THRESHOLDS["database.transaction-age"].value
    held = THRESHOLDS["database.xmin-horizon-held"].value
    holders = (
        HorizonHolderView("transaction", 4242, "psql", None, transaction + 1, 10.0),
        HorizonHolderView("slot", None, None, "stuck_slot", held + 1, 20.0),
        HorizonHolderView("standby", 77, "replica-a", None, held - 1, 20.0),
        HorizonHolderView("slot", None, None, "new_slot", None, 20.0),
        HorizonHolderView("transaction", 4343, "young", None, transaction - 1, 5.0),
    )
    html = render_overview(replace(snapshot, horizon=Horizon(holders)))
    table = html.split('<table id="horizon">', 1)[1].split("</table>", 1)[0]
    shown = {word: next(r for r in table.split("<tr>") if word in r)
             for word in ("psql", "stuck_slot", "replica-a", "new_slot", "young")}  # fmt: skip
    assert 'class="red"' in shown["psql"]
    assert 'class="red"' in shown["stuck_slot"]  # XminHorizonHeld's threshold, not LongRunningTransaction's
    assert 'class="red"' not in shown["replica-a"]
    assert 'class="red"' not in shown["new_slot"]
    assert "no worker has timed this slot" in shown["new_slot"]
    assert 'class="red"' not in shown["young"]


@pytest.mark.slow
def test_a_real_logical_slot_holds_only_the_catalogs_so_the_overview_does_not_paint_it(tmp_path: Path) -> None:
    """A logical replication slot (Debezium's in cdc mode) keeps a catalog_xmin, never an xmin: vacuum still removes
    a table's dead rows past it, so it holds no horizon of the hot tables and is neither named nor painted (a slot
    that does hold one, a physical slot fed by a standby, is test_horizon_standby.py's, red past XminHorizonHeld)."""
    server = EmbeddedPostgres(tmp_path / "logical", logical_replication=True)
    server.start()
    try:
        migrate(server.url)
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("SELECT pg_create_logical_replication_slot('console_slot', 'pgoutput')")
            try:
                conn.execute("CREATE TABLE console_churn (n integer)")
                conn.execute("INSERT INTO console_churn SELECT generate_series(1, 100)")
                conn.execute("DELETE FROM console_churn")
                [slot] = conn.execute(
                    "SELECT xmin, catalog_xmin FROM pg_replication_slots WHERE slot_name = 'console_slot'"
                ).fetchall()
                assert slot[0] is None
                assert slot[1] is not None  # it holds the catalogs' horizon only
                notices: list[str] = []
                conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
                conn.execute("VACUUM (VERBOSE) console_churn")
                assert any("100 removed" in n and "0 are dead but not yet removable" in n for n in notices), notices
                settings = Settings.model_validate({"database_url": server.url, "jwt_secret": "x" * 32})
                snapshot = collect_status(settings, kafka=False)
                assert isinstance(snapshot.horizon, Horizon)
                assert [h for h in snapshot.horizon.holders if h.holder == "slot"] == []
                table = render_overview(snapshot).split('<table id="horizon">', 1)[1].split("</table>", 1)[0]
                assert "console_slot" not in table
                assert 'class="red"' not in table
            finally:
                conn.execute("SELECT pg_drop_replication_slot('console_slot')")
    finally:
        server.destroy()


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
            "INSERT INTO messaging.consumer_member (consumer_group, member, partitions, assignment,"
            " stale_after_seconds, heartbeat_at) VALUES"
            " ('crm', 'host-a:101', 3, '{\"t.a\": [0, 2], \"t.b\": [1]}', 15, now()),"
            " ('crm', 'host-b:202', 0, '{}', 15, now() - interval '1 minute'), ('news', 'host-c:303', 2,"
            " '{\"t.c\": [0, 1]}', 15, now())"
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
    assert '<span class="topic">t.a</span> [<span class="partitions">0, 2</span>]' in overview["host-a:101"]
    assert '<span class="topic">t.b</span> [<span class="partitions">1</span>]' in overview["host-a:101"]
    assert '<span class="lane-count">1</span> lane<' in overview["host-a:101"]
    assert '<td class="amber">2</td>' in overview["host-a:101"]  # two messages held in retry
    assert ">yes</td>" in overview["host-a:101"]
    assert 'class="red">no (no heartbeat for 15 s)</td>' in overview["host-b:202"]
    group = rows("/console/groups/crm")
    assert set(group) == {"host-a:101", "host-b:202"}
    assert '<td class="amber">2</td>' in group["host-a:101"]
