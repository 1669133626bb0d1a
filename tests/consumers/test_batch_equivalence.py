"""A batch applies exactly what the one-message path applies: duplicates, repeats and Versions out of order included.

The batch's effects go to PostgreSQL in one pipeline, the boost's Version guard riding on each statement instead of
on an answer read in between; the final tables must be those of one message per transaction, in the same order.
The runtime is driven on a real PostgreSQL; the broker plays no part in what is compared, so none is started.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from structlog.testing import capture_logs

from pin.consumer_groups import build_runtime
from pin.messaging import topics
from pin.messaging.consumer.received import Received
from tests.consumers.support import EVENT_TYPES, cancelled, confirmed, created, key_of, purchase, rows
from tests.consumers.test_batch_equivalence_random import _handler_logs

pytestmark = pytest.mark.integration

TOPIC = topics.PURCHASE_CHANGED

# each group's tables the batch writes, in a stable order and without the clock's columns
SNAPSHOTS = {
    "catalog": [
        "SELECT purchase_id, tenant_id, status, version FROM catalog.purchase ORDER BY purchase_id",
        "SELECT purchase_id, target_kind, target_id, tenant_id, boost_weight, active, purchase_version"
        " FROM catalog.boost_contribution ORDER BY purchase_id, target_kind, target_id",
    ],
    "news": [
        "SELECT purchase_id, tenant_id, status, version FROM news.purchase ORDER BY purchase_id",
        "SELECT purchase_id, post_id, tenant_id, boost_weight, active, purchase_version"
        " FROM news.boost_contribution ORDER BY purchase_id, post_id",
    ],
}
NOTIFIED = (
    "SELECT tenant_id, recipient_user_id, kind, template_key, text, subject_id, message_id"
    " FROM notifications.notification ORDER BY subject_id, template_key"
)
FEED = (
    "SELECT appointment_id, tenant_id, investor_user_id, agent_user_id, entry_kind, reason, cancelled_by, text,"
    " appointment_kind, start_at, time_zone, rescheduled_to_appointment_id, rescheduled_start_at, message_id,"
    " occurred_at FROM crm.lead_feed_entry ORDER BY appointment_id"
)
INBOX = 'SELECT message_id, "offset" FROM messaging.inbox WHERE consumer_group = %s ORDER BY message_id'


def _received(values: list[dict[str, Any]], topic: str = TOPIC) -> list[Received]:
    """The messages as one partition delivers them, in this order."""
    return [
        Received(
            topic=topic,
            partition=0,
            offset=offset,
            key=key_of(topic, value).encode(),
            value=json.dumps(value).encode(),
            headers=[("message-id", value["MessageId"].encode()), ("event-type", EVENT_TYPES[topic].encode())],
            timestamp_ms=0,
        )
        for offset, value in enumerate(values)
    ]


def _messages() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, uuid.UUID]]:
    """One message handled before, then a batch with duplicates and an out-of-order pair of Versions per purchase."""
    tenant, p, q = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    project_x, project_y, object_z, post_a, post_b = (uuid.uuid4() for _ in range(5))
    earlier = purchase(tenant=tenant, purchase_id=p, version=1,
                       targets=[("Project", project_x), ("Project", project_y), ("Post", post_a)])  # fmt: skip
    p_v3 = purchase(tenant=tenant, purchase_id=p, version=3, weight=20, targets=[("Project", project_x)])
    p_v2 = purchase(tenant=tenant, purchase_id=p, version=2, weight=30,
                    targets=[("Project", project_y), ("PropertyObject", object_z), ("Post", post_b)])  # fmt: skip
    q_v2 = purchase(tenant=tenant, purchase_id=q, version=2, status="Expired",
                    targets=[("Project", project_x), ("Post", post_a)])  # fmt: skip
    q_v1 = purchase(tenant=tenant, purchase_id=q, version=1,
                    targets=[("Project", project_y), ("Post", post_b), ("Post", post_a)])  # fmt: skip
    q_v2_again = purchase(tenant=tenant, purchase_id=q, version=2, targets=[("Post", post_b)])
    batch = [earlier, p_v3, p_v3, p_v2, q_v2, q_v1, q_v2_again, q_v1]
    ids = {"p": p, "q": q, "x": project_x, "y": project_y, "a": post_a, "b": post_b}
    return earlier, batch, ids


def _expected(group: str, ids: dict[str, uuid.UUID]) -> set[tuple[Any, ...]]:
    """(purchase, target, weight, active, version) of each contribution, worked out by hand message by message.

    p: v1 names x, y (and post a); v3 names only x (weight 20), so y and a stop contributing at v3; v2 comes late
    and changes nothing. q: v2 (Expired) names x and a, inactive; v1 comes late; a second v2 (Active, only post b)
    applies (same Version) and adds b.
    """
    p, q, x, y, a, b = (ids[name] for name in "pqxyab")
    if group == "catalog":
        return {(p, x, 20, True, 3), (p, y, 10, False, 3), (q, x, 10, False, 2)}
    return {(p, a, 10, False, 3), (q, a, 10, False, 2), (q, b, 10, True, 2)}


@pytest.mark.parametrize("group", ["catalog", "news"])
def test_a_batch_with_duplicates_and_older_versions_ends_as_one_message_per_transaction(group, make_settings, pool):
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: no broker is needed here
    earlier, batch, ids = _messages()
    messages = _received(batch)
    endings = []
    for one_by_one in (False, True):
        with pool.connection() as conn:
            conn.execute(f"TRUNCATE {group}.purchase, {group}.boost_contribution, messaging.inbox")
        runtime = build_runtime(group, settings, pool)
        runtime._process(_received([earlier]), attempts=1)  # handled before: in the inbox already
        with capture_logs() as logs:
            if one_by_one:
                for message in messages:
                    runtime._process([message], attempts=1)
            else:
                runtime._process(messages, attempts=1)
        events = [entry["event"] for entry in logs]
        assert "batch failed; handling its messages one by one" not in events
        assert events.count("older purchase version ignored") == 2, events
        endings.append([rows(pool, sql) for sql in SNAPSHOTS[group]] + [rows(pool, INBOX, group)])
    in_batch, alone = endings
    assert in_batch == alone
    purchases, contributions, inbox = in_batch
    assert {(row["purchase_id"], row["version"], row["status"]) for row in purchases} == {
        (ids["p"], 3, "Active"),
        (ids["q"], 2, "Active"),
    }
    target = "target_id" if group == "catalog" else "post_id"
    assert {
        (row["purchase_id"], row[target], row["boost_weight"], row["active"], row["purchase_version"])
        for row in contributions
    } == _expected(group, ids)
    assert len(inbox) == 6  # the earlier message, then p v3, p v2, q v2, q v1 and q's second v2: once each


def test_notifications_repeated_within_a_batch_are_sent_once_and_logged_as_one_by_one(make_settings, pool):
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: no broker is needed here
    tenant, agent, investor = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()

    def expired(appointment: uuid.UUID) -> dict[str, Any]:
        return cancelled(tenant=tenant, agent=agent, investor=investor, appointment=appointment, reason="Expired")

    earlier, b_first = expired(a), expired(b)
    # a again (notified before), b twice under two MessageIds, c once, and b's first message delivered twice
    batch = [expired(a), b_first, expired(b), expired(c), b_first]
    late = confirmed(tenant=tenant, agent=agent, investor=investor, appointment=c)
    endings = []
    for one_by_one in (False, True):
        with pool.connection() as conn:
            conn.execute("TRUNCATE notifications.notification, notifications.appointment_state, messaging.inbox")
        runtime = build_runtime("notifications", settings, pool)
        runtime._process(_received([earlier], topics.APPOINTMENT_CANCELLED), attempts=1)
        messages = _received(batch, topics.APPOINTMENT_CANCELLED)
        with capture_logs() as logs:
            for part in [[m] for m in messages] if one_by_one else [messages]:
                runtime._process(part, attempts=1)
            runtime._process(_received([late, late], topics.APPOINTMENT_CONFIRMED), attempts=1)
        events = [entry["event"] for entry in logs]
        assert "batch failed; handling its messages one by one" not in events
        assert events.count("already notified") == 4, events  # a's two, and the two of b's second message
        assert events.count("stale appointment-confirmed after the terminal event ignored") == 1, events
        endings.append(rows(pool, NOTIFIED))
    assert endings[0] == endings[1]
    by_subject = {(row["subject_id"], row["message_id"]) for row in endings[0]}
    assert by_subject == {(a, uuid.UUID(earlier["MessageId"])), (b, uuid.UUID(b_first["MessageId"])),
                          (c, uuid.UUID(batch[3]["MessageId"]))}  # fmt: skip
    assert len(endings[0]) == 6


def test_crm_entries_of_appointments_repeated_within_a_batch_end_as_one_message_per_transaction(make_settings, pool):
    settings = make_settings(kafka_bootstrap_servers="127.0.0.1:9")  # never reached: no broker is needed here
    tenant, agent, investor = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    x, x2, y, y2, z, z2, w, v, v2, u, u2, u3 = (uuid.uuid4() for _ in range(12))

    def cancel(appointment: uuid.UUID, reason: str = "CancelledByInvestor", **extra: Any) -> dict[str, Any]:
        return cancelled(tenant=tenant, agent=agent, investor=investor, appointment=appointment, reason=reason,
                         **extra)  # fmt: skip

    def create(appointment: uuid.UUID, rescheduled_from: uuid.UUID | None = None) -> dict[str, Any]:
        return created(tenant=tenant, agent=agent, investor=investor, appointment=appointment,
                       rescheduled_from=rescheduled_from)  # fmt: skip

    x_created, y_cancelled, w_first = create(x2, x), cancel(y, rescheduled_to=y2), cancel(w, "Expired")
    cancellations = [
        cancel(x, rescheduled_to=x2),  # x's reschedule: its creation half came first
        cancel(z, "Misplaced", cancelled_by="Robot", rescheduled_to=z2, Kind="Tour"),  # three unknown values
        w_first,
        cancel(w, "CancelledByAgent"),  # w again under another MessageId: it has its entry
        cancel(v, rescheduled_to=v2),
        cancel(v, "Expired"),  # a terminal after the reschedule's cancellation of the same appointment
        cancel(y, "Expired"),  # y's entry was written before (its reschedule's cancellation half)
        w_first,  # a duplicate
    ]
    creations = [create(y2, y), create(z2, z), create(u2, u), create(u3, u), create(uuid.uuid4()), create(x2, x)]
    endings = []
    for one_by_one in (False, True):
        with pool.connection() as conn:
            conn.execute("TRUNCATE crm.lead_feed_entry, messaging.inbox")
        runtime = build_runtime("crm", settings, pool)
        runtime._process(_received([x_created], topics.APPOINTMENT_CREATED), attempts=1)
        runtime._process(_received([y_cancelled], topics.APPOINTMENT_CANCELLED), attempts=1)
        batches = [(topics.APPOINTMENT_CANCELLED, cancellations), (topics.APPOINTMENT_CREATED, creations)]
        with capture_logs() as logs:
            for topic, values in batches:
                messages = _received(values, topic)
                for part in [[m] for m in messages] if one_by_one else [messages]:
                    runtime._process(part, attempts=1)
        events = [entry["event"] for entry in logs]
        assert "batch failed; handling its messages one by one" not in events
        assert events.count("appointment already has its feed entry") == 3, events  # w's second, v's and y's terminal
        assert events.count("unknown enum value; neutral path taken") == 3, events
        endings.append((rows(pool, FEED), rows(pool, INBOX, "crm"), _handler_logs(logs)))
    assert endings[0] == endings[1]
    feed = {row["appointment_id"]: row for row in endings[0][0]}
    assert set(feed) == {x, y, z, w, v, u}
    assert {a: (feed[a]["entry_kind"], feed[a]["reason"], feed[a]["rescheduled_to_appointment_id"],
                feed[a]["rescheduled_start_at"] is not None) for a in feed} == {
        x: ("Rescheduled", "CancelledByInvestor", x2, True),
        y: ("Rescheduled", "CancelledByInvestor", y2, True),
        z: ("Rescheduled", "Misplaced", z2, True),
        w: ("Expired", "Expired", None, False),
        v: ("Rescheduled", "CancelledByInvestor", v2, False),
        u: ("Rescheduled", None, u2, True),
    }  # fmt: skip
    assert (feed[z]["cancelled_by"], feed[z]["appointment_kind"]) == ("Robot", "Tour")
    assert feed[w]["message_id"] == uuid.UUID(w_first["MessageId"])
