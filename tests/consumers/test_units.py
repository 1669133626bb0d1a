"""Pure units of the consumers: envelope decoding, failure classification, backoff, and the domain tables."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from confluent_kafka import TopicPartition
from psycopg_pool import PoolTimeout

from pin.crm.domain import FEED_TEXTS, FeedEntryKind, entry_kind_for
from pin.crm.handler import routes as crm_routes
from pin.faults import fault_of
from pin.messaging import topics
from pin.messaging.appointment_events import AppointmentCancelReason as R
from pin.messaging.consumer import ConsumerConfig, ConsumerRuntime
from pin.messaging.consumer.dead_letters.store import cut_letter, record_size
from pin.messaging.consumer.lag import partition_lag
from pin.messaging.consumer.retry import backoff_delay, failure_of
from pin.messaging.envelope import UnreadableMessageError, decode_envelope
from pin.notifications import domain as n
from tests.consumers.support import cancelled

pytestmark = pytest.mark.unit

AGENT, INVESTOR = uuid.uuid4(), uuid.uuid4()
MEETING = n.Meeting(n.EventKind.SHOWING, datetime(2026, 12, 1, 7, 0, tzinfo=UTC), "Europe/Moscow")


@pytest.mark.parametrize(
    ("value", "headers"),
    [
        (b"{not json", {}),
        (b"\xff\xfe", {}),
        (b"[1, 2]", {}),
        (b'{"MessageId": "not-a-uuid"}', {}),
        (b'{"AppointmentId": "x"}', {}),
        (None, {"message-id": str(uuid.uuid4())}),
    ],
)
def test_a_message_that_can_never_be_read_is_unreadable(value, headers):
    with pytest.raises(UnreadableMessageError):
        decode_envelope(value, headers, max_bytes=1000)


def test_envelope_takes_the_message_id_from_the_header_when_the_value_lacks_it():
    message_id = uuid.uuid4()
    envelope = decode_envelope(
        b'{"ContractVersion": "2"}', {"message-id": str(message_id), "event-type": "x"}, max_bytes=1000
    )
    assert (envelope.message_id, envelope.contract_version, envelope.event_type) == (message_id, 2, "x")


@pytest.mark.parametrize(
    ("error", "dead_letters"),
    [
        (PoolTimeout("no connection"), False),
        (psycopg.OperationalError("connection refused"), False),
        (psycopg.errors.AdminShutdown("terminating connection"), False),
        (psycopg.InterfaceError("the connection is closed"), False),
        (psycopg.errors.DeadlockDetected("deadlock"), False),
        (psycopg.errors.SerializationFailure("could not serialize"), False),
        (psycopg.errors.LockNotAvailable("lock timeout"), False),
        (psycopg.errors.QueryCanceled("statement timeout"), False),
        # a broken deploy or a revoked grant (42), a constraint a deploy added (23), a handler's bug: not the message's
        (psycopg.errors.UndefinedTable("relation does not exist"), False),
        (psycopg.errors.InsufficientPrivilege("permission denied"), False),
        (psycopg.errors.NotNullViolation("null value in column"), False),
        (psycopg.errors.CheckViolation("a constraint"), False),
        (ValueError("a bug"), False),
        # the message itself: unreadable, or not its contract
        (UnreadableMessageError("not JSON"), True),
    ],
)
def test_only_an_unreadable_message_counts_towards_the_dead_letter_topic(error, dead_letters):
    assert fault_of(error).dead_letters is dead_letters


def test_the_attempt_limit_counts_only_the_attempts_that_found_the_message_unreadable():
    """Twenty constraint violations and deadlocks in a row dead-letter nothing; the third unreadable attempt does."""
    unreadable = 0
    for attempt in range(1, 21):
        error = psycopg.errors.CheckViolation("a constraint") if attempt % 2 else psycopg.errors.DeadlockDetected("x")
        failure = failure_of(error, unreadable_attempts=unreadable, max_unreadable_attempts=3)
        assert (failure.dead_letter, failure.unreadable_attempts) == (False, 0)
    outcomes = []
    for _ in range(21, 24):
        failure = failure_of(
            UnreadableMessageError("not JSON"), unreadable_attempts=unreadable, max_unreadable_attempts=3
        )
        unreadable = failure.unreadable_attempts
        outcomes.append(failure.dead_letter)
    assert outcomes == [False, False, True]


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    assert backoff_delay(1, base=0.5, cap=30, rng=lambda: 0.0) == 0.25
    assert backoff_delay(1, base=0.5, cap=30, rng=lambda: 1.0) == 0.5
    assert backoff_delay(4, base=0.5, cap=30, rng=lambda: 1.0) == 4.0
    assert backoff_delay(20, base=0.5, cap=30, rng=lambda: 1.0) == 30.0
    assert all(15.0 <= backoff_delay(50, base=0.5, cap=30) <= 30.0 for _ in range(100))


def test_the_tolerant_reader_ignores_unknown_fields_and_rejects_a_missing_one():
    route = crm_routes()[topics.APPOINTMENT_CANCELLED]
    payload = cancelled(tenant=uuid.uuid4(), agent=AGENT, investor=INVESTOR, reason="NewReason", Extra=[1])
    event = route.parse_or_unreadable(json.loads(json.dumps(payload)))
    assert event.reason == "NewReason"
    del payload["TenantId"]
    with pytest.raises(UnreadableMessageError, match="TenantId"):
        route.parse_or_unreadable(payload)


@pytest.mark.parametrize(
    ("reason", "rescheduled", "kind", "text"),
    [
        (R.DECLINED_BY_AGENT, False, FeedEntryKind.DECLINED_BY_AGENT, "запись отклонена агентом"),
        (R.CANCELLED_BY_INVESTOR, False, FeedEntryKind.CANCELLED_BY_INVESTOR, "запись отменена инвестором"),
        (R.CANCELLED_BY_AGENT, False, FeedEntryKind.CANCELLED_BY_AGENT, "запись отменена агентом"),
        (R.EXPIRED, False, FeedEntryKind.EXPIRED, "запись просрочена без решения агента"),
        (None, False, FeedEntryKind.CANCELLED, "запись отменена"),
        (R.CANCELLED_BY_INVESTOR, True, FeedEntryKind.RESCHEDULED, "запись перенесена инвестором"),
    ],
)  # fmt: skip
def test_lead_feed_entry_by_reason(reason, rescheduled, kind, text):
    assert entry_kind_for(reason, rescheduled=rescheduled) is kind
    assert FEED_TEXTS[kind] == text


@pytest.mark.parametrize(
    ("reason", "recipients"),
    [
        (n.AppointmentCancelReason.DECLINED_BY_AGENT, {INVESTOR}),
        (n.AppointmentCancelReason.CANCELLED_BY_AGENT, {INVESTOR}),
        (n.AppointmentCancelReason.CANCELLED_BY_INVESTOR, {AGENT}),
        (n.AppointmentCancelReason.EXPIRED, {AGENT, INVESTOR}),
        (None, {AGENT, INVESTOR}),
    ],
)
def test_cancellation_recipients_follow_seed_003(reason, recipients):
    notices = n.cancellation_notices(reason, rescheduled=False, agent=AGENT, investor=INVESTOR, meeting=MEETING)
    assert {notice.recipient_user_id for notice in notices} == recipients
    assert len(notices) == len(recipients)
    assert all(notice.kind is n.NotificationKind.APPOINTMENT_CANCELLED for notice in notices)
    assert all("показ 01.12.2026 10:00 (Europe/Moscow)" in notice.text for notice in notices)


def test_a_reschedule_notifies_nobody_of_a_cancellation():
    for reason in [*n.AppointmentCancelReason, None]:
        assert n.cancellation_notices(reason, rescheduled=True, agent=AGENT, investor=INVESTOR, meeting=MEETING) == []


def test_meeting_text_survives_an_unknown_kind_and_time_zone():
    meeting = n.Meeting(None, datetime(2026, 12, 1, 7, 0, tzinfo=UTC), "Mars/Olympus")
    assert meeting.describe() == "встреча 01.12.2026 07:00 (UTC)"


def test_only_an_expired_purchase_tells_the_buyer():
    buyer = uuid.uuid4()
    [notice] = n.purchase_notices(n.PurchaseStatus.EXPIRED, buyer=buyer, package_code="TOP-7")
    assert (notice.recipient_user_id, notice.kind) == (buyer, n.NotificationKind.PROMOTION_EXPIRED)
    assert "срок истёк" in notice.text
    assert n.purchase_notices(n.PurchaseStatus.CANCELLED, buyer=buyer, package_code="TOP-7") == []
    assert n.purchase_notices(None, buyer=buyer, package_code="TOP-7") == []
    assert n.purchase_notices(n.PurchaseStatus.EXPIRED, buyer=None, package_code="TOP-7") == []


@pytest.mark.parametrize(
    ("stats", "lag"),
    [
        ({"fetch_state": "active", "hi_offset": 12, "consumer_lag": 5}, 5),
        ({"fetch_state": "active", "hi_offset": 0, "consumer_lag": -1, "app_offset": -1001, "next_offset": 0}, 0),
        ({"fetch_state": "active", "hi_offset": 9, "consumer_lag": -1, "committed_offset": 4, "next_offset": 9}, 5),
        ({"fetch_state": "stopped", "hi_offset": 9, "consumer_lag": 3}, None),
        ({"fetch_state": "active", "hi_offset": -1001, "consumer_lag": -1}, None),
    ],
)
def test_partition_lag_from_librdkafka_statistics(stats, lag):
    assert partition_lag(stats) == lag


class _FakeMessage:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._where = (topic, partition, offset)

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]


class _FakeConsumer:
    """poll() returns one message; consume() runs a revoke (and reassign) of that partition, then returns more."""

    def __init__(self, runtime: ConsumerRuntime, first: _FakeMessage, more: list[_FakeMessage], *, revoke: bool):
        self.runtime, self.first, self.more, self.revoke = runtime, first, more, revoke
        self.committed: list[list[TopicPartition]] = []

    def poll(self, timeout: float) -> _FakeMessage:
        del timeout
        return self.first

    def consume(self, num_messages: int, timeout: float) -> list[_FakeMessage]:
        assert (num_messages, timeout) == (199, 0)
        if self.revoke:
            tp = TopicPartition(self.first.topic(), self.first.partition())
            self.runtime.on_revoke(self, [tp])  # type: ignore[arg-type]
            self.runtime.on_assign(self, [tp])  # type: ignore[arg-type]
        return self.more

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
        assert not asynchronous
        self.committed.append(offsets)

    def resume(self, partitions: list[TopicPartition]) -> None:
        del partitions


@pytest.mark.parametrize("revoke", [False, True])
def test_a_message_polled_before_a_revoke_of_its_partition_is_dropped_those_after_it_are_kept(revoke):
    runtime = ConsumerRuntime(
        group="crm", routes=crm_routes(), pool=None, consumer_config={}, producer_config={},
        config=ConsumerConfig(batch_size=200),
    )  # type: ignore[arg-type]  # fmt: skip
    runtime.offsets.to_commit[("t", 0)] = 7  # handled before: committed (synchronously) when the partition is revoked
    stale = _FakeMessage("t", 0, 7)
    fresh = [_FakeMessage("t", 0, 7), _FakeMessage("t", 0, 8)]  # the new assignment reads from the committed offset
    fake = _FakeConsumer(runtime, stale, fresh, revoke=revoke)
    polled = runtime.poll_batch(fake)  # type: ignore[arg-type]
    assert polled == (fresh if revoke else [stale, *fresh])
    if revoke:
        assert [(tp.topic, tp.partition, tp.offset) for tp in fake.committed[0]] == [("t", 0, 7)]
        assert runtime.offsets.to_commit == {}


def _provenance() -> list[tuple[str, bytes]]:
    return [("dlt-exception-message", "é".encode() * 1000), ("dlt-original-topic", b"t"), ("dlt-stored-id", b"x")]


@pytest.mark.parametrize(
    ("key", "value", "original"),
    [
        (b"k" * 36, b"v" * 1_200_000, [("message-id", b"m" * 36)]),  # a large value: cut, headers kept
        (b"k" * 36, b"v" * 10, [("junk", b"h" * 900_000)]),  # huge headers: only in the row
        (b"k" * 900_000, b"v" * 900_000, []),  # a huge key: cut too
        (None, None, []),
    ],
)
def test_a_cut_letter_always_fits_the_dead_letter_producer(key, value, original):
    bound = 20_000
    cut_key, cut_value, headers = cut_letter(key, value, original, _provenance(), bound)
    assert record_size(cut_key, cut_value, headers) <= bound
    assert headers[-len(_provenance()) :] == _provenance()  # provenance always goes
    assert cut_value == (value or b"")[: len(cut_value)]
    assert cut_key == (key[: len(cut_key)] if key is not None and cut_key is not None else cut_key)
    if value and len(value) > bound:
        assert len(cut_value) > bound // 2  # what fits of the value goes, not a token preview
    if original and record_size(None, None, original) < bound // 8:
        assert headers[: len(original)] == original
