"""The relay's SQL: the named statements of ``queries.sql``, loaded once, as written (never reformatted)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from typing import LiteralString, cast

# A statement starts at a "-- name --" line; the comment lines right after it are its description.
_HEADER = re.compile(r"^-- ([a-z0-9_]+) --\n(?:--.*\n)*", re.MULTILINE)


def parse_queries(text: str) -> dict[str, LiteralString]:
    """The statements of a query file by name (the text before the first name is the file's own comment)."""
    parts = _HEADER.split(text)
    names, bodies = parts[1::2], parts[2::2]
    if len(set(names)) != len(names):
        raise ValueError(f"a query name is used twice in {names}")
    # the file is part of the package, as trusted as a literal in the code
    return {name: cast(LiteralString, body.strip()) for name, body in zip(names, bodies, strict=True)}


_QUERIES = parse_queries(resources.files(__package__).joinpath("queries.sql").read_text(encoding="utf-8"))

OUTBOX_READ_OWNED = _QUERIES["outbox_read_owned"]
OUTBOX_DELETE_PUBLISHED = _QUERIES["outbox_delete_published"]
OUTBOX_MARK_FAILED = _QUERIES["outbox_mark_failed"]
OUTBOX_DEAD_LETTER = _QUERIES["outbox_dead_letter"]
RELAY_INSTANCE_HEARTBEAT = _QUERIES["relay_instance_heartbeat"]
RELAY_INSTANCE_PURGE = _QUERIES["relay_instance_purge"]
RELAY_INSTANCE_COUNT_LIVE = _QUERIES["relay_instance_count_live"]
RELAY_INSTANCE_DELETE = _QUERIES["relay_instance_delete"]
RELAY_LEASE_RENEW = _QUERIES["relay_lease_renew"]
RELAY_LEASE_ACQUIRE_FREE = _QUERIES["relay_lease_acquire_free"]
RELAY_LEASE_RELEASE = _QUERIES["relay_lease_release"]
OUTBOX_COUNT_BACKLOG = _QUERIES["outbox_count_backlog"]
OUTBOX_OLDEST_AGE = _QUERIES["outbox_oldest_age"]
DEAD_LETTER_COUNT = _QUERIES["dead_letter_count"]


def id_array(ids: Sequence[int]) -> str:
    """Ids as one bigint[] literal: one text parameter instead of an array psycopg adapts element by element."""
    return "{" + ",".join(map(str, ids)) + "}"
