"""Traces: configured from the OTEL_ variables; the unit of work stores the active span's traceparent."""

from __future__ import annotations

import uuid
from typing import ClassVar

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from psycopg_pool import ConnectionPool

from pin.db import Conn, database_now
from pin.messaging.contracts import Contract
from pin.observability.tracing import (
    configure_tracing_from_env,
    context_from_headers,
    current_traceparent,
    span_processors_from_env,
)
from pin.outbox.writer import RELAY_POLICY, MessageContext
from pin.unit_of_work import UnitOfWork


class ProbeEvent(Contract):
    """A contract of this test only (the real ones belong to the contexts)."""

    TOPIC: ClassVar[str] = "pin.test.probe.v1"
    EVENT_TYPE: ClassVar[str] = "pin.test.probe"
    probe_id: uuid.UUID

    def message_key(self) -> str:
        return str(self.probe_id)


@pytest.mark.unit
def test_exporters_are_off_unless_the_environment_names_one() -> None:
    assert span_processors_from_env({}) == []
    assert span_processors_from_env({"OTEL_TRACES_EXPORTER": "none"}) == []
    (console,) = span_processors_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(console, SimpleSpanProcessor)
    # an unknown name is ignored with a warning, never a crash at role start
    assert span_processors_from_env({"OTEL_TRACES_EXPORTER": "zipkin-please"}) == []


@pytest.mark.unit
def test_otlp_without_its_package_is_a_warning_not_a_crash() -> None:
    try:
        import opentelemetry.exporter.otlp.proto.http  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert span_processors_from_env({"OTEL_TRACES_EXPORTER": "otlp"}) == []
    else:  # pragma: no cover - only where the optional package is installed
        assert len(span_processors_from_env({"OTEL_TRACES_EXPORTER": "otlp"})) == 1


@pytest.mark.unit
def test_sdk_disabled_installs_nothing() -> None:
    assert configure_tracing_from_env("relay", {"OTEL_SDK_DISABLED": "true"}) is None


@pytest.mark.integration
def test_the_outbox_row_carries_the_traceparent_of_the_span_that_wrote_it(pool: ConnectionPool[Conn]) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pin.test")
    run_id = str(uuid.uuid4())
    probe = ProbeEvent(probe_id=uuid.uuid4())

    with tracer.start_as_current_span("appointment-timeout cycle", attributes={"pin.run_id": run_id}) as span:
        with UnitOfWork(
            pool, MessageContext(run_id), outbox=RELAY_POLICY, traceparent_provider=current_traceparent
        ) as uow:
            uow.record(*probe.recorded(), database_now(uow.conn))
            uow.commit()
        span_context = span.get_span_context()

    with pool.connection() as conn:
        row = conn.execute(
            "SELECT headers FROM outbox.message WHERE message_key = %s", (str(probe.probe_id),)
        ).fetchone()
    assert row is not None
    headers = row["headers"]
    assert isinstance(headers, dict)
    assert headers["correlation-id"] == run_id
    expected = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"
    assert headers["traceparent"] == expected

    (finished,) = exporter.get_finished_spans()
    assert finished.context is not None
    assert finished.context.trace_id == span_context.trace_id
    assert finished.attributes is not None
    assert finished.attributes["pin.run_id"] == run_id

    # what a consumer does with the header the relay copies from this row: continue the same trace
    with tracer.start_as_current_span("consume", context=context_from_headers(headers)) as child:
        assert child.get_span_context().trace_id == span_context.trace_id
    consumer_span = exporter.get_finished_spans()[-1]
    assert consumer_span.parent is not None
    assert consumer_span.parent.span_id == span_context.span_id


@pytest.mark.integration
def test_outside_a_span_the_row_has_no_traceparent(pool: ConnectionPool[Conn]) -> None:
    probe = ProbeEvent(probe_id=uuid.uuid4())
    with UnitOfWork(
        pool, MessageContext("req-1"), outbox=RELAY_POLICY, traceparent_provider=current_traceparent
    ) as uow:
        uow.record(*probe.recorded(), database_now(uow.conn))
        uow.commit()
    with pool.connection() as conn:
        row = conn.execute("SELECT headers FROM outbox.message").fetchone()
    assert row is not None
    assert row["headers"] == {"correlation-id": "req-1"}
