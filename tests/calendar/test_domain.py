"""The calendar domain without a database: invariants, transitions, the cascade and the recorded events."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pin.calendar import domain
from pin.calendar.contracts import payload_of
from pin.calendar.domain import (
    AppointmentCancelled,
    AppointmentCluster,
    AppointmentConfirmed,
    AppointmentCreated,
    AppointmentStatus,
    AvailabilitySlot,
    CalendarEventStatusChanged,
    CancelledBy,
    EventStatus,
    Kind,
    Reason,
    ReminderStatus,
    SlotOutcome,
    SlotStatus,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
TTL = timedelta(hours=24)
CUTOFF = timedelta(minutes=60)


def slot(
    *,
    starts_in: timedelta = timedelta(days=3),
    lead: int = 30,
    auto_confirm: bool = False,
    tenant: uuid.UUID | None = None,
) -> AvailabilitySlot:
    """An Available slot whose defaults are consistent (start in the future, an hour long)."""
    return AvailabilitySlot.create(
        tenant_id=tenant or uuid.UUID(int=1),
        agent_user_id=uuid.uuid4(),
        kind=Kind.SHOWING,
        start_at=NOW + starts_in,
        end_at=NOW + starts_in + timedelta(hours=1),
        time_zone="Europe/Moscow",
        min_lead_time_minutes=lead,
        auto_confirm=auto_confirm,
        now=NOW,
    )


def booked(**options: object) -> AppointmentCluster:
    """A booked appointment with its events already taken."""
    cluster = AppointmentCluster.book(slot(**options), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL)  # type: ignore[arg-type]
    cluster.pull_events()
    return cluster


# ------------------------------------------------------------------------------------------------ slots


def test_slot_rejects_unknown_time_zone_end_before_start_and_negative_lead() -> None:
    with pytest.raises(domain.InvalidTimeZoneError):
        AvailabilitySlot.create(
            tenant_id=uuid.uuid4(), agent_user_id=uuid.uuid4(), kind=Kind.SHOWING, start_at=NOW, end_at=NOW + TTL,
            time_zone="Mars/Olympus", min_lead_time_minutes=0, auto_confirm=False, now=NOW,
        )  # fmt: skip
    with pytest.raises(domain.EndNotAfterStartError):
        AvailabilitySlot.create(
            tenant_id=uuid.uuid4(), agent_user_id=uuid.uuid4(), kind=Kind.SHOWING, start_at=NOW, end_at=NOW,
            time_zone="UTC", min_lead_time_minutes=0, auto_confirm=False, now=NOW,
        )  # fmt: skip
    with pytest.raises(domain.InvalidLeadTimeError):
        slot(lead=-1)
    with pytest.raises(domain.StartInPastError):
        slot(starts_in=timedelta(0))


def test_booking_needs_available_and_the_lead_time() -> None:
    s = slot(starts_in=timedelta(minutes=30), lead=30)
    s.book(NOW)  # now == StartAt - MinLeadTime is still allowed
    assert (s.status, s.version) == (SlotStatus.BOOKED, 2)
    with pytest.raises(domain.SlotNotAvailableError):
        s.book(NOW)
    late = slot(starts_in=timedelta(minutes=30), lead=30)
    with pytest.raises(domain.LeadTimePassedError):
        late.book(NOW + timedelta(microseconds=1))
    assert late.status is SlotStatus.AVAILABLE


@pytest.mark.parametrize(
    ("as_of", "outcome", "status"),
    [
        (NOW + timedelta(days=3, minutes=-30), SlotOutcome.RELEASED, SlotStatus.AVAILABLE),  # exactly the boundary
        (NOW + timedelta(days=3, minutes=-30, microseconds=1), SlotOutcome.EXPIRED, SlotStatus.EXPIRED),
    ],
)
def test_release_follows_inv_slt_5(as_of: datetime, outcome: SlotOutcome, status: SlotStatus) -> None:
    s = slot()
    s.book(NOW)
    assert s.release(as_of) is outcome
    assert (s.status, s.version, s.updated_at) == (status, 3, as_of)


def test_release_of_a_slot_that_is_not_booked_is_poison() -> None:
    with pytest.raises(domain.SlotNotBookedError):
        slot().release(NOW)


# -------------------------------------------------------------------------------------------------- book


def test_pending_expires_at_is_the_earlier_of_ttl_and_lead_time() -> None:
    far = AppointmentCluster.book(
        slot(starts_in=timedelta(days=3)), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL
    )
    assert far.appointment.pending_expires_at == NOW + TTL
    near = AppointmentCluster.book(
        slot(starts_in=timedelta(hours=5)), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL
    )
    assert near.appointment.pending_expires_at == NOW + timedelta(hours=5, minutes=-30)


def test_auto_confirm_skips_pending() -> None:
    cluster = AppointmentCluster.book(slot(auto_confirm=True), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL)
    assert cluster.appointment.status is AppointmentStatus.CONFIRMED
    assert cluster.appointment.pending_expires_at is None
    created = cluster.pull_events()[0]
    assert isinstance(created, AppointmentCreated)
    assert (created.status, created.pending_expires_at) == (AppointmentStatus.CONFIRMED, None)


def test_booking_creates_the_event_and_only_future_reminders() -> None:
    cluster = AppointmentCluster.book(slot(), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL)
    a, e = cluster.appointment, cluster.event
    assert (e.id, e.appointment_id, e.owner_user_id, e.status) == (
        a.calendar_event_id,
        a.id,
        a.agent_user_id,
        EventStatus.SCHEDULED,
    )
    assert [r.remind_at for r in e.reminders] == [a.start_at - timedelta(hours=24), a.start_at - timedelta(hours=1)]
    assert all(r.calendar_event_id == e.id and r.status is ReminderStatus.PENDING for r in e.reminders)
    events = cluster.pull_events()
    assert [type(x) for x in events] == [AppointmentCreated, CalendarEventStatusChanged]
    assert cluster.pull_events() == []
    soon = AppointmentCluster.book(
        slot(starts_in=timedelta(hours=2), lead=0), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL
    )
    assert [r.remind_at for r in soon.event.reminders] == [NOW + timedelta(hours=1)]
    now_ish = AppointmentCluster.book(
        slot(starts_in=timedelta(hours=1), lead=0), investor_user_id=uuid.uuid4(), now=NOW, pending_ttl=TTL
    )
    assert now_ish.event.reminders == []  # StartAt - 1h == now is not in the future


# ------------------------------------------------------------------------------------------ transitions


def test_confirm_only_pending() -> None:
    cluster = booked()
    cluster.confirm(NOW)
    assert (cluster.appointment.status, cluster.appointment.version) == (AppointmentStatus.CONFIRMED, 2)
    assert [type(x) for x in cluster.pull_events()] == [AppointmentConfirmed]
    with pytest.raises(domain.AppointmentNotPendingError):
        cluster.confirm(NOW)


@pytest.mark.parametrize("text", [None, "", "   "])
def test_decline_requires_a_reason(text: str | None) -> None:
    cluster = booked()
    with pytest.raises(domain.ReasonRequiredError):
        cluster.decline(text, NOW)
    assert cluster.appointment.status is AppointmentStatus.PENDING
    assert cluster.pull_events() == []


def test_decline_of_confirmed_is_a_conflict() -> None:
    cluster = booked(auto_confirm=True)
    with pytest.raises(domain.AppointmentNotPendingError):
        cluster.decline("no", NOW)


def test_the_cascade_of_a_decline() -> None:
    cluster = booked()
    outcome = cluster.decline("  busy  ", NOW)
    a, s, e = cluster.appointment, cluster.slot, cluster.event
    assert outcome is SlotOutcome.RELEASED
    assert (a.status, a.cancelled_by, a.cancel_reason, a.version) == (AppointmentStatus.DECLINED, None, "busy", 2)
    assert (s.status, s.version) == (SlotStatus.AVAILABLE, 3)
    assert (e.status, e.cancel_reason, e.version) == (EventStatus.CANCELLED, "Запись отклонена агентом", 2)
    assert {r.status for r in e.reminders} == {ReminderStatus.SKIPPED}
    cancelled, changed = cluster.pull_events()
    assert isinstance(cancelled, AppointmentCancelled)
    assert isinstance(changed, CalendarEventStatusChanged)
    assert (cancelled.reason, cancelled.cancelled_by, cancelled.rescheduled_to_appointment_id) == (
        Reason.DECLINED_BY_AGENT,
        None,
        None,
    )
    assert (changed.status, changed.version) == (EventStatus.CANCELLED, 2)
    assert "CancelReason" not in payload_of(cancelled)[2]


def test_agent_cancel_needs_a_reason_and_an_active_appointment() -> None:
    cluster = booked(auto_confirm=True)
    with pytest.raises(domain.ReasonRequiredError):
        cluster.cancel_by_agent(None, NOW)
    cluster.cancel_by_agent("ill", NOW)
    assert (cluster.appointment.status, cluster.appointment.cancelled_by) == (
        AppointmentStatus.CANCELLED,
        CancelledBy.AGENT,
    )
    with pytest.raises(domain.AppointmentNotActiveError):
        cluster.cancel_by_agent("again", NOW)


def test_investor_cancel_until_the_cutoff_inv_apt_3() -> None:
    cutoff_at = NOW + timedelta(days=3) - CUTOFF
    late = booked()
    with pytest.raises(domain.CancelCutoffPassedError):
        late.cancel_by_investor(None, cutoff_at + timedelta(microseconds=1), CUTOFF)
    assert late.appointment.status is AppointmentStatus.PENDING
    on_time = booked()
    on_time.cancel_by_investor(None, cutoff_at, CUTOFF)
    assert (on_time.appointment.cancelled_by, on_time.appointment.cancel_reason) == (CancelledBy.INVESTOR, None)


def test_reschedule_is_a_pair_inv_apt_5() -> None:
    old = booked()
    target = slot(starts_in=timedelta(days=4), tenant=old.appointment.tenant_id)
    new = old.reschedule(target, NOW, cancel_cutoff=CUTOFF, pending_ttl=TTL)
    assert old.appointment.status is AppointmentStatus.CANCELLED
    assert old.appointment.rescheduled_to_appointment_id == new.appointment.id
    assert new.appointment.rescheduled_from_appointment_id == old.appointment.id
    assert (target.status, new.appointment.slot_id, new.appointment.investor_user_id) == (
        SlotStatus.BOOKED,
        target.id,
        old.appointment.investor_user_id,
    )
    assert old.event.cancel_reason == "Запись перенесена инвестором"
    cancelled = old.pull_events()[0]
    assert isinstance(cancelled, AppointmentCancelled)
    assert (cancelled.reason, cancelled.cancelled_by, cancelled.rescheduled_to_appointment_id) == (
        Reason.CANCELLED_BY_INVESTOR,
        CancelledBy.INVESTOR,
        new.appointment.id,
    )


def test_reschedule_refusals_change_nothing() -> None:
    old = booked()
    with pytest.raises(domain.SameSlotError):
        old.reschedule(old.slot, NOW, cancel_cutoff=CUTOFF, pending_ttl=TTL)
    taken = slot(tenant=old.appointment.tenant_id)
    taken.book(NOW)
    with pytest.raises(domain.SlotNotAvailableError):
        old.reschedule(taken, NOW, cancel_cutoff=CUTOFF, pending_ttl=TTL)
    with pytest.raises(domain.SlotNotAvailableError):
        old.reschedule(slot(tenant=uuid.uuid4()), NOW, cancel_cutoff=CUTOFF, pending_ttl=TTL)
    assert (old.appointment.status, old.slot.status, old.appointment.version) == (
        AppointmentStatus.PENDING,
        SlotStatus.BOOKED,
        1,
    )
    assert old.pull_events() == []


def test_expire_only_after_pending_expires_at_inv_apt_6() -> None:
    cluster = booked()
    deadline = cluster.appointment.pending_expires_at
    assert deadline is not None
    with pytest.raises(domain.NotDueYetError):
        cluster.expire(deadline)  # due when PendingExpiresAt < AsOf, strictly
    assert cluster.expire(deadline + timedelta(seconds=1)) is SlotOutcome.RELEASED
    a = cluster.appointment
    assert (a.status, a.cancelled_by, a.updated_at) == (
        AppointmentStatus.EXPIRED,
        None,
        deadline + timedelta(seconds=1),
    )
    assert cluster.event.cancel_reason == "Запись не подтверждена агентом в срок"
    cancelled, _ = cluster.pull_events()
    assert isinstance(cancelled, AppointmentCancelled)
    assert (cancelled.reason, cancelled.cancelled_by) == (Reason.EXPIRED, None)
    with pytest.raises(domain.AppointmentNotPendingError):
        cluster.expire(deadline + timedelta(days=1))


def test_is_due_only_strictly_after_pending_expires_at_inv_apt_6() -> None:
    pending, confirmed = booked().appointment, booked(auto_confirm=True).appointment
    deadline = pending.pending_expires_at
    assert deadline is not None
    assert not pending.is_due(deadline)  # strictly after PendingExpiresAt (INV-APT-6)
    assert pending.is_due(deadline + timedelta(microseconds=1))
    assert not confirmed.is_due(NOW + timedelta(days=10))


def test_confirmed_never_expires() -> None:
    with pytest.raises(domain.AppointmentNotPendingError):
        booked(auto_confirm=True).expire(NOW + timedelta(days=10))


def test_poison_cascade_changes_nothing() -> None:
    cluster = booked()
    cluster.slot.status = SlotStatus.AVAILABLE
    with pytest.raises(domain.SlotNotBookedError):
        cluster.expire(NOW + timedelta(days=2))
    assert (cluster.appointment.status, cluster.event.status) == (AppointmentStatus.PENDING, EventStatus.SCHEDULED)
    other = booked()
    other.event.status = EventStatus.CANCELLED
    with pytest.raises(domain.CalendarEventNotScheduledError):
        other.decline("x", NOW)
    assert other.appointment.status is AppointmentStatus.PENDING
    mismatch = booked()
    mismatch.event.appointment_id = uuid.uuid4()
    with pytest.raises(domain.CalendarEventMismatchError):
        mismatch.cancel_by_agent("x", NOW)


# ---------------------------------------------------------------------------- state machines live twice


def _trigger_transitions(table: str) -> set[tuple[str, str]]:
    sql = (Path(domain.__file__).parent / "schema.sql").read_text(encoding="utf-8")
    match = re.search(
        rf"ON calendar\.{table}\s+FOR EACH ROW EXECUTE FUNCTION calendar\.enforce_status_transition\(([^)]*)\)", sql
    )
    assert match is not None, table
    return {tuple(pair.strip(" '\n").split(">")) for pair in match.group(1).split(",")}  # type: ignore[misc]


@pytest.mark.parametrize(
    ("table", "machine"),
    [
        ("availability_slot", domain.SLOT_TRANSITIONS),
        ("appointment", domain.APPOINTMENT_TRANSITIONS),
        ("calendar_event", domain.EVENT_TRANSITIONS),
        ("event_reminder", domain.REMINDER_TRANSITIONS),
    ],
)
def test_database_triggers_allow_exactly_the_enum_transitions(table: str, machine: object) -> None:
    assert isinstance(machine, dict)
    expected = {(str(src), str(dst)) for src, targets in machine.items() for dst in targets}
    assert _trigger_transitions(table) == expected
