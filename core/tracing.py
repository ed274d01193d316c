"""OpenTelemetry spans for runs: run (one per operation), step, model call, tool call, delegation, and
approval wait (from the pause to the decision, with the decision and the fingerprint).

Spans join up across actors and across a pause: requests carry a W3C ``traceparent`` from the caller,
and a run stores the context of its first operation, so every later operation on it (a decision days
later, a recovery in another process) continues the same trace.

Troupe only uses the OpenTelemetry API; nothing is exported until an SDK is configured. ``configure()``
sets one up from the standard environment (``OTEL_TRACES_EXPORTER=console|otlp``, plus the usual
``OTEL_EXPORTER_OTLP_*`` settings); every host calls it when it starts, so actor processes export too.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

log = logging.getLogger(__name__)
_tracer = trace.get_tracer("troupe")
_configured = False
_sdk_missing = False  # asked for, not installed: said once
_lock = threading.Lock()

Carrier = dict[str, str]


def carrier() -> Carrier:
    """The current trace context, to send along with a request."""
    out: Carrier = {}
    propagate.inject(out)
    return out


def recording() -> bool:
    """Whether this process records spans: until an SDK's tracer provider is set (by ``configure()`` or
    the application), OpenTelemetry's API hands out spans that record nothing, yet each costs 10-20 µs
    to make here, a noticeable share of an approval cycle's 16 spans. Asked at every span, so a provider
    set later takes effect at once."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


@contextmanager
def span(name: str, *, parent: Carrier | None = None, **attributes: Any) -> Iterator[trace.Span]:
    """A span under ``parent`` (a carrier from another process or an earlier operation) or, without
    one, under whatever span is current here."""
    if not recording():
        yield trace.INVALID_SPAN
        return
    ctx = propagate.extract(parent) if parent else None
    with _tracer.start_as_current_span(name, context=ctx, attributes=_clean(attributes)) as current:
        yield current


def record_wait(name: str, started: datetime, parent: Carrier | None, **attributes: Any) -> None:
    """A span that began in the past (a pause) and ends now (its decision)."""
    if not recording():
        return
    ctx = propagate.extract(parent) if parent else otel_context.get_current()
    waited = _tracer.start_span(
        name, context=ctx, start_time=int(started.timestamp() * 1e9), attributes=_clean(attributes)
    )
    waited.end()


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("__", "."): v for k, v in attributes.items() if v is not None}


def configure() -> bool:
    """Install an SDK tracer provider from the environment, once per process. Returns whether one is
    (now) exporting. Does nothing if the application already set a provider, or if OpenTelemetry's SDK
    is not installed (``pip install 'troupe-runtime[tracing]'``)."""
    global _configured, _sdk_missing
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    with _lock:
        if _configured or _sdk_missing or exporter_name in ("", "none"):
            return _configured
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
        except ImportError as exc:
            # Asked for spans but cannot export them: say so once, rather than exporting nothing quietly.
            _sdk_missing = True
            log.warning(
                "OTEL_TRACES_EXPORTER=%s is set but OpenTelemetry's SDK is not installed (%s): no spans "
                "are exported; pip install 'troupe-runtime[tracing]'",
                exporter_name,
                exc,
            )
            return False
        exporter: SpanExporter
        if exporter_name == "console":
            exporter = ConsoleSpanExporter()
        elif exporter_name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={exporter_name!r}: Troupe knows 'console' and 'otlp'")
        service = os.environ.get("OTEL_SERVICE_NAME", "troupe")
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _configured = True
        return True


__all__ = ["Carrier", "carrier", "configure", "record_wait", "recording", "span"]
