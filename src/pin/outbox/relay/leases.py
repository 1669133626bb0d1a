"""This instance's leases on the vparts: registered, renewed, a fair share taken, the excess given back."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import structlog
from psycopg_pool import ConnectionPool

from pin.db import Conn
from pin.outbox.relay import metrics, queries
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
        self._target = VPARTS
        self._lock = threading.Lock()  # serializes lease changes (heartbeat vs. release between batches)

    @property
    def count(self) -> int:
        """How many vparts this instance owns."""
        return len(self._owned)

    def owned_vparts(self) -> list[int]:
        """The vparts this instance held at its last heartbeat."""
        return sorted(self._owned)

    def heartbeat(self) -> dict[int, int]:
        """Register this instance, renew our leases (moving their floors up), take free vparts up to a fair share;
        returns owned vparts."""
        params = {"owner": self._owner, "ttl": self._ttl_seconds}
        with self._lock, self._pool.connection() as conn:
            conn.execute(queries.RELAY_INSTANCE_HEARTBEAT, params)
            conn.execute(queries.RELAY_INSTANCE_PURGE)
            live_row = conn.execute(queries.RELAY_INSTANCE_COUNT_LIVE).fetchone()
            live = max(1, int(str(live_row["live"]))) if live_row else 1
            target = math.ceil(VPARTS / live)
            conn.execute(queries.RELAY_PLAN_BY_INDEX)  # the renewal moves each floor up: along its indexes
            owned = {
                int(str(r["vpart"])): int(str(r["epoch"])) for r in conn.execute(queries.RELAY_LEASE_RENEW, params)
            }
            acquired: dict[int, int] = {}
            if len(owned) < target:
                limit = {**params, "limit": target - len(owned)}
                records = conn.execute(queries.RELAY_LEASE_ACQUIRE_FREE, limit).fetchall()
                acquired = {int(str(r["vpart"])): int(str(r["epoch"])) for r in records}
            conn.commit()
            lost = set(self._owned) - set(owned)
            self._owned = {**owned, **acquired}
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
                conn.execute(queries.RELAY_LEASE_RELEASE, {"owner": self._owner, "vparts": excess})
            for vpart in excess:
                self._owned.pop(vpart, None)
        metrics.OWNED_VPARTS.set(len(self._owned))
        log.info("outbox leases released", released=excess, owned=len(self._owned))

    def release_all(self) -> None:
        """Give back every lease and unregister (graceful stop): the others take over at once, not after a TTL."""
        with self._lock:
            with self._pool.connection() as conn:
                conn.execute(queries.RELAY_LEASE_RELEASE, {"owner": self._owner, "vparts": list(range(VPARTS))})
                conn.execute(queries.RELAY_INSTANCE_DELETE, {"owner": self._owner})
            self._owned = {}
        metrics.OWNED_VPARTS.set(0)
