"""The relay's SQL: the named statements of ``queries.sql``, loaded once by :func:`pin.db.load_queries`."""

from __future__ import annotations

from collections.abc import Sequence

from pin.db import load_queries
from pin.outbox.writer import MOVED_COLUMNS_SQL

_QUERIES = load_queries(__package__)

OUTBOX_READ_OWNED = _QUERIES["outbox_read_owned"]
OUTBOX_DELETE_PUBLISHED = _QUERIES["outbox_delete_published"]
OUTBOX_DELETE_PUBLISHED_FREE = _QUERIES["outbox_delete_published_free"]
OUTBOX_MARK_FAILED = _QUERIES["outbox_mark_failed"]
OUTBOX_DEAD_LETTER = _QUERIES["outbox_dead_letter"].format(moved_columns=MOVED_COLUMNS_SQL)
RELAY_INSTANCE_HEARTBEAT = _QUERIES["relay_instance_heartbeat"]
RELAY_INSTANCE_PURGE = _QUERIES["relay_instance_purge"]
RELAY_INSTANCE_COUNT_LIVE = _QUERIES["relay_instance_count_live"]
RELAY_INSTANCE_DELETE = _QUERIES["relay_instance_delete"]
RELAY_LEASE_RENEW = _QUERIES["relay_lease_renew"]
RELAY_LEASE_ACQUIRE_FREE = _QUERIES["relay_lease_acquire_free"]
RELAY_LEASE_RELEASE = _QUERIES["relay_lease_release"]


def id_array(ids: Sequence[int]) -> str:
    """Ids as one bigint[] literal: one text parameter instead of an array psycopg adapts element by element."""
    return "{" + ",".join(map(str, ids)) + "}"
