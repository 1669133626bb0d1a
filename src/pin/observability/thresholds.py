"""Where the console and `pin status` paint a value red: the thresholds of the alert rules
(deploy/prometheus/*.rules.yml), written once here. tests/console/test_thresholds.py reads the rule files and checks
that each rule compares its metric with the same number, so the console, `pin status` and the pager never disagree
about what is wrong."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    """One alert rule's comparison: ``metric`` above (or, ``below``, under) ``value`` is crossed."""

    alert: str
    metric: str
    value: float
    below: bool = False

    def crossed(self, observed: float | None) -> bool:
        """Whether ``observed`` crosses it (an unknown value crosses nothing)."""
        if observed is None:
            return False
        return observed < self.value if self.below else observed > self.value


# name -> the rule whose threshold the console uses for it
THRESHOLDS: dict[str, Threshold] = {
    "appointment-timeout.backlog": Threshold(
        "AppointmentTimeoutBacklogHigh", "calendar_appointment_timeout_backlog", 100
    ),
    "appointment-timeout.poison": Threshold(
        "AppointmentTimeoutPoisonItems", "calendar_appointment_timeout_poison_items", 0
    ),
    "expire-promotions.backlog": Threshold("PromotionExpireBacklogHigh", "promotion_expire_backlog", 100),
    "expire-promotions.poison": Threshold("PromotionExpirePoisonItems", "promotion_expire_poison_items", 0),
    "outbox.lag": Threshold("OutboxLagHigh", "pin_outbox_lag_seconds", 60),
    "outbox.backlog": Threshold("OutboxBacklogHigh", "pin_outbox_backlog", 1000),
    "outbox.dead-letters": Threshold("OutboxDeadLetters", "pin_outbox_dead_letters", 0),
    "outbox.owned-vparts": Threshold("OutboxVirtualPartitionsUnowned", "pin_outbox_owned_vparts", 64, below=True),
    "consumer.lag": Threshold("ConsumerLagHigh", "pin_consumer_lag", 1000),
    # a transaction holding the xmin horizon: its age since it began (a slot's or a standby's xmin carries no time
    # in one read: XminHorizonHeld judges those from the gauge's history, so the console does not paint them)
    "database.transaction-age": Threshold("LongRunningTransaction", "pin_db_oldest_transaction_age_seconds", 300),
}


def crossed(name: str, observed: float | None) -> bool:
    """Whether ``observed`` crosses the threshold ``name`` (a template's test: ``value is crossed("outbox.lag")``)."""
    return THRESHOLDS[name].crossed(observed)
