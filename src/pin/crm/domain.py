"""The lead feed's rules (seed 003, «Потребители», crm): which entry a terminal appointment gets. No IO."""

from __future__ import annotations

from enum import StrEnum

from pin.messaging.appointment_events import AppointmentCancelReason


class FeedEntryKind(StrEnum):
    """The kinds of lead feed entry."""

    DECLINED_BY_AGENT = "DeclinedByAgent"
    CANCELLED_BY_INVESTOR = "CancelledByInvestor"
    CANCELLED_BY_AGENT = "CancelledByAgent"
    EXPIRED = "Expired"
    CANCELLED = "Cancelled"  # the neutral entry of a Reason crm does not know
    RESCHEDULED = "Rescheduled"


FEED_TEXTS: dict[FeedEntryKind, str] = {
    FeedEntryKind.DECLINED_BY_AGENT: "запись отклонена агентом",
    FeedEntryKind.CANCELLED_BY_INVESTOR: "запись отменена инвестором",
    FeedEntryKind.CANCELLED_BY_AGENT: "запись отменена агентом",
    FeedEntryKind.EXPIRED: "запись просрочена без решения агента",
    FeedEntryKind.CANCELLED: "запись отменена",
    FeedEntryKind.RESCHEDULED: "запись перенесена инвестором",
}


def entry_kind_for(reason: AppointmentCancelReason | None, *, rescheduled: bool) -> FeedEntryKind:
    """The entry of a terminal appointment: a reschedule is not a break (INV-APT-5); unknown Reason is neutral."""
    if rescheduled:
        return FeedEntryKind.RESCHEDULED
    if reason is None:
        return FeedEntryKind.CANCELLED
    return FeedEntryKind(reason.value)
