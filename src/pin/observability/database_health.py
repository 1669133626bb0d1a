"""The database's health as gauges: bloat of the hot tables, the xmin horizon, the replication slots' WAL.

The hot tables are queues in all but name (claims, deletes, inbox inserts): their dead tuples, their last
vacuum, the size of their claim indexes, and the oldest open transaction (which stops vacuum everywhere) are the
first pain of every PostgreSQL job queue. Each refresh runs a few statements on statistics views, each filtered
to a fixed list or bounded by the server's limits, under a statement timeout, every
``PIN_DATABASE_HEALTH_REFRESH_SECONDS``; a scrape only reads the last values. A replication slot's or a standby's
xmin carries no time: the refresh records since when each has held its xmin (``operations.xmin_horizon_hold``), so
that every instance's gauge, `pin status` and the console's overview time it alike. Every worker instance refreshes
them (they describe the database, the same from each): aggregate with ``max``. Runbook:
docs/runbooks/database-health.md.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import structlog
from prometheus_client import Gauge
from psycopg_pool import ConnectionPool

from pin.db import Conn, limits, load_queries
from pin.observability.logging import error_text

log = structlog.get_logger(__name__)

_QUERIES = load_queries(__package__ or "pin.observability", "database_health.sql")

# The tables that churn: the claimed appointments and purchases, the outbox queue and the consumers' inbox, the
# settles' acknowledged positions, and the relay's lease rows, instance rows (one version a heartbeat each) and
# stored floors (docs/design/relay.md).
HOT_TABLES = (
    "calendar.appointment",
    "promotion.purchase",
    "outbox.message",
    "messaging.inbox",
    "outbox.acked_position",
    "outbox.relay_lease",
    "outbox.relay_instance",
    "outbox.relay_floor",
)
# The partial indexes the workers claim through (docs/design/claims.md): emptied and refilled all day.
CLAIM_INDEXES = ("calendar.ix_appointments_pending_expires_at", "promotion.ix_purchase_active_ends_at")
# A refresh statement that takes longer than this is cancelled: the gauges keep their last values.
STATEMENT_TIMEOUT_MS = 2_000

DEAD_TUPLES = Gauge("pin_db_table_dead_tuples", "Dead tuples of a hot table (pg_stat_all_tables).", ["table"])
LIVE_TUPLES = Gauge("pin_db_table_live_tuples", "Live tuples of a hot table (pg_stat_all_tables).", ["table"])
LAST_VACUUM = Gauge(
    "pin_db_table_last_vacuum_timestamp_seconds",
    "Unix time of a hot table's last vacuum or autovacuum (0: none since the statistics were reset).",
    ["table"],
)
INDEX_BYTES = Gauge("pin_db_index_size_bytes", "Size on disk of a claim index.", ["index"])
INDEX_TUPLES = Gauge(
    "pin_db_index_tuples", "Entries of a claim index, as estimated by the last vacuum or analyze.", ["index"]
)
OLDEST_TRANSACTION = Gauge(
    "pin_db_oldest_transaction_age_seconds",
    "Age of the oldest open transaction (sessions and prepared ones): the xmin horizon that stops vacuum.",
)
SLOT_RETAINED_WAL = Gauge(
    "pin_db_replication_slot_retained_wal_bytes",
    "WAL a replication slot keeps on the database's disk (current LSN minus the slot's restart LSN).",
    ["slot"],
)
SLOT_ACTIVE = Gauge("pin_db_replication_slot_active", "1 when a client streams from the replication slot.", ["slot"])
# The kinds of what holds the xmin horizon back (xmin_horizon_holders in database_health.sql).
HORIZON_HOLDERS = ("transaction", "slot", "standby")
HORIZON_AGE = Gauge(
    "pin_db_xmin_horizon_age_seconds",
    "How long the oldest holder of each kind has held the xmin horizon back: a transaction since it began; a "
    "replication slot or a standby's feedback since its xmin was first seen at that value by any instance "
    "(operations.xmin_horizon_hold; 0: none holds it).",
    ["holder"],
)
HORIZON_XIDS = Gauge(
    "pin_db_xmin_horizon_age_transactions",
    "How many transactions old the oldest xmin of each kind of holder is (age(xmin); 0: none holds it).",
    ["holder"],
)
LAST_REFRESH = Gauge(
    "pin_db_health_last_refresh_timestamp_seconds", "Unix time of the last complete refresh of the pin_db_ gauges."
)


@dataclass(frozen=True)
class HorizonHolder:
    """One holder of the xmin horizon (a row of xmin_horizon_holders): what `pin status` names and the runbook
    looks up; never a metric label."""

    holder: str  # transaction, slot or standby
    pid: int | None
    application: str | None
    name: str | None  # the slot's name, or a prepared transaction's gid
    xids: float  # age(xmin) in transactions
    seconds: float | None  # a transaction's age; a slot's or a standby's hold at its xmin (held_for), else None
    xmin: str


def horizon_holders(conn: Conn) -> list[HorizonHolder]:
    """Everything that holds the xmin horizon back, the oldest xmin first (a slot's or a standby's without its
    age: :func:`held_for` adds it)."""
    rows: list[dict[str, Any]] = conn.execute(_QUERIES["xmin_horizon_holders"]).fetchall()
    return [HorizonHolder(**row) for row in rows]


def _timed(holders: list[HorizonHolder]) -> dict[str, list[str]]:
    """The slots and standbys among ``holders`` (their xmin carries no time), as the hold statements' arrays: a
    slot by its name, a standby by its walsender's pid."""
    untimed = [h for h in holders if h.seconds is None]
    return {
        "holders": [h.holder for h in untimed],
        "names": [h.name or str(h.pid) for h in untimed],
        "xmins": [h.xmin for h in untimed],
    }


def record_holds(conn: Conn, holders: list[HorizonHolder]) -> None:
    """Record since when each slot and standby among ``holders`` (all there are now) has held its xmin, and forget
    those gone (``operations.xmin_horizon_hold``: every instance's refresh writes it, the first to see a value
    times it)."""
    conn.execute(_QUERIES["xmin_horizon_hold_record"], _timed(holders))


def held_for(conn: Conn, holders: list[HorizonHolder]) -> list[HorizonHolder]:
    """``holders`` with each slot's and standby's age: how long it has held its xmin, as recorded (None until a
    refresh recorded it at that xmin)."""
    timed = _timed(holders)
    if not timed["holders"]:
        return holders
    rows = conn.execute(_QUERIES["xmin_horizon_hold_read"], timed).fetchall()
    ages = {(str(r["holder"]), str(r["name"])): float(str(r["seconds"])) for r in rows}
    return [
        h if h.seconds is not None else replace(h, seconds=ages.get((h.holder, h.name or str(h.pid)))) for h in holders
    ]


class DatabaseHealth:
    """Refreshes the pin_db_ gauges from one pooled connection, a few bounded statements per refresh."""

    def __init__(self, pool: ConnectionPool[Conn]) -> None:
        self._pool = pool
        self._slots: set[str] = set()

    def refresh(self) -> None:
        """Read the statistics once and set every gauge (one short transaction; its only write is the record of the
        slots' and standbys' holds, a handful of rows rewritten only when an xmin moves)."""
        with (
            self._pool.connection() as conn,
            conn.transaction(),
            limits(conn, statement_timeout=STATEMENT_TIMEOUT_MS / 1000),
        ):
            tables = conn.execute(_QUERIES["table_health_read"], {"tables": list(HOT_TABLES)}).fetchall()
            indexes = conn.execute(_QUERIES["index_health_read"], {"indexes": list(CLAIM_INDEXES)}).fetchall()
            oldest = conn.execute(_QUERIES["transaction_oldest_age"]).fetchone()
            slots = conn.execute(_QUERIES["replication_slot_retained_wal"]).fetchall()
            holders = horizon_holders(conn)
            record_holds(conn, holders)
            holders = held_for(conn, holders)
        for row in tables:
            name = str(row["name"])
            DEAD_TUPLES.labels(table=name).set(_number(row["dead"]))
            LIVE_TUPLES.labels(table=name).set(_number(row["live"]))
            LAST_VACUUM.labels(table=name).set(_number(row["last_vacuum"]))
        for row in indexes:
            INDEX_BYTES.labels(index=str(row["name"])).set(_number(row["bytes"]))
            INDEX_TUPLES.labels(index=str(row["name"])).set(_number(row["tuples"]))
        OLDEST_TRANSACTION.set(_number(oldest["age"]) if oldest else 0.0)
        self._set_slots({str(row["slot_name"]): (bool(row["active"]), _number(row["retained"])) for row in slots})
        self._set_horizon(holders)
        LAST_REFRESH.set(time.time())

    def _set_horizon(self, holders: list[HorizonHolder]) -> None:
        """The oldest holder of each kind: its age in seconds and in transactions (0 for a kind that holds none)."""
        ages = dict.fromkeys(HORIZON_HOLDERS, 0.0)
        xids = dict.fromkeys(HORIZON_HOLDERS, 0.0)
        for h in holders:
            ages[h.holder] = max(ages[h.holder], h.seconds or 0.0)
            xids[h.holder] = max(xids[h.holder], h.xids)
        for kind in HORIZON_HOLDERS:
            HORIZON_AGE.labels(holder=kind).set(ages[kind])
            HORIZON_XIDS.labels(holder=kind).set(xids[kind])

    def _set_slots(self, slots: dict[str, tuple[bool, float]]) -> None:
        """A dropped slot's series go away (a stale value would keep its alert firing)."""
        for gone in self._slots - set(slots):
            SLOT_RETAINED_WAL.remove(gone)
            SLOT_ACTIVE.remove(gone)
        for name, (active, retained) in slots.items():
            SLOT_RETAINED_WAL.labels(slot=name).set(retained)
            SLOT_ACTIVE.labels(slot=name).set(1 if active else 0)
        self._slots = set(slots)

    def run(self, stop: threading.Event, interval_seconds: float) -> None:
        """Refresh every ``interval_seconds`` until ``stop``; a failed refresh is logged and tried at the next."""
        while not stop.is_set():
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - the gauges must never stop the role they run in
                log.warning("database health refresh failed", error=error_text(exc))
            stop.wait(interval_seconds)

    def start(self, stop: threading.Event, interval_seconds: float) -> threading.Thread:
        """:meth:`run` on a daemon thread."""
        thread = threading.Thread(target=self.run, args=(stop, interval_seconds), name="database-health", daemon=True)
        thread.start()
        return thread


def _number(value: object) -> float:
    return float(str(value)) if value is not None else 0.0
