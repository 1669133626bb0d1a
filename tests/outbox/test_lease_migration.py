"""Migration 0008 on a database whose leases are held by a relay of the previous release (a rolling deploy).

Down to 0007, a relay of the old shape holds every vpart (its lease rows renewed, their floors past some rows) and
rows wait; up to 0008: the floors are in ``outbox.relay_floor`` as they were, the old relay's statements on the
lease rows fail (so it can neither read nor settle), its vparts stay its own while its instance row lives, and
once that expires (its heartbeat, whose transaction fails, no longer renews it) a new relay takes every vpart at
the next epoch and reads every waiting row past the floors it took over (docs/design/relay.md, "Upgrading to 0008").
"""

from __future__ import annotations

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from psycopg_pool import ConnectionPool

from pin.db import Conn, client_parameters, connect, default_policy, session_settings, sqlalchemy_url
from pin.outbox.relay import queries
from pin.outbox.relay.leases import Leases
from pin.outbox.writer import VPARTS
from tests.outbox.support import event_row, insert_rows, scalar

pytestmark = pytest.mark.integration

OLD = "old-release-relay"


def _alembic(url: str) -> Config:
    """The configuration `pin migrate` builds (pin.db.migrate), for a move to a given revision."""
    from importlib import resources

    policy = default_policy("migrate")
    config = Config()
    config.attributes["session_settings"] = session_settings(url, policy)
    config.set_main_option("script_location", str(resources.files("pin") / "migrations"))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url, client_parameters(url, policy)).replace("%", "%%"))
    return config


def test_an_upgrade_under_live_leases_of_an_old_relay_hands_its_vparts_over_at_the_next_epoch(
    database_url: str, pool: ConnectionPool[Conn]
) -> None:
    config = _alembic(database_url)
    command.downgrade(config, "0007")
    insert_rows(database_url, [event_row(f"early-{n}", 1) for n in range(64)])  # published by the old relay
    with connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM outbox.message")
        floor = int(str(conn.execute("SELECT last_value AS v FROM outbox.message_id_seq").fetchone()["v"]))  # type: ignore[index]
        conn.execute(  # the old relay: its instance and its renewed leases, each floor past the published rows
            "INSERT INTO outbox.relay_instance (instance_id, expires_at) VALUES (%s, now() + interval '2 seconds')",
            (OLD,),
        )
        conn.execute(
            "UPDATE outbox.relay_lease SET owner = %s, epoch = 4, expires_at = now() + interval '2 seconds',"
            " floor_id = %s, floor_xmax = pg_snapshot_xmax(pg_current_snapshot())::text::bigint, floor_at = now()",
            (OLD, floor),
        )
    waiting = insert_rows(database_url, [event_row(f"waiting-{n}", 1) for n in range(64)])

    command.upgrade(config, "head")

    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_floor WHERE floor_id = %s", (floor,)) == VPARTS
    with connect(database_url, autocommit=True) as conn, pytest.raises(psycopg.errors.UndefinedColumn):
        conn.execute("SELECT vpart FROM outbox.relay_lease WHERE owner = %s AND expires_at > now()", (OLD,))
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_lease_state WHERE owner = %s AND live", (OLD,)) == 64

    new = Leases(pool, "new-release-relay", 3.0, lambda: None)
    assert new.heartbeat() == {}  # the old relay's instance row still lives: its vparts are its own
    with connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_sleep(2.1)")  # its heartbeat no longer renews it: it expires
    taken = new.heartbeat()
    assert taken == dict.fromkeys(range(VPARTS), 5)
    with connect(database_url, autocommit=True) as conn:
        conn.execute(queries.RELAY_PLAN_BY_INDEX)
        params = {**new.floor_params(), "owner": "new-release-relay", "per_vpart": 100, "limit": 10_000}
        read = conn.execute(queries.OUTBOX_READ_OWNED, {**params, "in_flight": "{}"}).fetchall()
    assert sorted(str(r["message_id"]) for r in read) == sorted(str(row.message_id) for row in waiting)
    new.release_all()

    # and back: the floors and the expiry in the lease rows again, then up once more
    command.downgrade(config, "0007")
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_lease WHERE floor_id >= %s", (floor,)) == VPARTS
    command.upgrade(config, "head")
    assert scalar(database_url, "SELECT count(*) FROM outbox.relay_floor WHERE floor_id >= %s", (floor,)) == VPARTS


def test_the_lease_tables_carry_their_own_autovacuum_settings(database_url: str) -> None:
    with connect(database_url, autocommit=True) as conn:
        options = {
            str(r["name"]): list(r["reloptions"])
            for r in conn.execute(
                "SELECT oid::regclass::text AS name, reloptions FROM pg_class WHERE oid = ANY(%s::regclass[])",
                (["outbox.relay_lease", "outbox.relay_instance", "outbox.relay_floor"],),
            )
        }
    assert set(options) == {"outbox.relay_lease", "outbox.relay_instance", "outbox.relay_floor"}
    for table, reloptions in options.items():
        assert "fillfactor=50" in reloptions, table
        assert "autovacuum_vacuum_scale_factor=0" in reloptions, table
        assert any(o.startswith("autovacuum_vacuum_threshold=") for o in reloptions), table
