"""Tracing from the standard environment: spans exported over OTLP/HTTP (protobuf) when
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (the `otel` extra)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .._base._extras import MissingExtra

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""`true`: message text (sends, tool arguments, outputs) goes on spans; off by default."""
DEFAULT_SERVICE_NAME = "agency-swarm"

SCOPE_NAME = "agency_swarm"
SETTING_VARIABLES = (
    *ENDPOINT_VARIABLES, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_SPAN_EVENT_COUNT_LIMIT", "OTEL_SPAN_LINK_COUNT_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
)
"""The variables a tracer is made from: a change makes another pipeline (tests and benchmarks change them)."""

_PIPELINES: dict[tuple[str, ...], Any] = {}
"""The light pipeline made for each setting (one per process: it keeps a connection and a thread)."""


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
    provider the application installed itself (an SDK `TracerProvider`) is used as it is; otherwise the spans are
    light ones (`_light`), batched and exported here (`_otlp`), configured by an SDK `TracerProvider` made from
    the environment (its sampler, ids and resource)."""
    if not tracing_wanted():
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        from ._otlp import LightPipeline
    except ImportError as missing:
        raise MissingExtra("otel", missing.name or "opentelemetry-sdk", "Tracing (OTEL_EXPORTER_OTLP_*)") from None
    installed = trace.get_tracer_provider()
    if isinstance(installed, TracerProvider):
        return installed.get_tracer("agency_swarm")
    key = tuple(os.environ.get(name, "") for name in SETTING_VARIABLES)
    pipeline = _PIPELINES.get(key)
    if pipeline is None:
        service = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
        provider = TracerProvider(resource=Resource.create(service), shutdown_on_exit=False)
        pipeline = _PIPELINES[key] = LightPipeline(provider, (SCOPE_NAME, _version()))
    return pipeline.tracer


def flush_traces(timeout_millis: int = 30_000) -> None:
    """Export every span ended so far (the exporters batch them): the light pipelines' and, when the application
    installed its own SDK `TracerProvider`, its."""
    for pipeline in _PIPELINES.values():
        pipeline.force_flush(timeout_millis)
    try:
        from opentelemetry import trace
    except ImportError:
        return
    installed = trace.get_tracer_provider()
    force_flush = getattr(installed, "force_flush", None)
    if callable(force_flush):
        force_flush(timeout_millis)


def _version() -> str:
    try:
        return version("agency-swarm-sdk")
    except PackageNotFoundError:
        return ""
