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
from pin.calendar.rows import APPOINTMENT_NAMES, EVENT_NAMES, REMINDER_NAMES, SLOT_NAMES
from pin.db import Conn
from pin.jobs import bookkeeping

JOB_NAME = "appointment-timeout"

_DUE = APPOINTMENT_IS_DUE  # over ix_appointments_pending_expires_at
# The cycle's keyset cursor: strictly after the last row this cycle claimed (the first claim starts at the head).
_AFTER_CURSOR: LiteralString = """(a.pending_expires_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
    coalesce(%(after_id)s::uuid, '00000000-0000-0000-0000-000000000000'))"""
# The first pass claims appointments without a failure record, the second the poison ones not failed this cycle.
_PASSES = {
    False: f"NOT {bookkeeping.has_failure('a')}",
    True: f"{bookkeeping.has_failure('a')} AND a.id <> ALL(%(failed)s::uuid[])",
}

# The rest of the claimed appointment's cluster, locked in the calendar's lock order (slot, event, reminders), each
# lock's key read from the rows the previous lock returned, so the order holds whatever the plan.
_CLUSTER_LOCKS: LiteralString = f""",
slot_locked AS MATERIALIZED (
    SELECT {", ".join(f"s.{name}" for name in SLOT_NAMES)}
      FROM calendar.availability_slot AS s WHERE s.id = (SELECT c.slot_id FROM claimed AS c)
       FOR NO KEY UPDATE OF s
),
event_locked AS MATERIALIZED (
    SELECT {", ".join(f"e.{name}" for name in EVENT_NAMES)}
      FROM calendar.calendar_event AS e
     WHERE e.id = (SELECT c.calendar_event_id FROM claimed AS c JOIN slot_locked AS s ON s.id = c.slot_id)
       FOR NO KEY UPDATE OF e
),
reminders_locked AS MATERIALIZED (
    SELECT {", ".join(f"r.{name}" for name in REMINDER_NAMES)}
      FROM calendar.event_reminder AS r WHERE r.calendar_event_id = (SELECT e.id FROM event_locked AS e)
     ORDER BY r.id
       FOR NO KEY UPDATE OF r
)"""

# The locked cluster's columns: the appointment's under their own names, the slot's and the event's prefixed
# (s_, e_), the reminders as arrays (what repository.cluster_from_locked_row reads, by position), passed_over last.
_CLUSTER_COLUMNS: LiteralString = ", ".join(
    [
        "c.*",
        *(f"s.{name} AS s_{name}" for name in SLOT_NAMES),
        *(f"e.{name} AS e_{name}" for name in EVENT_NAMES),
        "(SELECT array_agg(r.id ORDER BY r.id) FROM reminders_locked AS r) AS r_ids",
        "(SELECT array_agg(r.remind_at ORDER BY r.id) FROM reminders_locked AS r) AS r_remind_ats",
        "(SELECT array_agg(r.status ORDER BY r.id) FROM reminders_locked AS r) AS r_statuses",
    ]
)


def _claim(*, lock_cluster: bool, poison: bool) -> LiteralString:
    """The claim of one item after the cursor; ``passed_over``: the due rows before it that SKIP LOCKED passed."""
    which = _PASSES[poison]
    claimed = "a.id, a.tenant_id, a.pending_expires_at"
    if lock_cluster:
        claimed = ", ".join(f"a.{name}" for name in APPOINTMENT_NAMES)
    columns = _CLUSTER_COLUMNS if lock_cluster else "c.id, c.tenant_id, c.pending_expires_at"
    joins = "\n  LEFT JOIN slot_locked AS s ON true LEFT JOIN event_locked AS e ON true" if lock_cluster else ""
    return f"""WITH claimed AS MATERIALIZED (
    SELECT {claimed}
      FROM calendar.appointment AS a
     WHERE {_DUE} AND {_AFTER_CURSOR} AND {which}
     ORDER BY a.pending_expires_at, a.id
     LIMIT 1
       FOR NO KEY UPDATE OF a SKIP LOCKED
),
passed_over AS MATERIALIZED (
    SELECT a.id
      FROM calendar.appointment AS a
     WHERE {_DUE} AND {_AFTER_CURSOR} AND {which}
       AND NOT EXISTS (SELECT 1 FROM claimed AS c WHERE c.id = a.id)
       AND a.pending_expires_at <= coalesce((SELECT c.pending_expires_at FROM claimed AS c), %(as_of)s)
       AND (NOT EXISTS (SELECT 1 FROM claimed)
            OR (a.pending_expires_at, a.id) < (SELECT c.pending_expires_at, c.id FROM claimed AS c))
     ORDER BY a.pending_expires_at, a.id
     LIMIT {bookkeeping.BACKLOG_CAP}
){_CLUSTER_LOCKS if lock_cluster else ""}
SELECT {columns},
       (SELECT coalesce(array_agg(p.id), '{{}}'::uuid[]) FROM passed_over AS p) AS passed_over
  FROM (SELECT) AS one
  LEFT JOIN claimed AS c ON true{joins}"""


# The claim statements by (lock_cluster, poison): with the cluster locked (one round trip), or the claim alone (the
# fallback when a lock of the cluster timed out); the first pass or the poison pass. Each stays under psycopg's
# 4,096 characters, or it would be parsed again on every execute.
CLAIMS: dict[tuple[bool, bool], LiteralString] = {
    (lock, poison): _claim(lock_cluster=lock, poison=poison) for lock in (True, False) for poison in (False, True)
}

# The due appointments, poison ones included: the count of a cycle's batch and the backlog gauge.
DUE_SQL: LiteralString = f"SELECT 1 FROM calendar.appointment AS a WHERE {_DUE}"

# The earliest PendingExpiresAt of a Pending appointment that is not poison (a poison one never wakes the worker).
NEXT_DEADLINE_SQL: LiteralString = f"""SELECT a.pending_expires_at AS at FROM calendar.appointment AS a
 WHERE a.status = 'Pending' AND NOT {bookkeeping.has_failure("a")}
 ORDER BY a.pending_expires_at, a.id LIMIT 1"""

# A poison appointment's failure record is kept while the appointment still waits (is Pending).
STILL_PENDING_SQL: LiteralString = (
    "EXISTS (SELECT 1 FROM calendar.appointment AS a WHERE a.id = f.item_id AND a.status = 'Pending')"
)

# The item lock timeout of a cycle's connection, set once for the session and reset before it goes back to the pool.
LOCK_TIMEOUT_SET: LiteralString = "SELECT set_config('lock_timeout', %(lock_timeout)s, false)"
LOCK_TIMEOUT_RESET: LiteralString = "RESET lock_timeout"
STATEMENT_TIMEOUT_RESTORE: LiteralString = "SELECT set_config('statement_timeout', %(statement_timeout)s, false)"


@dataclass(frozen=True)
class ClaimedItem:
    """What one claim returned: the locked appointment (None when nothing was free) and the rows it passed over."""

    appointment_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    pending_expires_at: datetime | None
    has_failure: bool
    passed_over: list[uuid.UUID]
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
        row if lock_cluster else None,
    )
