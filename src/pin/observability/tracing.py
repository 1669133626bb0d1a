"""OpenTelemetry tracing: a span per worker cycle (``pin.run_id``) and per item, whose W3C ``traceparent`` travels
on outbox rows, the relay's Kafka headers and the consumers' spans. Spans always carry context; they are exported
only when the standard OTEL_ variables ask (docs/operations.md, "Logs and traces").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import structlog
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter

TRACER_NAME = "pin"

log = structlog.get_logger(__name__)


def configure_tracing(service_name: str, processor: SpanProcessor | None = None) -> TracerProvider:
    """Install a tracer provider; spans are exported only when a processor is given (tests) or configured."""
    provider = TracerProvider(resource=_resource(service_name))
    if processor is not None:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def configure_tracing_from_env(service_name: str, env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """Install the provider and the exporters OTEL_TRACES_EXPORTER names; None when OTEL_SDK_DISABLED."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    provider = TracerProvider(resource=_resource(service_name, env))
    for processor in span_processors_from_env(env):
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def span_processors_from_env(env: Mapping[str, str]) -> list[SpanProcessor]:
    """The processors OTEL_TRACES_EXPORTER asks for; unknown or unavailable exporters are logged and skipped."""
    names = [name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "none").split(",") if name.strip()]
    processors: list[SpanProcessor] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            # synchronous: a console exporter is for a developer watching a terminal, not for throughput
            processors.append(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            exporter = _otlp_exporter(env)
            if exporter is not None:
                processors.append(BatchSpanProcessor(exporter))
        else:
            log.warning("unknown trace exporter ignored", exporter=name, variable="OTEL_TRACES_EXPORTER")
    return processors


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    """The OTLP exporter of the protocol OTEL_EXPORTER_OTLP_PROTOCOL names, if its package is installed."""
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )
    except ImportError:
        package = "opentelemetry-exporter-otlp-proto-" + ("grpc" if protocol == "grpc" else "http")
        log.warning("OTLP trace exporter not installed; spans are not exported", package=package)
        return None
    exporter: SpanExporter = OTLPSpanExporter()
    return exporter


def _resource(service_name: str, env: Mapping[str, str] | None = None) -> Resource:
    """service.name = OTEL_SERVICE_NAME when set (the SDK reads it), else ``pin-<role>``."""
    env = os.environ if env is None else env
    attributes: dict[str, str] = {}
    if not env.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service_name if service_name.startswith("pin") else f"pin-{service_name}"
    return Resource.create(attributes)


def tracer() -> trace.Tracer:
    """The tracer every module uses."""
    return trace.get_tracer(TRACER_NAME)


def spans_exported(of: trace.Tracer | None = None) -> bool:
    """Whether a finished span goes anywhere: a span processor is installed (an exporter, or a test's).

    Without one (``OTEL_TRACES_EXPORTER=none``, the default) the SDK still records spans, so that the outbox gets a
    valid traceparent, but nothing ever reads them: code that would start many short spans per cycle (one per item
    of a batch) may leave them out. ``of``: an SDK tracer's own processors decide (a tracer of another provider
    than the global one); otherwise the global provider's. Unknown providers count as exporting.
    """
    processors = getattr(getattr(of, "span_processor", None), "_span_processors", None)
    if processors is not None:
        return bool(processors)
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", None)
        return processors is None or bool(processors)
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def current_traceparent() -> str | None:
    """The W3C traceparent of the active span, or None when no span is recording."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def context_from_headers(headers: Mapping[str, str]) -> Context:
    """The trace context carried by message headers (traceparent), to continue a producer's trace."""
    return propagate.extract(dict(headers))


__all__ = [
    "SpanExporter",
    "configure_tracing",
    "configure_tracing_from_env",
    "context_from_headers",
    "current_traceparent",
    "span_processors_from_env",
    "spans_exported",
    "tracer",
]
