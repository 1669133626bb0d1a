"""OpenTelemetry tracing: off unless an exporter is configured by the standard OTEL_ variables.

Spans: one per worker cycle (attribute ``pin.run_id``, the correlation id), one per item (``pin.tenant_id``);
the W3C ``traceparent`` of the active span is stored on outbox rows, sent by the relay as a Kafka header, and
continued by consumers.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

TRACER_NAME = "pin"


def configure_tracing(service_name: str, processor: SpanProcessor | None = None) -> TracerProvider:
    """Install a tracer provider; spans are exported only when a processor is given (tests) or configured."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if processor is not None:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def tracer() -> trace.Tracer:
    """The tracer every module uses."""
    return trace.get_tracer(TRACER_NAME)


def current_traceparent() -> str | None:
    """The W3C traceparent of the active span, or None when no span is recording."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def context_from_headers(headers: Mapping[str, str]) -> Context:
    """The trace context carried by message headers (traceparent), to continue a producer's trace."""
    return propagate.extract(dict(headers))


__all__ = ["SpanExporter", "configure_tracing", "context_from_headers", "current_traceparent", "tracer"]
