"""What a consumer must make visible while it goes on (SPEC section 7), on a real broker and PostgreSQL.

- a ContractVersion it does not know: a warning per message, and the message is processed (batch and single);
- an expired purchase whose message has no BuyerUserId (the contract as first published lacks it): nobody can be
  told «срок истёк»; a warning with the purchase id and a counter say so, instead of nothing at all.

Each test runs its consumer inside ``capture_logs`` (the runtime binds its loggers when it is built).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from structlog.testing import capture_logs

from pin.messaging import topics
from tests.consumers.support import (
    Producing,
    cancelled,
    in_inbox,
    metric,
    notifications_about,
    purchase,
    running,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def producer(module_settings) -> Any:
    """A producer to the module's broker."""
    producing = Producing(module_settings.kafka.require_bootstrap_servers())
    yield producing
    producing.close()


def test_an_unknown_contract_version_is_a_warning_and_the_message_is_processed(producer, module_settings, module_pool):
    people = {"tenant": uuid.uuid4(), "agent": uuid.uuid4(), "investor": uuid.uuid4()}
    batch = [{**cancelled(**people, reason="Expired"), "ContractVersion": 7} for _ in range(2)]
    for event in batch:  # there before the consumer starts: its first poll takes them together
        producer.send(topics.APPOINTMENT_CANCELLED, event, partition=0)
    with capture_logs() as logs, running("crm", module_settings, module_pool):
        for event in batch:
            wait_for(lambda e=event: in_inbox(module_pool, "crm", e["MessageId"]), what="the batch processed")
        alone = {**cancelled(**people, reason="Expired"), "ContractVersion": "2"}
        producer.send(topics.APPOINTMENT_CANCELLED, alone, partition=1)
        wait_for(lambda: in_inbox(module_pool, "crm", alone["MessageId"]), what="the lone message processed")

    warned = {
        (entry["message_id"], entry["contract_version"])
        for entry in logs
        if entry["event"] == "unknown contract version" and entry["log_level"] == "warning"
    }
    assert warned == {(batch[0]["MessageId"], 7), (batch[1]["MessageId"], 7), (alone["MessageId"], 2)}


def test_an_expired_purchase_without_buyer_is_warned_and_counted(producer, module_settings, module_pool):
    without = purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[], status="Expired", version=2)
    del without["BuyerUserId"]
    buyer = uuid.uuid4()
    told = purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[], status="Expired", buyer=buyer)
    active = purchase(tenant=uuid.uuid4(), purchase_id=uuid.uuid4(), targets=[], status="Active")
    del active["BuyerUserId"]  # nothing to tell yet: not counted
    before = metric("pin_notifications_expired_purchase_without_buyer_total")
    with capture_logs() as logs, running("notifications", module_settings, module_pool):
        for event in (without, told, active):
            producer.send(topics.PURCHASE_CHANGED, event)
        for event in (without, told, active):
            wait_for(lambda e=event: in_inbox(module_pool, "notifications", e["MessageId"]), what="the purchases")

    assert notifications_about(module_pool, without["PurchaseId"]) == []
    assert [n["recipient_user_id"] for n in notifications_about(module_pool, told["PurchaseId"])] == [buyer]
    assert metric("pin_notifications_expired_purchase_without_buyer_total") == before + 1
    [warning] = [entry for entry in logs if entry["event"] == "expired purchase without BuyerUserId; nobody notified"]
    assert (warning["log_level"], warning["purchase_id"]) == ("warning", without["PurchaseId"])
    assert warning["message_id"] == without["MessageId"]
