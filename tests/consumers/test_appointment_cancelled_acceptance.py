"""Seed 003, «Acceptance-критерии»: crm and notifications consuming appointment-cancelled from a real broker.

Both groups run as real consumers (threads of this process) on one broker and database for the module; each
test uses fresh ids. Orderings are forced through Kafka's per-key order: a second message on the same key
is handled after the first, so once its effect is visible the first one has been handled too.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator

import pytest
from psycopg_pool import ConnectionPool

from pin.api.auth import mint_token
from pin.bootstrap import build_app
from pin.crm.queries import lead_feed
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer import ConsumerConfig
from pin.messaging.consumer.dead_letters.command import DeadLetter, read_dead_letters
from pin.settings import Settings
from tests.conftest import JWT_SECRET
from tests.consumers.support import (
    Producing,
    cancelled,
    confirmed,
    created,
    feed_entries,
    in_inbox,
    metric,
    notifications_about,
    purchase,
    running_groups,
    wait_for,
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def producer(module_settings: Settings, module_pool: ConnectionPool[Conn]) -> Iterator[Producing]:
    """crm and notifications consumers running for the whole module; yields a producer to their topics."""
    with running_groups(["crm", "notifications"], module_settings, module_pool):
        producer = Producing(module_settings.kafka.require_bootstrap_servers())
        yield producer
        producer.close()


@pytest.fixture
def people() -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A fresh tenant, agent and investor."""
    return uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def _handled_by_both(pool: ConnectionPool[Conn], message_id: object) -> bool:
    return in_inbox(pool, "crm", message_id) and in_inbox(pool, "notifications", message_id)


def test_decline_by_agent_notifies_the_investor_only(producer, module_pool, people):
    tenant, agent, investor = people
    event = cancelled(tenant=tenant, agent=agent, investor=investor, reason="DeclinedByAgent")
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle the decline")
    sent = notifications_about(module_pool, event["AppointmentId"])
    assert [(n["recipient_user_id"], n["kind"]) for n in sent] == [(investor, "AppointmentCancelled")]
    assert "Агент отклонил запись" in sent[0]["text"]
    assert "01.12.2026 10:00 (Europe/Moscow)" in sent[0]["text"]  # StartAt in the slot's time zone
    [entry] = feed_entries(module_pool, event["AppointmentId"])
    assert (entry["entry_kind"], entry["text"]) == ("DeclinedByAgent", "запись отклонена агентом")
    assert entry["investor_user_id"] == investor


def test_cancel_by_investor_notifies_the_agent(producer, module_pool, people):
    tenant, agent, investor = people
    event = cancelled(
        tenant=tenant, agent=agent, investor=investor, reason="CancelledByInvestor", cancelled_by="Investor"
    )
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle the cancel")
    sent = notifications_about(module_pool, event["AppointmentId"])
    assert [(n["recipient_user_id"], n["template_key"]) for n in sent] == [
        (agent, "appointment-cancelled.cancelled-by-investor.agent")
    ]
    assert [e["text"] for e in feed_entries(module_pool, event["AppointmentId"])] == ["запись отменена инвестором"]


def test_cancel_by_agent_notifies_the_investor(producer, module_pool, people):
    tenant, agent, investor = people
    event = cancelled(tenant=tenant, agent=agent, investor=investor, reason="CancelledByAgent", cancelled_by="Agent")
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle the cancel")
    assert [n["recipient_user_id"] for n in notifications_about(module_pool, event["AppointmentId"])] == [investor]
    assert [e["text"] for e in feed_entries(module_pool, event["AppointmentId"])] == ["запись отменена агентом"]


def test_expiry_notifies_both_sides_with_their_texts(producer, module_pool, people):
    tenant, agent, investor = people
    event = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired")
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle the expiry")
    sent = {n["recipient_user_id"]: n["text"] for n in notifications_about(module_pool, event["AppointmentId"])}
    assert set(sent) == {agent, investor}
    assert "агент не подтвердил запись, выберите другой слот" in sent[investor].lower()
    assert "запись просрочена" in sent[agent].lower()
    [entry] = feed_entries(module_pool, event["AppointmentId"])
    assert (entry["entry_kind"], entry["text"]) == ("Expired", "запись просрочена без решения агента")


@pytest.mark.parametrize("created_first", [False, True], ids=["cancelled-first", "created-first"])
def test_reschedule_sends_no_cancel_notification_and_links_the_new_appointment(
    producer, module_pool, people, created_first
):
    tenant, agent, investor = people
    old, new = uuid.uuid4(), uuid.uuid4()
    cancel = cancelled(
        tenant=tenant, agent=agent, investor=investor, appointment=old, reason="CancelledByInvestor",
        cancelled_by="Investor", rescheduled_to=new,
    )  # fmt: skip
    booking = created(tenant=tenant, agent=agent, investor=investor, appointment=new, rescheduled_from=old)
    first, second = ((topics.APPOINTMENT_CREATED, booking), (topics.APPOINTMENT_CANCELLED, cancel))
    if not created_first:
        first, second = second, first
    producer.send(*first)
    # the cross-topic order is not guaranteed: make sure the first one was really handled first
    wait_for(lambda: _handled_by_both(module_pool, first[1]["MessageId"]), what="the first half")
    producer.send(*second)

    wait_for(lambda: _handled_by_both(module_pool, second[1]["MessageId"]), what="the second half")
    assert notifications_about(module_pool, old) == []  # no AppointmentCancelled for a reschedule
    [entry] = feed_entries(module_pool, old)
    assert entry["entry_kind"] == "Rescheduled"
    assert entry["rescheduled_to_appointment_id"] == new
    assert entry["reason"] == "CancelledByInvestor"  # filled by the cancellation whatever the order
    assert entry["rescheduled_start_at"] is not None  # filled by the creation whatever the order
    assert feed_entries(module_pool, new) == []
    # the new appointment's booking is what tells both participants, each with their own template (seed 003:
    # «участников уведомит appointment-created новой записи»)
    told = {n["template_key"]: n["recipient_user_id"] for n in notifications_about(module_pool, new)}
    assert told == {
        "appointment-created.rescheduled.agent": agent,
        "appointment-created.rescheduled.investor": investor,
    }


def test_duplicate_delivery_adds_no_second_entry_or_notification(producer, module_pool, people):
    tenant, agent, investor = people
    event = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired")
    duplicates_before = metric(
        "pin_consumer_duplicates_total", group="notifications", topic=topics.APPOINTMENT_CANCELLED
    )
    producer.send(topics.APPOINTMENT_CANCELLED, event)
    producer.send(topics.APPOINTMENT_CANCELLED, event)  # the same message again (same MessageId)
    # a different message about the same terminal appointment (e.g. a producer retry with a new id)
    again = {**event, "MessageId": str(uuid.uuid4())}
    producer.send(topics.APPOINTMENT_CANCELLED, again)

    wait_for(lambda: _handled_by_both(module_pool, again["MessageId"]), what="the last of the three")
    assert len(feed_entries(module_pool, event["AppointmentId"])) == 1
    assert len(notifications_about(module_pool, event["AppointmentId"])) == 2  # agent and investor, once each
    assert (
        metric("pin_consumer_duplicates_total", group="notifications", topic=topics.APPOINTMENT_CANCELLED)
        == duplicates_before + 1
    )


def test_unknown_reason_takes_the_neutral_path_and_never_the_dlq(producer, module_pool, module_settings, people):
    tenant, agent, investor = people
    unknown_before = metric("pin_consumer_unknown_values_total", group="crm", field="Reason")
    actor_before = metric("pin_consumer_unknown_values_total", group="notifications", field="CancelledBy")
    event = cancelled(
        tenant=tenant, agent=agent, investor=investor, reason="CancelledByPlatform", cancelled_by="Moderator",
        SomeFutureField={"nested": True},
    )  # fmt: skip
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle it")
    [entry] = feed_entries(module_pool, event["AppointmentId"])
    assert (entry["entry_kind"], entry["text"], entry["reason"]) == (
        "Cancelled", "запись отменена", "CancelledByPlatform"
    )  # fmt: skip
    sent = {n["recipient_user_id"]: n["text"] for n in notifications_about(module_pool, event["AppointmentId"])}
    assert set(sent) == {agent, investor}
    assert all(text.startswith("Запись отменена") for text in sent.values())
    assert metric("pin_consumer_unknown_values_total", group="crm", field="Reason") == unknown_before + 1
    assert metric("pin_consumer_unknown_values_total", group="notifications", field="CancelledBy") == actor_before + 1
    assert _dead_letters(module_settings, "crm", event["MessageId"], expect=False) == []


def test_unknown_kind_and_cancelled_by_are_kept_raw_and_take_the_neutral_path(
    producer, module_pool, module_settings, people
):
    """Seed 003: an unknown Kind or CancelledBy is «сохранить строку как есть», a warning, never the DLQ."""
    tenant, agent, investor = people
    before = {
        (group, field): metric("pin_consumer_unknown_values_total", group=group, field=field)
        for group in ("crm", "notifications")
        for field in ("Kind", "CancelledBy")
    }
    event = cancelled(
        tenant=tenant, agent=agent, investor=investor, reason="CancelledByAgent", cancelled_by="Moderator",
        Kind="Webinar",
    )  # fmt: skip
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle it")
    [entry] = feed_entries(module_pool, event["AppointmentId"])
    assert (entry["entry_kind"], entry["appointment_kind"], entry["cancelled_by"]) == (
        "CancelledByAgent", "Webinar", "Moderator"
    )  # fmt: skip
    with module_pool.connection() as conn:
        [shown] = lead_feed(conn, tenant_id=tenant, investor_user_id=investor, limit=10)
    assert (shown["appointmentKind"], shown["cancelledBy"]) == ("Webinar", "Moderator")
    # recipients follow Reason, not CancelledBy; an unknown Kind reads as «встреча»
    [sent] = notifications_about(module_pool, event["AppointmentId"])
    assert (sent["recipient_user_id"], sent["template_key"]) == (
        investor, "appointment-cancelled.cancelled-by-agent.investor"
    )  # fmt: skip
    assert sent["text"].startswith("Агент отменил запись: встреча 01.12.2026 10:00")
    for (group, field), value in before.items():
        assert metric("pin_consumer_unknown_values_total", group=group, field=field) == value + 1, (group, field)
    for group in ("crm", "notifications"):
        assert _dead_letters(module_settings, group, event["MessageId"], expect=False) == []


def test_unknown_contract_version_is_processed(producer, module_pool, people):
    tenant, agent, investor = people
    event = {**cancelled(tenant=tenant, agent=agent, investor=investor, reason="DeclinedByAgent"), "ContractVersion": 7}
    producer.send(topics.APPOINTMENT_CANCELLED, event)

    wait_for(lambda: _handled_by_both(module_pool, event["MessageId"]), what="both groups to handle it")
    assert [e["entry_kind"] for e in feed_entries(module_pool, event["AppointmentId"])] == ["DeclinedByAgent"]


@pytest.mark.parametrize(
    "breakage",
    ["missing-required-field", "wrong-type", "not-json"],
)
def test_incompatible_payload_goes_to_the_dlq_and_later_messages_are_processed(
    producer, module_pool, module_settings, people, breakage
):
    tenant, agent, investor = people
    appointment = uuid.uuid4()
    bad = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired", appointment=appointment)
    bad_id = bad["MessageId"]
    if breakage == "missing-required-field":
        del bad["InvestorUserId"]
        value: dict[str, object] | bytes = bad
    elif breakage == "wrong-type":
        bad["Reason"] = {"Code": "Expired"}  # an object where the contract has a string
        value = bad
    else:
        value = b"\x00not json{"
    dead_before = metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED)
    producer.send(topics.APPOINTMENT_CANCELLED, value, key=str(appointment), headers={"message-id": bad_id})
    # a later message on the same key, so on the same partition, behind the bad one
    good = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired", appointment=appointment)
    producer.send(topics.APPOINTMENT_CANCELLED, good)

    wait_for(lambda: _handled_by_both(module_pool, good["MessageId"]), what="the message behind the bad one")
    assert len(feed_entries(module_pool, appointment)) == 1
    assert not in_inbox(module_pool, "crm", bad_id)
    for group in ("crm", "notifications"):
        [letter] = _dead_letters(module_settings, group, bad_id)
        origin = letter.provenance
        assert origin["dlt-original-topic"] == topics.APPOINTMENT_CANCELLED
        assert origin["dlt-consumer-group"] == group
        # tried again a few times ("повторно не смог его обработать", seed 003), never applied, then dead-lettered
        assert origin["dlt-attempts"] == str(ConsumerConfig().unreadable_attempts)
        assert origin["dlt-exception-type"] == "UnreadableMessageError"
        assert int(origin["dlt-original-offset"]) >= 0
        assert int(origin["dlt-original-partition"]) in range(topics.PARTITIONS)
        assert origin["dlt-failed-at"].endswith("Z")
        assert letter.record.key == str(appointment).encode()
        assert letter.record.value == (value if isinstance(value, bytes) else json.dumps(value).encode())
        assert ("message-id", bad_id.encode()) in letter.original_headers
    assert metric("pin_consumer_dead_lettered_total", group="crm", topic=topics.APPOINTMENT_CANCELLED) == (
        dead_before + 1
    )


def test_stale_confirmation_after_the_terminal_event_is_a_no_op(producer, module_pool, people):
    tenant, agent, investor = people
    appointment = uuid.uuid4()
    cancel = cancelled(
        tenant=tenant, agent=agent, investor=investor, reason="CancelledByAgent", appointment=appointment
    )
    producer.send(topics.APPOINTMENT_CANCELLED, cancel)
    wait_for(lambda: in_inbox(module_pool, "notifications", cancel["MessageId"]), what="the cancellation")
    stale = confirmed(tenant=tenant, agent=agent, investor=investor, appointment=appointment)
    producer.send(topics.APPOINTMENT_CONFIRMED, stale)

    wait_for(lambda: in_inbox(module_pool, "notifications", stale["MessageId"]), what="the stale confirmation")
    assert [n["kind"] for n in notifications_about(module_pool, appointment)] == ["AppointmentCancelled"]


def test_confirmation_of_a_live_appointment_tells_the_investor(producer, module_pool, people):
    tenant, agent, investor = people
    event = confirmed(tenant=tenant, agent=agent, investor=investor, appointment=uuid.uuid4())
    producer.send(topics.APPOINTMENT_CONFIRMED, event)

    wait_for(lambda: in_inbox(module_pool, "notifications", event["MessageId"]), what="the confirmation")
    sent = notifications_about(module_pool, event["AppointmentId"])
    assert [(n["recipient_user_id"], n["kind"]) for n in sent] == [(investor, "AppointmentConfirmed")]


def test_expired_purchase_tells_the_buyer_its_term_is_over(producer, module_pool, people):
    tenant, buyer, _ = people
    purchase_id = uuid.uuid4()
    active = purchase(tenant=tenant, purchase_id=purchase_id, targets=[], status="Active", version=1, buyer=buyer)
    expired = purchase(tenant=tenant, purchase_id=purchase_id, targets=[], status="Expired", version=2, buyer=buyer)
    producer.send(topics.PURCHASE_CHANGED, active)
    producer.send(topics.PURCHASE_CHANGED, expired)

    wait_for(lambda: in_inbox(module_pool, "notifications", expired["MessageId"]), what="the expiry")
    sent = notifications_about(module_pool, purchase_id)
    assert [(n["recipient_user_id"], n["kind"]) for n in sent] == [(buyer, "PromotionExpired")]
    assert "срок истёк" in sent[0]["text"]


def _dead_letters(settings: Settings, group: str, message_id: str, *, expect: bool = True) -> list[DeadLetter]:
    def probe() -> list[DeadLetter]:
        letters = read_dead_letters(settings, [group], idle_seconds=0.5)
        return [letter for letter in letters if letter.message_id == message_id]

    if not expect:
        return probe()
    return wait_for(probe, timeout=15, what=f"the dead letter in {group}'s DLQ")


def _client(settings: Settings, pool: ConnectionPool[Conn]) -> TestClient:
    return TestClient(build_app(settings, pool), raise_server_exceptions=False)


def _auth(user: uuid.UUID, tenant: uuid.UUID, *roles: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(JWT_SECRET, user_id=user, tenant_id=tenant, roles=list(roles))}"}


def test_lead_feed_api_shows_the_tenants_entries_to_agents_and_managers(producer, module_pool, module_settings, people):
    tenant, agent, investor = people
    decline = cancelled(tenant=tenant, agent=agent, investor=investor, reason="DeclinedByAgent")
    expiry = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired")
    for event in (decline, expiry):
        producer.send(topics.APPOINTMENT_CANCELLED, event)
    for event in (decline, expiry):
        wait_for(lambda e=event: in_inbox(module_pool, "crm", e["MessageId"]), what="the feed entries")

    with _client(module_settings, module_pool) as client:
        path = f"/crm/leads/{investor}/feed"
        for role in ("agent", "manager"):
            response = client.get(path, headers=_auth(uuid.uuid4(), tenant, role))
            assert response.status_code == 200, response.text
            entries = response.json()["entries"]
            assert {(e["appointmentId"], e["entryKind"], e["text"]) for e in entries} == {
                (decline["AppointmentId"], "DeclinedByAgent", "запись отклонена агентом"),
                (expiry["AppointmentId"], "Expired", "запись просрочена без решения агента"),
            }
            assert all(e["startAt"] == "2026-12-01T07:00:00Z" for e in entries)
        # another tenant's agent sees nothing of this lead; an investor may not read feeds
        assert client.get(path, headers=_auth(uuid.uuid4(), uuid.uuid4(), "agent")).json()["entries"] == []
        assert client.get(path, headers=_auth(investor, tenant, "investor")).status_code == 403
        assert client.get(path).status_code == 401
        bad = client.get("/crm/leads/not-a-uuid/feed", headers=_auth(agent, tenant, "agent"))
        assert (bad.status_code, bad.headers["content-type"]) == (422, "application/problem+json")


def test_notifications_api_shows_the_callers_own(producer, module_pool, module_settings, people):
    tenant, agent, investor = people
    event = cancelled(tenant=tenant, agent=agent, investor=investor, reason="Expired")
    producer.send(topics.APPOINTMENT_CANCELLED, event)
    wait_for(lambda: in_inbox(module_pool, "notifications", event["MessageId"]), what="the notifications")

    with _client(module_settings, module_pool) as client:
        mine = client.get("/notifications", headers=_auth(investor, tenant, "investor"))
        assert mine.status_code == 200
        [item] = mine.json()["items"]
        assert (item["kind"], item["templateKey"]) == ("AppointmentCancelled", "appointment-cancelled.expired.investor")
        assert item["subjectId"] == event["AppointmentId"]
        [agents] = client.get("/notifications", headers=_auth(agent, tenant, "agent")).json()["items"]
        assert agents["templateKey"] == "appointment-cancelled.expired.agent"
        # the same user id under another tenant's token sees none of them
        assert client.get("/notifications", headers=_auth(investor, uuid.uuid4(), "investor")).json()["items"] == []
        assert client.get("/notifications").status_code == 401


def test_consumer_lag_is_exported_per_assigned_partition(producer):
    """Informational only: the embedded broker's high watermark is wrong, so only the series are checked."""
    from prometheus_client import REGISTRY

    def lag_series() -> set[tuple[str, str, str]]:
        return {
            (sample.labels["group"], sample.labels["topic"], sample.labels["partition"])
            for metric_family in REGISTRY.collect()
            if metric_family.name == "pin_consumer_lag"
            for sample in metric_family.samples
        }

    expected = {("crm", topics.APPOINTMENT_CANCELLED, str(p)) for p in range(topics.PARTITIONS)}
    wait_for(lambda: expected <= lag_series(), what="lag gauges of crm's partitions")
