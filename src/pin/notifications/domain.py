"""Who is told what (seed 003, «Потребители», notifications; seed 002, «срок истёк»). No IO.

Recipients of AppointmentCancelled by Reason: DeclinedByAgent and CancelledByAgent -> the investor;
CancelledByInvestor -> the agent; Expired -> both, each with their own text; a reschedule -> nobody (the new
appointment's appointment-created tells both participants, each with their own template); an unknown Reason -> both,
neutral text (fail safe).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pin.messaging.appointment_events import AppointmentCancelReason, EventKind


class NotificationKind(StrEnum):
    """What a notification is about."""

    APPOINTMENT_CANCELLED = "AppointmentCancelled"
    APPOINTMENT_CONFIRMED = "AppointmentConfirmed"
    APPOINTMENT_CREATED = "AppointmentCreated"
    PROMOTION_EXPIRED = "PromotionExpired"


class PurchaseStatus(StrEnum):
    """Status of a promotion purchase."""

    ACTIVE = "Active"
    EXPIRED = "Expired"
    CANCELLED = "Cancelled"


# Notice and Meeting are named tuples: immutable values, built for every message a consumer handles at a third of a
# frozen dataclass's cost.
class Notice(NamedTuple):
    """One notification to render and deliver: to whom, which template, the Russian text."""

    recipient_user_id: uuid.UUID
    kind: NotificationKind
    template_key: str
    text: str


_NOUNS = {EventKind.SHOWING: "показ", EventKind.CONSULTATION: "консультация"}


class Meeting(NamedTuple):
    """The meeting a notification is about, as its text names it."""

    kind: EventKind | None
    start_at: datetime
    time_zone: str

    def describe(self) -> str:
        """«показ 01.12.2026 10:00 (Europe/Moscow)»: the kind and the local start time of the slot."""
        noun = _NOUNS[self.kind] if self.kind is not None else "встреча"
        try:
            local = self.start_at.astimezone(ZoneInfo(self.time_zone))
            zone = self.time_zone
        except (ZoneInfoNotFoundError, ValueError):
            local, zone = self.start_at, "UTC"
        return f"{noun} {local:%d.%m.%Y %H:%M} ({zone})"


def cancellation_notices(
    reason: AppointmentCancelReason | None,
    *,
    rescheduled: bool,
    agent: uuid.UUID,
    investor: uuid.UUID,
    meeting: Meeting,
) -> list[Notice]:
    """The AppointmentCancelled notifications of one terminal appointment (seed 003's recipient table)."""
    if rescheduled:
        return []  # a reschedule is not a cancellation: appointment-created of the new one tells them
    what = meeting.describe()
    kind = NotificationKind.APPOINTMENT_CANCELLED
    if reason is AppointmentCancelReason.DECLINED_BY_AGENT:
        return [Notice(investor, kind, "appointment-cancelled.declined-by-agent.investor",
                       f"Агент отклонил запись: {what}. Выберите другой слот.")]  # fmt: skip
    if reason is AppointmentCancelReason.CANCELLED_BY_AGENT:
        return [Notice(investor, kind, "appointment-cancelled.cancelled-by-agent.investor",
                       f"Агент отменил запись: {what}.")]  # fmt: skip
    if reason is AppointmentCancelReason.CANCELLED_BY_INVESTOR:
        return [Notice(agent, kind, "appointment-cancelled.cancelled-by-investor.agent",
                       f"Инвестор отменил запись: {what}.")]  # fmt: skip
    if reason is AppointmentCancelReason.EXPIRED:
        return [
            Notice(investor, kind, "appointment-cancelled.expired.investor",
                   f"Агент не подтвердил запись, выберите другой слот ({what})."),
            Notice(agent, kind, "appointment-cancelled.expired.agent",
                   f"Запись просрочена: {what} — решение не принято вовремя."),
        ]  # fmt: skip
    return [
        Notice(investor, kind, "appointment-cancelled.neutral.investor", f"Запись отменена: {what}."),
        Notice(agent, kind, "appointment-cancelled.neutral.agent", f"Запись отменена: {what}."),
    ]


def confirmation_notice(*, investor: uuid.UUID, meeting: Meeting) -> Notice:
    """The investor hears that the agent confirmed."""
    return Notice(investor, NotificationKind.APPOINTMENT_CONFIRMED, "appointment-confirmed.investor",
                  f"Агент подтвердил запись: {meeting.describe()}.")  # fmt: skip


def creation_notices(
    *, agent: uuid.UUID, investor: uuid.UUID, meeting: Meeting, pending: bool, rescheduled: bool
) -> list[Notice]:
    """The agent hears of a new booking; the new appointment of a reschedule tells both participants (seed 003)."""
    what = meeting.describe()
    kind = NotificationKind.APPOINTMENT_CREATED
    if rescheduled:
        # the old appointment's cancel notice is suppressed: this is how both sides learn the new time
        return [
            Notice(agent, kind, "appointment-created.rescheduled.agent", f"Инвестор перенёс запись: {what}."),
            Notice(investor, kind, "appointment-created.rescheduled.investor", f"Запись перенесена: {what}."),
        ]
    if pending:
        return [Notice(agent, kind, "appointment-created.pending.agent", f"Новая запись ждёт подтверждения: {what}.")]
    return [Notice(agent, kind, "appointment-created.confirmed.agent", f"Новая запись: {what}.")]


def purchase_notices(status: PurchaseStatus | None, *, buyer: uuid.UUID | None, package_code: str) -> list[Notice]:
    """Seed 002: the buyer (the company's manager) hears «срок истёк» when a purchase expires; nothing else."""
    if status is not PurchaseStatus.EXPIRED or buyer is None:
        return []
    return [Notice(buyer, NotificationKind.PROMOTION_EXPIRED, "promotion-expired.buyer",
                   f"Продвижение по пакету {package_code}: срок истёк.")]  # fmt: skip
