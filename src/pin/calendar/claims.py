"""SQL adapter of the appointment-timeout claim: one due appointment and its cluster, locked in one statement.

Why it is shaped so: docs/design/claims.md (the claim, the keyset cursor, SkippedLocked) and
docs/design/poison-items.md (the two passes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

from psycopg.rows import tuple_row

from pin.calendar.repository import APPOINTMENT_IS_DUE
from pin.calendar.rows import APPOINTMENT_NAMES, EVENT_NAMES, REMINDER_NAMES, SLOT_NAMES, columns
from pin.db import Conn, load_queries
from pin.jobs import bookkeeping

JOB_NAME = "appointment-timeout"

_QUERIES = load_queries(__package__)
_HAS_FAILURE = bookkeeping.has_failure("a")
# The first pass claims appointments without a failure record, the second the poison ones not failed this cycle.
_PASSES = {
    False: _QUERIES["pass_fresh"].format(has_failure=_HAS_FAILURE),
    True: _QUERIES["pass_poison"].format(has_failure=_HAS_FAILURE),
}
# What the claim alone returns of the appointment it locked.
_CLAIMED_ALONE = ("id", "tenant_id", "pending_expires_at")


def _prefixed(names: tuple[str, ...], alias: str) -> str:
    """The columns of a locked part under its alias, each named with the alias as its prefix (``s.id AS s_id``)."""
    return ", ".join(f"{alias}.{name} AS {alias}_{name}" for name in names)


def _claim(*, lock_cluster: bool, poison: bool) -> LiteralString:
    """The claim of one item after the cursor, with its cluster locked by the same statement or the claim alone."""
    if lock_cluster:
        locks = _QUERIES["appointment_claim_cluster_locks"].format(
            slot_columns=columns(SLOT_NAMES, "s"),
            event_columns=columns(EVENT_NAMES, "e"),
            reminder_columns=columns(REMINDER_NAMES, "r"),
        )
        selected = _QUERIES["appointment_claim_cluster_columns"].format(
            slot_columns=_prefixed(SLOT_NAMES, "s"), event_columns=_prefixed(EVENT_NAMES, "e")
        )
        joins = "\n  " + _QUERIES["appointment_claim_cluster_joins"]
    else:
        locks, selected, joins = "", columns(_CLAIMED_ALONE, "c"), ""
    return _QUERIES["appointment_claim"].format(
        claimed_columns=columns(APPOINTMENT_NAMES if lock_cluster else _CLAIMED_ALONE, "a"),
        due=APPOINTMENT_IS_DUE,  # over ix_appointments_pending_expires_at
        which=_PASSES[poison],
        cap=bookkeeping.BACKLOG_CAP,
        cluster_locks=locks,
        columns=selected,
        joins=joins,
    )


# The claim statements by (lock_cluster, poison): with the cluster locked (one round trip), or the claim alone (the
# fallback when a lock of the cluster timed out); the first pass or the poison pass. Each stays under psycopg's
# 4,096 characters, or it would be parsed again on every execute.
CLAIMS: dict[tuple[bool, bool], LiteralString] = {
    (lock, poison): _claim(lock_cluster=lock, poison=poison) for lock in (True, False) for poison in (False, True)
}

# The due appointments, poison ones included: the count of a cycle's batch and the backlog gauge.
DUE_SQL: LiteralString = _QUERIES["appointments_due"].format(due=APPOINTMENT_IS_DUE)
# How many appointments a cycle may claim: the due ones from the claim floor on and the poison ones, up to count_limit.
DUE_COUNT_SQL: LiteralString = _QUERIES["appointments_due_count"].format(
    appointments_due=DUE_SQL, has_failure=_HAS_FAILURE, due=APPOINTMENT_IS_DUE
)
# The earliest PendingExpiresAt of a Pending appointment that is not poison (a poison one never wakes the worker).
NEXT_DEADLINE_SQL: LiteralString = _QUERIES["appointment_next_deadline"].format(has_failure=_HAS_FAILURE)
# A poison appointment's failure record is kept while the appointment still waits (is Pending).
STILL_PENDING_SQL: LiteralString = _QUERIES["appointment_still_pending"]

# The item lock timeout of a cycle's connection, set once for the session and reset before it goes back to the pool.
LOCK_TIMEOUT_SET: LiteralString = _QUERIES["lock_timeout_set"]
LOCK_TIMEOUT_RESET: LiteralString = _QUERIES["lock_timeout_reset"]
STATEMENT_TIMEOUT_RESTORE: LiteralString = _QUERIES["statement_timeout_restore"]


@dataclass(frozen=True)
class ClaimedItem:
    """What one claim returned: the locked appointment (None when nothing was free) and the rows it passed over."""

    appointment_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    pending_expires_at: datetime | None
    has_failure: bool
    passed_over: list[uuid.UUID]
    # the earliest PendingExpiresAt of the rows passed over (None: none was): the claim floor stays at or below it
    passed_over_from: datetime | None = None
    # with the cluster locked by the claim: the whole row, in the order repository.cluster_from_locked_row reads
    row: tuple[Any, ...] | None = None

    @property
    def cursor(self) -> tuple[datetime, uuid.UUID] | None:
        """The claimed row's position in the index: where the cycle's next claim starts."""
        if self.pending_expires_at is None or self.appointment_id is None:
            return None
        return self.pending_expires_at, self.appointment_id


# Where the claimed appointment's id, tenant and deadline are in a claim's row, with the cluster locked or not.
_ID_TENANT_DEADLINE = {
    True: tuple(APPOINTMENT_NAMES.index(name) for name in ("id", "tenant_id", "pending_expires_at")),
    False: (0, 1, 2),
}


def appointment_claim_next(
    conn: Conn,
    *,
    as_of: datetime,
    after: tuple[datetime, uuid.UUID] | None,
    lock_cluster: bool = True,
    poison: bool = False,
    failed: list[uuid.UUID] | None = None,
) -> ClaimedItem:
    """Lock the next due Pending appointment (after ``after``) that nobody else holds, in the caller's transaction.

    ``poison`` chooses the pass: False claims only appointments without a failure record, True only poison ones
    (except ``failed``, those that failed in this cycle already). With ``lock_cluster`` its slot, event and
    reminders are locked by the same statement (waits bounded by the session's lock_timeout: LockNotAvailable
    when one was held longer) and ``row`` holds the whole cluster.
    """
    after_at, after_id = after or (None, None)
    params: dict[str, object] = {"as_of": as_of, "after_at": after_at, "after_id": after_id, "job": JOB_NAME}
    if poison:
        params["failed"] = failed or []
    # A tuple in binary: no dict of some 50 columns per item, and uuids and times load from their binary form.
    with conn.cursor(row_factory=tuple_row, binary=True) as cur:
        row = cur.execute(CLAIMS[lock_cluster, poison], params).fetchone()
    assert row is not None  # the statement returns one row, claimed or not
    at_id, at_tenant, at_deadline = _ID_TENANT_DEADLINE[lock_cluster]
    return ClaimedItem(
        row[at_id],
        row[at_tenant],
        row[at_deadline],
        poison,
        list(row[-1]),
        passed_over_from=row[-2],
        row=row if lock_cluster else None,
    )
