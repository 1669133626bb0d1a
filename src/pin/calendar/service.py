"""The calendar's use cases: load under row locks, call the domain, save with guarded writes, commit.

Each is one unit of work whose recorded events become outbox rows in the same transaction; AsOf is the database
clock. A record of another tenant or user is reported as not found.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Unpack

import structlog
from psycopg_pool import ConnectionPool

from pin.calendar import repository
from pin.calendar.contracts import payload_of
from pin.calendar.domain import (
    Appointment,
    AppointmentCluster,
    AppointmentNotFoundError,
    AvailabilitySlot,
    CalendarEvent,
    CalendarEventNotFoundError,
    SlotNotFoundError,
    SlotOutcome,
    SlotTerms,
    VersionMismatchError,
)
from pin.db import Conn, database_now
from pin.jobs import bookkeeping
from pin.observability.tracing import current_traceparent
from pin.outbox.writer import MessageContext, OutboxPolicy
from pin.settings import CalendarSettings, Settings
from pin.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from pin.calendar.expiry import ClaimedItem

log = structlog.get_logger(__name__)
_stdlib_log = logging.getLogger(__name__)  # the logger structlog renders through (its level decides)


@dataclass(frozen=True)
class CalendarPolicy:
    """The configurable rules of the calendar."""

    # PendingTtl: how long an agent has to decide on a Pending appointment.
    pending_ttl: timedelta = timedelta(seconds=CalendarSettings().pending_ttl_seconds)
    # INV-APT-3: an investor may cancel or reschedule until StartAt minus this.
    cancel_cutoff: timedelta = timedelta(minutes=CalendarSettings().cancel_cutoff_minutes)

    @classmethod
    def from_settings(cls, settings: Settings) -> CalendarPolicy:
        """The policy configured by PIN_APPOINTMENT_* variables."""
        return cls(
            pending_ttl=timedelta(seconds=settings.calendar.pending_ttl_seconds),
            cancel_cutoff=timedelta(minutes=settings.calendar.cancel_cutoff_minutes),
        )


@dataclass(frozen=True)
class Actor:
    """Who performs a use case: a user of a tenant."""

    user_id: uuid.UUID
    tenant_id: uuid.UUID


@dataclass(frozen=True)
class UseCaseContext:
    """What every use case runs with: the pool, the policy and the message context of this request, and the
    process's outbox policy."""

    pool: ConnectionPool[Conn]
    policy: CalendarPolicy
    context: MessageContext
    outbox: OutboxPolicy

    @classmethod
    def for_request(
        cls, pool: ConnectionPool[Conn], settings: Settings, outbox: OutboxPolicy, correlation_id: str
    ) -> UseCaseContext:
        """The use cases' dependencies for one API request: the configured policy, its correlation id."""
        return cls(pool, CalendarPolicy.from_settings(settings), MessageContext(correlation_id), outbox)

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """A new transaction whose recorded events carry this request's correlation id and trace."""
        with UnitOfWork(self.pool, self.context, outbox=self.outbox, traceparent_provider=current_traceparent) as uow:
            yield uow


# ------------------------------------------------------------------------------------------------ slots


def create_slot(calendar: UseCaseContext, actor: Actor, **terms: Unpack[SlotTerms]) -> AvailabilitySlot:
    """An agent offers a new Available slot."""
    with calendar.unit_of_work() as uow:
        now = database_now(uow.conn)
        slot = AvailabilitySlot.create(tenant_id=actor.tenant_id, agent_user_id=actor.user_id, now=now, **terms)
        repository.slot_insert(uow.conn, slot)
        _commit(uow)
    return slot


def book_slot(
    calendar: UseCaseContext, actor: Actor, slot_id: uuid.UUID, *, expected_version: int | None = None
) -> AppointmentCluster:
    """An investor books an Available slot: a Pending (or, with AutoConfirm, Confirmed) appointment.

    The slot row is locked first; a concurrent booking waits for it and then finds it Booked (INV-SLT-3).
    """
    with calendar.unit_of_work() as uow:
        slot = repository.slot_lock(uow.conn, slot_id)
        if slot is None or slot.tenant_id != actor.tenant_id:
            raise SlotNotFoundError
        _check_version(slot.version, expected_version)
        cluster = AppointmentCluster.book(
            slot, investor_user_id=actor.user_id, now=database_now(uow.conn), pending_ttl=calendar.policy.pending_ttl
        )
        _save(uow, cluster)
        _commit(uow)
    return cluster


# ------------------------------------------------------------------------------------------ appointments


class Side(StrEnum):
    """Which party of an appointment acts."""

    AGENT = "agent"
    INVESTOR = "investor"


def confirm_appointment(
    calendar: UseCaseContext, actor: Actor, appointment_id: uuid.UUID, *, expected_version: int | None = None
) -> Appointment:
    """The agent confirms a Pending appointment (appointment-confirmed)."""
    with _changing_appointment(calendar, actor, Side.AGENT, appointment_id, expected_version) as (cluster, now):
        cluster.confirm(now)
    return cluster.appointment


def decline_appointment(
    calendar: UseCaseContext,
    actor: Actor,
    appointment_id: uuid.UUID,
    reason: str | None,
    *,
    expected_version: int | None = None,
) -> Appointment:
    """The agent declines a Pending appointment with a reason (Reason = DeclinedByAgent)."""
    with _changing_appointment(calendar, actor, Side.AGENT, appointment_id, expected_version) as (cluster, now):
        cluster.decline(reason, now)
    return cluster.appointment


def cancel_appointment_by_agent(
    calendar: UseCaseContext,
    actor: Actor,
    appointment_id: uuid.UUID,
    reason: str | None,
    *,
    expected_version: int | None = None,
) -> Appointment:
    """The agent cancels a Pending or Confirmed appointment (Reason = CancelledByAgent)."""
    with _changing_appointment(calendar, actor, Side.AGENT, appointment_id, expected_version) as (cluster, now):
        cluster.cancel_by_agent(reason, now)
    return cluster.appointment


def cancel_my_appointment(
    calendar: UseCaseContext,
    actor: Actor,
    appointment_id: uuid.UUID,
    reason: str | None,
    *,
    expected_version: int | None = None,
) -> Appointment:
    """The investor cancels until the cutoff (INV-APT-3; Reason = CancelledByInvestor)."""
    with _changing_appointment(calendar, actor, Side.INVESTOR, appointment_id, expected_version) as (cluster, now):
        cluster.cancel_by_investor(reason, now, calendar.policy.cancel_cutoff)
    return cluster.appointment


def reschedule_my_appointment(
    calendar: UseCaseContext,
    actor: Actor,
    appointment_id: uuid.UUID,
    new_slot_id: uuid.UUID,
    *,
    expected_version: int | None = None,
) -> AppointmentCluster:
    """INV-APT-5: the old appointment Cancelled and a new one on ``new_slot_id``, in one transaction."""
    policy = calendar.policy
    with calendar.unit_of_work() as uow:
        old, new_slot = repository.appointment_cluster_lock_with_slot(uow.conn, appointment_id, new_slot_id)
        _authorize(old.appointment, actor, Side.INVESTOR)
        _check_version(old.appointment.version, expected_version)
        if new_slot is None or new_slot.tenant_id != actor.tenant_id:
            raise SlotNotFoundError
        as_of = database_now(uow.conn)
        new = old.reschedule(new_slot, as_of, cancel_cutoff=policy.cancel_cutoff, pending_ttl=policy.pending_ttl)
        _record_events(uow, old)
        _record_events(uow, new)
        rows = uow.take_outbox_rows()
        repository.cluster_save(uow.conn, new, [])  # first: the old one will point at it
        repository.cluster_save(uow.conn, old, rows)
        _commit(uow)
    return new


# --------------------------------------------------------------------------------- the timeout worker's unit


class ExpiryStatus(StrEnum):
    """What :func:`expire_appointment` found."""

    EXPIRED = "expired"
    LOCKED = "locked"  # another transaction holds the appointment (SKIP LOCKED)
    NOT_DUE = "not_due"  # no longer Pending, or PendingExpiresAt not passed: a no-op (idempotent by state)


@dataclass(frozen=True)
class ExpiryResult:
    """The outcome of one expiry attempt."""

    status: ExpiryStatus
    slot_outcome: SlotOutcome | None = None
    cluster: AppointmentCluster | None = None


def expire_appointment(
    uow: UnitOfWork, appointment_id: uuid.UUID, as_of: datetime, *, skip_locked: bool = True
) -> ExpiryResult:
    """Expire one due Pending appointment with its cascade inside ``uow``; the caller commits.

    Raises a CascadeInconsistentError subclass for a poison item (roll it back and leave it for the next cycle),
    ConflictError when a guarded write lost a race.
    """
    cluster = repository.appointment_cluster_lock(uow.conn, appointment_id, skip_locked=skip_locked)
    if cluster is None:
        return ExpiryResult(ExpiryStatus.LOCKED)
    return expire_locked_cluster(uow, cluster, as_of)


def expire_locked_cluster(uow: UnitOfWork, cluster: AppointmentCluster, as_of: datetime) -> ExpiryResult:
    """Expire a due Pending appointment whose cluster the caller locked in ``uow``'s transaction; the caller commits.

    The per-event log lines are at DEBUG (the worker logs one line per expired item). Raises as
    :func:`expire_appointment`.
    """
    if not cluster.appointment.is_due(as_of):
        return ExpiryResult(ExpiryStatus.NOT_DUE, cluster=cluster)
    outcome = cluster.expire(as_of)
    _save(uow, cluster, level=logging.DEBUG)
    return ExpiryResult(ExpiryStatus.EXPIRED, outcome, cluster)


def expire_claimed(uow: UnitOfWork, claim: ClaimedItem, as_of: datetime, *, job: str) -> ExpiryResult:
    """The worker's item: expire the claimed appointment with its cascade and commit (INV-APT-6).

    The cluster is the claim's locked row, or (a claim alone) locked here statement by statement; a former poison
    item's failure record (of ``job``) is cleared in the same transaction. NOT_DUE (re-read under the lock: no
    longer Pending or not due, idempotent by state) or LOCKED commit nothing. Raises as :func:`expire_appointment`.
    """
    assert claim.appointment_id is not None
    if claim.row is not None:
        expiry = expire_locked_cluster(uow, repository.cluster_from_locked_row(claim.row), as_of)
    else:
        expiry = expire_appointment(uow, claim.appointment_id, as_of)
    if expiry.status is ExpiryStatus.EXPIRED:
        if claim.has_failure:  # a former poison item healed
            bookkeeping.item_failure_clear(uow.conn, job, [claim.appointment_id])
        _commit(uow)  # the transition, the cascade and the two outbox rows, atomically
    return expiry


# ------------------------------------------------------------------------------------------------- reads


def get_slot(pool: ConnectionPool[Conn], actor: Actor, slot_id: uuid.UUID, *, any_of_tenant: bool) -> AvailabilitySlot:
    """A slot of the caller's tenant: any of them with ``any_of_tenant`` (investors), else only the agent's own."""
    with pool.connection() as conn:
        slot = repository.slot_get(conn, slot_id)
    if slot is None or slot.tenant_id != actor.tenant_id:
        raise SlotNotFoundError
    if not any_of_tenant and slot.agent_user_id != actor.user_id:
        raise SlotNotFoundError
    return slot


def get_appointment(
    pool: ConnectionPool[Conn], actor: Actor, appointment_id: uuid.UUID, *, sides: frozenset[Side]
) -> Appointment:
    """An appointment the caller is a party of, on one of ``sides``."""
    with pool.connection() as conn:
        appointment = repository.appointment_get(conn, appointment_id)
    if appointment is None or not any(_is_party(appointment, actor, side) for side in sides):
        raise AppointmentNotFoundError
    return appointment


def get_event(pool: ConnectionPool[Conn], actor: Actor, event_id: uuid.UUID) -> CalendarEvent:
    """A calendar event of its owner, with its reminders."""
    with pool.connection() as conn:
        event = repository.event_get(conn, event_id)
    if event is None or event.tenant_id != actor.tenant_id or event.owner_user_id != actor.user_id:
        raise CalendarEventNotFoundError
    return event


# ----------------------------------------------------------------------------------------------- helpers


@contextmanager
def _changing_appointment(
    calendar: UseCaseContext, actor: Actor, side: Side, appointment_id: uuid.UUID, expected_version: int | None
) -> Iterator[tuple[AppointmentCluster, datetime]]:
    """Lock the cluster, check the caller and If-Match, yield it with AsOf; then save, record and commit."""
    with calendar.unit_of_work() as uow:
        cluster = repository.appointment_cluster_lock(uow.conn, appointment_id)
        assert cluster is not None  # only None with skip_locked
        _authorize(cluster.appointment, actor, side)
        _check_version(cluster.appointment.version, expected_version)
        yield cluster, database_now(uow.conn)
        _save(uow, cluster)
        _commit(uow)


def _is_party(appointment: Appointment, actor: Actor, side: Side) -> bool:
    if appointment.tenant_id != actor.tenant_id:
        return False
    party = appointment.agent_user_id if side is Side.AGENT else appointment.investor_user_id
    return party == actor.user_id


def _authorize(appointment: Appointment, actor: Actor, side: Side) -> None:
    if not _is_party(appointment, actor, side):
        raise AppointmentNotFoundError


def _check_version(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise VersionMismatchError


def _save(uow: UnitOfWork, cluster: AppointmentCluster, *, level: int = logging.INFO) -> None:
    """Save a changed cluster and the outbox rows of its events: one statement (repository.cluster_save)."""
    _record_events(uow, cluster, level=level)
    repository.cluster_save(uow.conn, cluster, uow.take_outbox_rows())


def _record_events(uow: UnitOfWork, cluster: AppointmentCluster, *, level: int = logging.INFO) -> None:
    appointment = cluster.appointment
    # DEBUG is checked once, before structlog's processors run: it then costs nothing when the role logs at INFO
    enabled = level > logging.DEBUG or _stdlib_log.isEnabledFor(level)
    for event in cluster.pull_events():
        contract, key, payload = payload_of(event)
        uow.record(contract, key, payload, event.occurred_at)
        if not enabled:
            continue
        # identifiers and enums only: no names, no free-text reasons (SPEC section 6)
        log.log(
            level,
            "calendar event recorded",
            event_type=contract.EVENT_TYPE,
            appointment_id=str(appointment.id),
            slot_id=str(cluster.slot.id),
            calendar_event_id=str(cluster.event.id),
            tenant_id=str(appointment.tenant_id),
            appointment_status=appointment.status.value,
            slot_status=cluster.slot.status.value,
        )


def _commit(uow: UnitOfWork) -> None:
    with repository.translated_errors():
        uow.commit()
