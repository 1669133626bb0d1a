"""The relay's SQL: the named statements of ``queries.sql``, loaded once by :func:`pin.db.load_queries`."""

from __future__ import annotations

from collections.abc import Sequence

from pin.db import load_queries
from pin.outbox.floors import FLOORS, PLAN_BY_INDEX
from pin.outbox.writer import MOVED_COLUMNS_SQL

_QUERIES = load_queries(__package__)
# the lease's liveness ({live}) and the floors this instance keeps ({given}), fragments its statements embed
_LEASE = {"live": _QUERIES["relay_lease_live"], "given": _QUERIES["relay_floors_given"]}

RELAY_PLAN_BY_INDEX = PLAN_BY_INDEX

OUTBOX_READ_OWNED = _QUERIES["outbox_read_owned"].format(**FLOORS, **_LEASE, sendable=_QUERIES["outbox_read_sendable"])
OUTBOX_DELETE_PUBLISHED = _QUERIES["outbox_delete_published"]
OUTBOX_DELETE_PUBLISHED_FREE = _QUERIES["outbox_delete_published_free"]
OUTBOX_MARK_FAILED = _QUERIES["outbox_mark_failed"].format(**_LEASE)
OUTBOX_DEAD_LETTER = _QUERIES["outbox_dead_letter"].format(moved_columns=MOVED_COLUMNS_SQL, **_LEASE)
RELAY_INSTANCE_RENEW = _QUERIES["relay_instance_renew"]
RELAY_LEASE_GIVE_UP_EXPIRED = _QUERIES["relay_lease_give_up_expired"]
RELAY_INSTANCE_REGISTER = _QUERIES["relay_instance_register"]
RELAY_INSTANCE_PURGE = _QUERIES["relay_instance_purge"]
RELAY_INSTANCE_COUNT_LIVE = _QUERIES["relay_instance_count_live"]
RELAY_INSTANCE_DELETE = _QUERIES["relay_instance_delete"]
RELAY_LEASE_OWNED = _QUERIES["relay_lease_owned"]
RELAY_LEASE_ACQUIRE_FREE = _QUERIES["relay_lease_acquire_free"]
RELAY_LEASE_RELEASE = _QUERIES["relay_lease_release"]
RELAY_FLOOR_LOAD = _QUERIES["relay_floor_load"]
RELAY_FLOOR_ADVANCE = _QUERIES["relay_floor_advance"].format(**FLOORS, **_LEASE)
RELAY_PLAN_ADVANCE = _QUERIES["relay_plan_advance"]
RELAY_FLOOR_WRITE = _QUERIES["relay_floor_write"].format(**_LEASE)


def id_array(ids: Sequence[int]) -> str:
    """Ids as one bigint[] literal: one text parameter instead of an array psycopg adapts element by element."""
    return "{" + ",".join(map(str, ids)) + "}"
