"""One trace from the use case to the consumer: the unit of work stores the active span's traceparent on the
outbox row, the relay sends it as a Kafka header, and the consumer's span continues that trace.

Real PostgreSQL, real relay, real broker, real crm consumer; spans collected with the SDK's in-memory exporter.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.util._once import Once
from psycopg_pool import ConnectionPool

from pin.calendar.contracts import AppointmentCancelledEvent
from pin.calendar.domain import Kind, Reason
from pin.db import Conn, database_now
from pin.local.embedded.kafka import EmbeddedKafka
from pin.messaging import topics
from pin.messaging.kafka import ensure_topics
from pin.observability.tracing import current_traceparent, tracer
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.settings import Settings
from pin.unit_of_work import UnitOfWork
from tests.consumers.support import in_inbox, running, wait_for
from tests.outbox.support import make_relay
from tests.support.kafka import read_topic


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans of this test, from the process's global tracer provider (installed here if none is yet).

    A provider installed here is removed afterwards, as opentelemetry-test-utils' reset_trace_globals does, so
    that later tests of this process see the no-op provider they started with.
    """
    provider = trace.get_tracer_provider()
    installed = not isinstance(provider, TracerProvider)
    if installed:
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    try:
        yield exporter
    finally:
        processor.shutdown()  # the SDK cannot remove a processor; a shut-down one drops what it gets
        if installed:
            trace._TRACER_PROVIDER_SET_ONCE = Once()
            trace._TRACER_PROVIDER = None
            trace._PROXY_TRACER_PROVIDER = trace.ProxyTracerProvider()


@pytest.mark.integration
def test_a_use_case_span_continues_in_the_consumer_through_outbox_relay_and_broker(
    spans: InMemorySpanExporter,
    pool: ConnectionPool[Conn],
    kafka: EmbeddedKafka,
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(kafka_bootstrap_servers=kafka.bootstrap_servers)
    ensure_topics(settings)
    event = AppointmentCancelledEvent(
        appointment_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        agent_user_id=uuid.uuid4(),
        investor_user_id=uuid.uuid4(),
        kind=Kind.SHOWING,
        start_at=datetime.now(UTC) + timedelta(days=2),
        time_zone="Europe/Moscow",
        reason=Reason.CANCELLED_BY_AGENT,
        cancelled_by="Agent",
        rescheduled_to_appointment_id=None,
    )

    with (
        tracer().start_as_current_span("cancel appointment") as use_case,
        UnitOfWork(
            pool, MessageContext("req-trace-1"), outbox=RELAY_POLICY, traceparent_provider=current_traceparent
        ) as uow,
    ):
        uow.record(*event.recorded(), database_now(uow.conn))
        uow.commit()
    origin = use_case.get_span_context()
    trace_id = f"{origin.trace_id:032x}"

    relay = make_relay(pool, settings)
    relay.heartbeat()
    published = relay.run_once()
    assert published.as_dict()["published"] == 1

    (record,) = read_topic(kafka.bootstrap_servers, topics.APPOINTMENT_CANCELLED, expected=1)
    assert record.headers["traceparent"].split("-")[1] == trace_id  # the relay sent the row's traceparent
    assert record.headers["correlation-id"] == "req-trace-1"
    message_id = record.headers["message-id"]

    with running("crm", settings, pool):
        wait_for(lambda: in_inbox(pool, "crm", message_id), what="crm to handle the message")

    def consumer_span() -> ReadableSpan | None:
        finished = spans.get_finished_spans()
        mine = [s for s in finished if s.kind is SpanKind.CONSUMER and s.name.startswith(topics.APPOINTMENT_CANCELLED)]
        return mine[0] if mine else None

    consumed = wait_for(consumer_span, what="the consumer's span")
    assert consumed.context is not None
    assert consumed.context.trace_id == origin.trace_id
    assert consumed.parent is not None
    assert consumed.parent.span_id == origin.span_id  # its parent is the use case's span
