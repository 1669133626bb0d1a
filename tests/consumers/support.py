"""Helpers for the consumer tests: contract-shaped messages, a plain producer, a consumer run in a thread."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from psycopg_pool import ConnectionPool

from pin.consumer_groups import build_runtime
from pin.db import Conn
from pin.messaging import topics
from pin.messaging.consumer import ConsumerRuntime
from pin.messaging.kafka import ensure_topics
from pin.settings import Settings

T = TypeVar("T")

START = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)

EVENT_TYPES = {
    topics.APPOINTMENT_CANCELLED: "pin.calendar.appointment-cancelled",
    topics.APPOINTMENT_CREATED: "pin.calendar.appointment-created",
    topics.APPOINTMENT_CONFIRMED: "pin.calendar.appointment-confirmed",
    topics.EVENT_STATUS_CHANGED: "pin.calendar.event-status-changed",
    topics.PURCHASE_CHANGED: "pin.promotion.purchase-changed",
}


def iso(value: datetime) -> str:
    """ISO 8601 UTC with Z, as the producers write times."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def envelope(payload: dict[str, Any], *, message_id: uuid.UUID | None = None, version: int = 1) -> dict[str, Any]:
    """The payload plus MessageId, ContractVersion and OccurredAt (SPEC section 6)."""
    return {
        **payload,
        "MessageId": str(message_id or uuid.uuid4()),
        "ContractVersion": version,
        "OccurredAt": iso(datetime.now(UTC)),
    }


def cancelled(
    *,
    tenant: uuid.UUID,
    agent: uuid.UUID,
    investor: uuid.UUID,
    reason: str,
    appointment: uuid.UUID | None = None,
    cancelled_by: str | None = None,
    rescheduled_to: uuid.UUID | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An AppointmentCancelledEvent with its envelope."""
    return envelope(
        {
            "AppointmentId": str(appointment or uuid.uuid4()),
            "TenantId": str(tenant),
            "AgentUserId": str(agent),
            "InvestorUserId": str(investor),
            "Kind": "Showing",
            "StartAt": iso(START),
            "TimeZone": "Europe/Moscow",
            "Reason": reason,
            "CancelledBy": cancelled_by,
            "RescheduledToAppointmentId": str(rescheduled_to) if rescheduled_to else None,
            **extra,
        }
    )


def expired_cancellation() -> dict[str, Any]:
    """An appointment-cancelled event with Reason Expired, for new parties."""
    return cancelled(tenant=uuid.uuid4(), agent=uuid.uuid4(), investor=uuid.uuid4(), reason="Expired")


def created(
    *,
    tenant: uuid.UUID,
    agent: uuid.UUID,
    investor: uuid.UUID,
    appointment: uuid.UUID | None = None,
    status: str = "Pending",
    rescheduled_from: uuid.UUID | None = None,
) -> dict[str, Any]:
    """An AppointmentCreatedEvent with its envelope."""
    return envelope(
        {
            "AppointmentId": str(appointment or uuid.uuid4()),
            "TenantId": str(tenant),
            "SlotId": str(uuid.uuid4()),
            "AgentUserId": str(agent),
            "InvestorUserId": str(investor),
            "Kind": "Consultation",
            "StartAt": iso(START + timedelta(days=1)),
            "EndAt": iso(START + timedelta(days=1, hours=1)),
            "TimeZone": "Europe/Moscow",
            "Status": status,
            "PendingExpiresAt": iso(START) if status == "Pending" else None,
            "RescheduledFromAppointmentId": str(rescheduled_from) if rescheduled_from else None,
        }
    )


def confirmed(*, tenant: uuid.UUID, agent: uuid.UUID, investor: uuid.UUID, appointment: uuid.UUID) -> dict[str, Any]:
    """An AppointmentConfirmedEvent with its envelope."""
    return envelope(
        {
            "AppointmentId": str(appointment),
            "TenantId": str(tenant),
            "AgentUserId": str(agent),
            "InvestorUserId": str(investor),
            "Kind": "Showing",
            "StartAt": iso(START),
            "TimeZone": "Europe/Moscow",
        }
    )


def purchase(
    *,
    tenant: uuid.UUID,
    purchase_id: uuid.UUID,
    targets: list[tuple[str, uuid.UUID]],
    status: str = "Active",
    version: int = 1,
    weight: int = 10,
    buyer: uuid.UUID | None = None,
) -> dict[str, Any]:
    """A PromotionPurchaseChangedKafkaEvent with its envelope."""
    return envelope(
        {
            "PurchaseId": str(purchase_id),
            "TenantId": str(tenant),
            "BuyerUserId": str(buyer or uuid.uuid4()),
            "PackageId": str(uuid.uuid4()),
            "PackageCode": "TOP-7",
            "PackageKind": "Boost",
            "Targets": [{"TargetKind": kind, "TargetId": str(target)} for kind, target in targets],
            "Status": status,
            "PaymentStatus": "NotRequired",
            "BoostWeight": weight,
            "StartsAt": iso(START - timedelta(days=7)),
            "EndsAt": iso(START),
            "Price": {"Amount": "1500.00", "CurrencyId": str(uuid.uuid4()), "Currency": {"Code": "RUB", "Symbol": "₽"}},
            "Version": version,
        }
    )


def key_of(topic: str, value: dict[str, Any]) -> str:
    """The Kafka key the contract names."""
    field = {topics.PURCHASE_CHANGED: "PurchaseId", topics.EVENT_STATUS_CHANGED: "CalendarEventId"}.get(
        topic, "AppointmentId"
    )
    return str(value[field])


class Producing:
    """A plain confluent producer writing contract-shaped JSON with the SPEC's headers."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 0})

    def send(
        self,
        topic: str,
        value: dict[str, Any] | bytes,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        partition: int | None = None,
    ) -> None:
        """Produce one message and wait for its ack."""
        if isinstance(value, dict):
            key = key or key_of(topic, value)
            all_headers = {
                "message-id": str(value.get("MessageId", "")),
                "contract-version": str(value.get("ContractVersion", "")),
                "event-type": EVENT_TYPES[topic],
                "correlation-id": "test",
                **(headers or {}),
            }
            data = json.dumps(value).encode()
        else:
            all_headers = dict(headers or {})
            data = value
        errors: list[object] = []
        extra: dict[str, Any] = {"partition": partition} if partition is not None else {}
        self._producer.produce(
            topic,
            key=key,
            value=data,
            headers=list(all_headers.items()),
            on_delivery=lambda e, _m: errors.append(e),
            **extra,
        )
        self._producer.flush(15)
        assert errors == [None], errors

    def close(self) -> None:
        """Flush and close the producer (so that no connection keeps the broker from stopping at once)."""
        self._producer.flush(5)
        self._producer.close()


@contextmanager
def running(group: str, settings: Settings, pool: ConnectionPool[Conn], **options: Any) -> Iterator[ConsumerRuntime]:
    """Run one consumer of ``group`` in a thread for the block; any crash of the loop fails the test."""
    with running_groups([group], settings, pool, **options) as runtimes:
        yield runtimes[0]


@contextmanager
def running_groups(
    groups: list[str], settings: Settings, pool: ConnectionPool[Conn], **options: Any
) -> Iterator[list[ConsumerRuntime]]:
    """Run one consumer per group, each in its thread; they are stopped together (leaving a group takes a while)."""
    ensure_topics(settings)
    runtimes = [
        build_runtime(
            group,
            settings,
            pool,
            **{"backoff_base": 0.05, "backoff_cap": 0.5, "statistics_interval_ms": 500, **options},
        )
        for group in groups
    ]
    with running_runtimes(runtimes):
        yield runtimes


@contextmanager
def running_runtimes(runtimes: list[ConsumerRuntime]) -> Iterator[None]:
    """Run built runtimes, each in its thread, for the block; any crash of a loop fails the test."""
    stop = threading.Event()
    crashed: list[BaseException] = []

    def _run(runtime: ConsumerRuntime) -> None:
        try:
            runtime.run(stop)
        except BaseException as exc:
            crashed.append(exc)

    threads = [threading.Thread(target=_run, args=(r,), name=f"consumer-{r.group}", daemon=True) for r in runtimes]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive(), "a consumer did not stop within 30 s"
        if crashed:  # raised even when the block failed (e.g. timed out waiting for what the crash prevented)
            raise crashed[0]


def wait_for(probe: Callable[[], T | None], *, timeout: float = 30.0, what: str = "the outcome") -> T:
    """Poll ``probe`` until it returns something truthy (never sleeps on a loop's interval)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def rows(pool: ConnectionPool[Conn], sql: str, *params: object) -> list[dict[str, Any]]:
    """The rows of a query on the test's database."""
    with pool.connection() as conn:
        return list(conn.execute(sql, params).fetchall())


def metric(name: str, **labels: str) -> float:
    """The current value of a metric sample of this process (0 when it has not been touched)."""
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def in_inbox(pool: ConnectionPool[Conn], group: str, message_id: object) -> bool:
    """Whether ``group`` has handled the message (its inbox row committed)."""
    return bool(
        rows(pool, "SELECT 1 FROM messaging.inbox WHERE consumer_group = %s AND message_id = %s", group, message_id)
    )


def notifications_about(pool: ConnectionPool[Conn], subject_id: object) -> list[dict[str, Any]]:
    """The notifications about one appointment or purchase."""
    return rows(
        pool,
        "SELECT recipient_user_id, kind, template_key, text FROM notifications.notification WHERE subject_id = %s"
        " ORDER BY template_key",
        subject_id,
    )


def refuse_feed_entries(pool: ConnectionPool[Conn], *appointment_ids: object) -> None:
    """Make every insert of these appointments' feed entries fail in PostgreSQL (DataException), on every attempt.

    A readable message whose effect can never commit: what a broken deploy or a data the schema refuses does.
    """
    with pool.connection() as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION crm.refuse_for_test() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN IF NEW.appointment_id::text = ANY(string_to_array(TG_ARGV[0], ',')) THEN"
            " RAISE EXCEPTION 'refused for the test' USING ERRCODE = 'data_exception'; END IF; RETURN NEW; END $$"
        )
        conn.execute("DROP TRIGGER IF EXISTS refuse_for_test ON crm.lead_feed_entry")
        conn.execute(
            "CREATE TRIGGER refuse_for_test BEFORE INSERT ON crm.lead_feed_entry FOR EACH ROW"  # type: ignore[arg-type]
            f" EXECUTE FUNCTION crm.refuse_for_test('{','.join(str(uuid.UUID(str(a))) for a in appointment_ids)}')"
        )


def feed_entries(pool: ConnectionPool[Conn], appointment_id: object) -> list[dict[str, Any]]:
    """The lead feed entries of one appointment."""
    return rows(pool, "SELECT * FROM crm.lead_feed_entry WHERE appointment_id = %s", appointment_id)


def committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int:
    """The group's committed offset of one partition (negative when none), read without joining."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = reader.committed([TopicPartition(topic, partition)], timeout=10)
        return int(tp.offset)
    finally:
        reader.close()


def held_messages(pool: ConnectionPool[Conn], group: str) -> list[dict[str, Any]]:
    """The rows of messaging.held_message of ``group``: the messages its instances hold in retry."""
    return rows(
        pool, 'SELECT * FROM messaging.held_message WHERE consumer_group = %s ORDER BY topic, "partition", "offset"',
        group,
    )  # fmt: skip
