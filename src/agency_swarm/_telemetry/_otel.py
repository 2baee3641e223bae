"""Tracing from the standard environment: spans exported over OTLP/HTTP (protobuf) when
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (the `otel` extra)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._base._extras import MissingExtra

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""`true`: message text (sends, tool arguments, outputs) goes on spans; off by default."""
DEFAULT_SERVICE_NAME = "agency-swarm"

_PROVIDERS: dict[tuple[str, ...], Any] = {}
"""The tracer provider made for each endpoint setting (one per process: exporters keep connections and a thread)."""


def tracing_wanted(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def content_wanted(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(CONTENT_VARIABLE, "").strip().lower() == "true"


def tracer_from_env() -> Any:
    """A Tracer whose spans go to the OTLP endpoint the environment names, or None when it names none. A tracer
    provider the application installed itself (an SDK `TracerProvider`) is used as it is."""
    if not tracing_wanted():
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as missing:
        raise MissingExtra("otel", missing.name or "opentelemetry-sdk", "Tracing (OTEL_EXPORTER_OTLP_*)") from None
    installed = trace.get_tracer_provider()
    if isinstance(installed, TracerProvider):
        return installed.get_tracer("agency_swarm")
    key = tuple(os.environ.get(name, "") for name in (*ENDPOINT_VARIABLES, "OTEL_SERVICE_NAME"))
    provider = _PROVIDERS.get(key)
    if provider is None:
        service = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
        provider = _PROVIDERS[key] = TracerProvider(resource=Resource.create(service))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider.get_tracer("agency_swarm")


def flush_traces(timeout_millis: int = 30_000) -> None:
    """Export every span ended so far (the exporters batch them)."""
    for provider in _PROVIDERS.values():
        provider.force_flush(timeout_millis)
