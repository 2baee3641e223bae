"""Light spans to OTLP/HTTP: one protobuf `ExportTraceServiceRequest` per batch (opentelemetry-proto), posted with
requests to the endpoint the standard `OTEL_EXPORTER_OTLP_*` variables name, retried on transient failures."""

from __future__ import annotations

import atexit
import gzip
import logging
import os
import random
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import SpanKind

from ._batch import SpanBatcher
from ._light import LightSpan, LightTracer

_logger = logging.getLogger(__name__)

TRACES_PATH = "v1/traces"
DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_TIMEOUT_S = 10.0
RETRYABLE = frozenset({408, 429, 502, 503, 504})
MAX_ATTEMPTS = 6
HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200
_KINDS = {kind: kind.value + 1 for kind in SpanKind}  # OTLP counts from UNSPECIFIED = 0
_CACHED_TYPES = (str, int, bool)
_CACHE_ENTRIES = 4096
_CACHED_STR_LENGTH = 256
_ENCODING_ERRORS = (ValueError, TypeError, OverflowError)


# -- the standard variables ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportSettings:
    """Where and how batches go; `headers` (which may hold keys) is left out of the repr."""

    endpoint: str
    headers: dict[str, str] = field(repr=False)
    timeout: float
    compression: str
    verify: bool | str
    cert: str | tuple[str, str] | None


def _variable(env: Mapping[str, str], name: str) -> str:
    """The traces-specific variable, else the general one (`OTEL_EXPORTER_OTLP_TRACES_X`, `OTEL_EXPORTER_OTLP_X`)."""
    return env.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}", "").strip() or env.get(f"OTEL_EXPORTER_OTLP_{name}", "").strip()


def parse_headers(raw: str) -> dict[str, str]:
    """`key=value` pairs separated by commas, each part URL-encoded; names lowercased, malformed pairs skipped."""
    headers: dict[str, str] = {}
    for pair in raw.split(","):
        name, equals, value = pair.partition("=")
        name = unquote(name).strip().lower()
        if not equals or not name:
            if pair.strip():
                _logger.warning("A malformed OTLP header entry is skipped (it needs name=value).")
            continue
        headers[name] = unquote(value).strip()
    return headers


def _timeout(env: Mapping[str, str]) -> float:
    """Seconds, as the OpenTelemetry SDK's OTLP/HTTP exporter reads the variable."""
    raw = _variable(env, "TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        _logger.warning("Invalid OTLP timeout %r; using %s seconds.", raw, DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S


def _compression(env: Mapping[str, str]) -> str:
    value = _variable(env, "COMPRESSION").lower() or "none"
    if value not in ("gzip", "deflate", "none"):
        _logger.warning("Unsupported OTLP compression %r; sending uncompressed.", value)
        return "none"
    return value


def settings_from_env(environ: Mapping[str, str] | None = None) -> ExportSettings:
    env = os.environ if environ is None else environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not endpoint:
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
        endpoint = f"{base.removesuffix('/')}/{TRACES_PATH}"
    client_cert, client_key = _variable(env, "CLIENT_CERTIFICATE"), _variable(env, "CLIENT_KEY")
    return ExportSettings(
        endpoint=endpoint, headers=parse_headers(_variable(env, "HEADERS")), timeout=_timeout(env),
        compression=_compression(env), verify=_variable(env, "CERTIFICATE") or True,
        cert=(client_cert, client_key) if client_cert and client_key else (client_cert or None),
    )


# -- HTTP ----------------------------------------------------------------------------------------------------------


def _retry_after(response: requests.Response) -> float | None:
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


class Sender:
    """Posts serialized batches; retries 408/429/502/503/504 and connection errors with exponential backoff (or the
    server's Retry-After) while the timeout lasts. A failed export is logged once, with its status code only."""

    def __init__(self, settings: ExportSettings) -> None:
        self.settings = settings
        self.session = self.new_session()
        self.headers = {"Content-Type": "application/x-protobuf", **settings.headers}
        if settings.compression != "none":
            self.headers["Content-Encoding"] = settings.compression
        self.stopping = threading.Event()
        """Set: no more waiting between attempts (shutdown)."""

    def new_session(self) -> requests.Session:
        """A session (its pooled connections) of this process's own."""
        session = requests.Session()
        session.verify = self.settings.verify
        session.cert = self.settings.cert
        return session

    def _compressed(self, body: bytes) -> bytes:
        if self.settings.compression == "gzip":
            return gzip.compress(body, compresslevel=6, mtime=0)
        if self.settings.compression == "deflate":
            return zlib.compress(body)
        return body

    def send(self, body: bytes) -> bool:
        data, deadline = self._compressed(body), time.monotonic() + self.settings.timeout
        for attempt in range(MAX_ATTEMPTS):
            failure, retryable, asked = self._attempt(data, deadline)
            if failure is None:
                return True
            if not retryable or attempt == MAX_ATTEMPTS - 1:
                break
            delay = 2.0 ** attempt * random.uniform(0.8, 1.2) if asked is None else asked
            if delay > deadline - time.monotonic() or self.stopping.wait(delay):
                break
        _logger.error("Span export to the OTLP endpoint failed (%s).", failure)
        return False

    def _attempt(self, data: bytes, deadline: float) -> tuple[str | None, bool, float | None]:
        """(what failed or None when sent, whether to retry, the wait the server asked for in Retry-After)."""
        try:
            response = self.session.post(
                self.settings.endpoint, data=data, headers=self.headers,
                timeout=max(deadline - time.monotonic(), 0.001),
            )
        except (requests.ConnectionError, requests.Timeout) as error:
            return type(error).__name__, True, None
        except requests.RequestException as error:
            return type(error).__name__, False, None
        response.close()
        status = response.status_code
        if 200 <= status < 300:
            return None, False, None
        return f"HTTP {status}", status in RETRYABLE, _retry_after(response)


# -- protobuf ------------------------------------------------------------------------------------------------------


def any_value(value: Any) -> AnyValue:
    """An attribute value as OTLP's AnyValue (the order of the OpenTelemetry SDK's encoder: bool before int)."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    if isinstance(value, Mapping):
        return AnyValue(kvlist_value=KeyValueList(
            values=[KeyValue(key=str(key), value=any_value(item)) for key, item in value.items()]))
    raise TypeError(f"an attribute value of type {type(value).__name__}")


def truncated(value: Any, limit: int) -> Any:
    """Strings (also inside sequences and mappings) cut to `limit` characters, as the SDK's length limits do."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, tuple):
        return tuple(truncated(item, limit) for item in value)
    if isinstance(value, dict):
        return {key: truncated(item, limit) for key, item in value.items()}
    return value


class KeyValues:
    """KeyValue messages for attributes; those of short strings, ints and bools are kept and reused (the same
    operation names, models and routes recur on every turn). Used by the export thread only."""

    def __init__(self, length_limit: int | None) -> None:
        self.caches: dict[type, dict[tuple[str, Any], KeyValue]] = {kind: {} for kind in _CACHED_TYPES}
        self.length_limit = length_limit

    def one(self, key: str, value: Any) -> KeyValue:
        if self.length_limit is not None:
            value = truncated(value, self.length_limit)
        cache = self.caches.get(value.__class__)
        if cache is None or (value.__class__ is str and len(value) > _CACHED_STR_LENGTH):
            return KeyValue(key=key, value=any_value(value))
        pair = (key, value)
        found = cache.get(pair)
        if found is None:
            found = KeyValue(key=key, value=any_value(value))
            if len(cache) >= _CACHE_ENTRIES:
                cache.clear()
            cache[pair] = found
        return found

    def all(self, attributes: Mapping[str, Any]) -> list[KeyValue]:
        """Every attribute protobuf can hold (one it refuses, such as an int past 64 bits, is left out, as the SDK's
        encoder leaves it)."""
        one = self.one
        try:
            return [one(key, value) for key, value in attributes.items()]
        except _ENCODING_ERRORS:
            return [kept for kept in (self._or_none(key, value) for key, value in attributes.items()) if kept]

    def _or_none(self, key: str, value: Any) -> KeyValue | None:
        try:
            return self.one(key, value)
        except _ENCODING_ERRORS:
            _logger.debug("Attribute %s is left out of the export: protobuf cannot hold its value.", key)
            return None


def _flags(trace_flags: int, remote: bool) -> int:
    return (trace_flags & 0xFF) | HAS_IS_REMOTE | (IS_REMOTE if remote else 0)


def _trace_state(state: Any) -> str:
    return ",".join(f"{key}={value}" for key, value in state.items()) if state else ""


class Encoder:
    """Batches of ended LightSpans as one serialized `ExportTraceServiceRequest`: the resource (read from the
    provider, encoded again only when it changes), one scope, and each span built once in place."""

    def __init__(
        self, resource_of: Callable[[], Any], scope: tuple[str, str], span_length_limit: int | None = None,
        length_limit: int | None = None,
    ) -> None:
        self.resource_of = resource_of
        self.scope = InstrumentationScope(name=scope[0], version=scope[1])
        self.span_values, self.other_values = KeyValues(span_length_limit), KeyValues(length_limit)
        self._resource: tuple[Any, ProtoResource] | None = None

    def resource(self) -> ProtoResource:
        current = self.resource_of()
        if self._resource is None or self._resource[0] is not current:
            self._resource = (current, ProtoResource(attributes=self.other_values.all(current.attributes)))
        return self._resource[1]

    def encode(self, spans: Iterable[LightSpan]) -> bytes:
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.CopyFrom(self.resource())
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.CopyFrom(self.scope)
        add, attributes, internal = scope_spans.spans.add, self.span_values.all, SpanKind.INTERNAL
        for span in spans:
            encoded = add(
                trace_id=span.trace_id.to_bytes(16, "big"), span_id=span.span_id.to_bytes(8, "big"), name=span.name,
                kind=1 if span.kind is internal else _KINDS[span.kind], start_time_unix_nano=span.start_time,
                end_time_unix_nano=span.end_time, attributes=attributes(span.attributes),
                flags=span.trace_flags & 0xFF | (HAS_IS_REMOTE | IS_REMOTE if span.remote_parent else HAS_IS_REMOTE),
            )
            if span.parent_id:
                encoded.parent_span_id = span.parent_id.to_bytes(8, "big")
            if span.trace_state:
                encoded.trace_state = _trace_state(span.trace_state)
            if span.status is not None:
                encoded.status.code = span.status.status_code.value  # type: ignore[assignment]
                if span.status.description:
                    encoded.status.message = span.status.description
            if span.events or span.links:
                self._events_and_links(encoded, span)
        return request.SerializeToString()

    def _events_and_links(self, encoded: ProtoSpan, span: LightSpan) -> None:
        values = self.other_values.all
        for name, timestamp, attributes in span.events or ():
            encoded.events.add(name=name, time_unix_nano=timestamp, attributes=values(attributes))
        for context, attributes in span.links or ():
            encoded.links.add(
                trace_id=context.trace_id.to_bytes(16, "big"), span_id=context.span_id.to_bytes(8, "big"),
                trace_state=_trace_state(context.trace_state), attributes=values(attributes),
                flags=_flags(context.trace_flags, context.is_remote),
            )


def exporter(encoder: Encoder, sender: Sender) -> Callable[[list[LightSpan]], None]:
    """What the batcher calls with each batch: encode once, send."""

    def export(batch: list[LightSpan]) -> None:
        sender.send(encoder.encode(batch))

    return export


class LightPipeline:
    """The tracer made from the environment: LightSpans sampled by the provider's sampler, batched, encoded and
    posted here; the SDK `TracerProvider` is only where the sampler, ids and resource come from. Flushed at
    interpreter exit."""

    def __init__(self, provider: Any, scope: tuple[str, str], environ: Mapping[str, str] | None = None) -> None:
        limits = SpanLimits()
        self.sender = Sender(settings_from_env(environ))
        self.encoder = Encoder(lambda: provider.resource, scope, limits.max_span_attribute_length,
                               limits.max_attribute_length)
        self.batcher = SpanBatcher(exporter(self.encoder, self.sender), environ)
        self.tracer = LightTracer(provider.sampler, provider.id_generator, limits, self.batcher.add)
        atexit.register(self.shutdown)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_in_child(weakref.WeakMethod(self._forked)))

    def _forked(self) -> None:
        """In a forked child: a connection and export thread of its own (the parent's are not its to use)."""
        self.sender.session = self.sender.new_session()
        self.batcher.restart()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.batcher.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Send what is queued (one attempt each: no waiting to retry) and stop."""
        self.sender.stopping.set()
        self.batcher.shutdown(timeout_millis)
        atexit.unregister(self.shutdown)


def _in_child(method: weakref.WeakMethod[Callable[[], None]]) -> Callable[[], None]:
    def after_fork() -> None:
        alive = method()
        if alive is not None:
            alive()

    return after_fork
