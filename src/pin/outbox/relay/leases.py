"""This instance's leases on the vparts: registered, renewed, a fair share taken, the excess given back.

A heartbeat writes one row version in steady state, this instance's ``outbox.relay_instance`` row: a lease is live
while its owner's instance row is unexpired, and a lease row is written only when its owner changes. The floors of
the vparts held are kept here (``KeptFloors``) and stored only when they moved, at most every few seconds."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import structlog
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.outbox.relay import metrics, queries
from pin.outbox.relay.kept_floors import KeptFloors
from pin.outbox.writer import VPARTS

log = structlog.get_logger(__name__)


class Leases:
    """The vparts one relay instance owns (vpart -> epoch, as of the last heartbeat)."""

    def __init__(
        self, pool: ConnectionPool[Conn], owner: str, ttl_seconds: float, on_acquired: Callable[[], None]
    ) -> None:
        self._pool = pool
        self._owner = owner
        self._ttl_seconds = ttl_seconds
        self._on_acquired = on_acquired
        self._owned: dict[int, int] = {}
        self._floors = KeptFloors()
        self._target = VPARTS
        self._lock = threading.Lock()  # serializes lease changes (heartbeat vs. release between batches)

    @property
    def count(self) -> int:
        """How many vparts this instance owns."""
        return len(self._owned)

    def owned_vparts(self) -> list[int]:
        """The vparts this instance held at its last heartbeat."""
        return sorted(self._owned)

    def floor_params(self) -> dict[str, object]:
        """The floors of the vparts held, as the relay's read takes them (``{given}``). Not under the lock: the
        read must not wait for a heartbeat's transaction (KeptFloors: a floor it takes is valid however old)."""
        return self._floors.params()

    def heartbeat(self) -> dict[int, int]:
        """Renew this instance (and with it every lease it holds), or, expired, give its leases up and register
        again; take free vparts up to a fair share; advance the floors (stored when due); returns owned vparts."""
        params = {"owner": self._owner, "ttl": self._ttl_seconds}
        with self._lock, self._pool.connection() as conn:
            given_up: list[int] = []
            if conn.execute(queries.RELAY_INSTANCE_RENEW, params).fetchone() is None:
                given_up = [int(str(r["vpart"])) for r in conn.execute(queries.RELAY_LEASE_GIVE_UP_EXPIRED, params)]
                conn.execute(queries.RELAY_INSTANCE_REGISTER, params)
            conn.execute(queries.RELAY_INSTANCE_PURGE)
            live_row = conn.execute(queries.RELAY_INSTANCE_COUNT_LIVE).fetchone()
            live = max(1, int(str(live_row["live"]))) if live_row else 1
            target = math.ceil(VPARTS / live)
            owned = {
                int(str(r["vpart"])): int(str(r["epoch"])) for r in conn.execute(queries.RELAY_LEASE_OWNED, params)
            }
            acquired: dict[int, int] = {}
            if len(owned) < target:
                limit = {**params, "limit": target - len(owned)}
                records = conn.execute(queries.RELAY_LEASE_ACQUIRE_FREE, limit).fetchall()
                acquired = {int(str(r["vpart"])): int(str(r["epoch"])) for r in records}
            now_owned = {**owned, **acquired}
            # a vpart held at another epoch than last time was lost and taken again: its floor is reloaded too
            self._floors.keep_only(v for v, epoch in now_owned.items() if self._owned.get(v) == epoch)
            self._floors.load(conn, now_owned)
            conn.execute(queries.RELAY_PLAN_BY_INDEX)  # the advance reads each floor's parts along their indexes
            self._floors.advance(conn)
            self._floors.write(conn, self._owner)
            conn.commit()
            lost = (set(self._owned) - set(owned)) | set(given_up)
            self._owned = now_owned
            self._target = target
        metrics.OWNED_VPARTS.set(len(self._owned))
        if acquired or lost:
            log.info(
                "outbox leases changed", acquired=sorted(acquired), lost=sorted(lost), owned=len(self._owned), live=live
            )
        if acquired:
            self._on_acquired()
        return dict(self._owned)

    def has_excess(self) -> bool:
        """More vparts than the fair share (a new instance came): they are given back between batches."""
        return len(self._owned) > self._target  # no lock: a stale answer only moves the release by a batch

    def release_excess(self) -> None:
        """Give back the vparts beyond the fair share so a newly started instance gets its part."""
        with self._lock:
            excess = sorted(self._owned)[self._target :]
            if not excess:
                return
            with self._pool.connection() as conn:
                self._floors.write(conn, self._owner, vparts=excess, now=True)  # where the next owner starts
                conn.execute(queries.RELAY_LEASE_RELEASE, {"owner": self._owner, "vparts": excess})
            for vpart in excess:
                self._owned.pop(vpart, None)
            self._floors.keep_only(self._owned)
        metrics.OWNED_VPARTS.set(len(self._owned))
        log.info("outbox leases released", released=excess, owned=len(self._owned))

    def release_all(self) -> None:
        """Give back every lease and unregister (graceful stop): the others take over at once, not after a TTL."""
        with self._lock:
            with self._pool.connection() as conn:
                self._floors.write(conn, self._owner, now=True)  # where the next owners start
                conn.execute(queries.RELAY_LEASE_RELEASE, {"owner": self._owner, "vparts": list(range(VPARTS))})
                conn.execute(queries.RELAY_INSTANCE_DELETE, {"owner": self._owner})
            self._owned = {}
            self._floors.keep_only(())
        metrics.OWNED_VPARTS.set(0)
