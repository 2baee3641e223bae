"""What operators see of the HTTP side: a span per request (the root of the request's trace), the request id and
principal for log lines (`_logs`), rejected requests counted, and `GET /metrics` (Prometheus) when asked for."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Awaitable, Iterator
from typing import Any

from fastapi import FastAPI, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._base._errors import ConfigError
from .._base._extras import MissingExtra, install_hint, require_extra
from .._telemetry import _switch
from .._telemetry._otel import content_wanted, tracer_from_env, tracing_wanted
from .._telemetry._request import REQUEST, RequestNote
from ._logs import LOG_FORMATS, json_logs_on

REQUEST_ID_HEADER = b"x-request-id"
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
_GOOD_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_ID_SEGMENTS = {"chats": "{chat_id}", "turns": "{turn_id}"}
_NO_FIELDS: frozenset[bytes] = frozenset()


def observe(app: FastAPI, *, metrics: bool) -> FastAPI:
    """`app` with spans (when the OTLP variables are set), metrics (`metrics`) and request ids in JSON logs, for
    what is on; nothing at all when none is."""
    if not isinstance(metrics, bool):
        raise ConfigError(f"metrics must be True or False, got {type(metrics).__name__}.")
    try:
        tracer = tracer_from_env()
    except MissingExtra as missing:
        raise ConfigError(str(missing)) from None
    counted = _metrics() if metrics else None
    if tracer is not None or counted is not None:
        _switch.switch_on(tracer=tracer, metrics=counted, content=content_wanted())
    if counted is not None:
        _add_metrics_route(app, counted)
    if tracer is None and counted is None and not json_logs_on():
        return app
    app.add_middleware(RequestWatch, tracer=tracer, metrics=counted)
    return app


def _metrics() -> Any:
    try:
        from .._telemetry._metrics import metrics
    except ImportError as missing:
        if not (missing.name or "").startswith("prometheus_client"):
            raise
        raise ConfigError(
            f"The /metrics endpoint needs prometheus_client: {install_hint('metrics')}."
        ) from None
    return metrics()


def _add_metrics_route(app: FastAPI, counted: Any) -> None:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
    from starlette.concurrency import run_in_threadpool

    def exposition() -> bytes:
        registry = REGISTRY
        if os.environ.get(MULTIPROC_VARIABLE):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics() -> Response:
        """The process's metrics, its values not written yet written first; with several workers
        (PROMETHEUS_MULTIPROC_DIR), every worker's, summed (another worker's as it last wrote them). In durable mode,
        the queue's depth too, read now from the database (once: it is the queue's, not a worker's)."""
        await counted.buffers.flush_everywhere()
        body = await run_in_threadpool(exposition)
        turns = getattr(app.state, "durable", None)
        if turns is not None:
            body += _queue_depth(turns.queue_name, await turns.queue_depth())
        return Response(body, media_type=CONTENT_TYPE_LATEST)


def _queue_depth(queue: str, depth: int | None) -> bytes:
    """The durable queue's depth in the exposition format (nothing when it could not be read)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    if depth is None:
        return b""
    family = GaugeMetricFamily(
        "agency_swarm_durable_queue_depth", "Durable turns queued and not started yet, on every worker.",
        labels=["queue"],
    )
    family.add_metric([queue], depth)

    class Depth:
        def collect(self) -> list[GaugeMetricFamily]:
            return [family]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Depth())
    return generate_latest(registry)


def route_of(path: str) -> str:
    """The path with its ids as placeholders (`/chats/{chat_id}/messages`): a span's name, without ids in it."""
    if path.startswith("/chats/"):  # the usual request: one id, right after /chats/
        slash = path.find("/", 7)
        if slash < 0:
            return "/chats/{chat_id}"
        rest = path[slash:]
        if "/turns/" not in rest and "/chats/" not in rest:
            return "/chats/{chat_id}" + rest
    segments = path.split("/")
    for index in range(1, len(segments) - 1):
        placeholder = _ID_SEGMENTS.get(segments[index])
        if placeholder is not None:
            segments[index + 1] = placeholder
    return "/".join(segments)


def read_headers(headers: list[tuple[bytes, bytes]], trace_fields: frozenset[bytes]) -> tuple[str, bool]:
    """In one pass over the headers: the request's id and whether they carry a trace context (a field in
    `trace_fields`, lowercase). The id is the client's first `X-Request-ID` when it is a plain token, else 32 new hex
    digits (an id for log lines and support, not a secret: `random`, which each worker process seeds on its own,
    not the OS's entropy per request)."""
    given: bytes | None = None
    carries = False
    for key, value in headers:
        key = key.lower()
        if key == REQUEST_ID_HEADER:
            if given is None:
                given = value
        elif key in trace_fields:
            carries = True
    if given is not None and _GOOD_REQUEST_ID.fullmatch(given):
        return given.decode(), carries
    return f"{random.getrandbits(128):032x}", carries


class RequestWatch:
    """Outside every other guard: the request's id (the client's `X-Request-ID` when it is a plain token, else a
    new one; sent back), its span, and its 4xx counted by error type."""

    def __init__(self, app: ASGIApp, *, tracer: Any, metrics: Any) -> None:
        self.app, self.metrics = app, metrics
        self.spans = None if tracer is None else _HttpSpans(tracer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        spans = self.spans
        request_id, carries = read_headers(scope["headers"], _NO_FIELDS if spans is None else spans.read_fields())
        note = RequestNote(request_id)
        token = REQUEST.set(note)
        status = [500]
        watched = _watched_send(send, note, status, self.metrics)
        if spans is None:
            try:
                await self.app(scope, receive, watched)
            finally:
                REQUEST.reset(token)
            return
        span = spans.start(scope, note, carries)
        current = spans.attach(span)  # current while the request is handled: the turns it starts are spans under it
        try:
            await self.app(scope, receive, watched)
        finally:
            spans.detach(current)
            REQUEST.reset(token)
            spans.end(span, status[0], note)


def _watched_send(send: Send, note: RequestNote, status: list[int], metrics: Any) -> Send:
    """`send` that notes the response's status, adds its `X-Request-ID` and counts a 4xx once; a plain function that
    hands back `send`'s awaitable (no coroutine of its own per message)."""
    def watched(message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
            message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", note.request_id.encode())]}
        elif message["type"] == "http.response.body" and metrics is not None and status[0] >= 400 and status[0] > 0:
            _count_failure(metrics, status[0], message.get("body", b""), note)
            status[0] = -status[0]  # counted: once per response
        return send(message)

    return watched


def _count_failure(metrics: Any, status: int, body: bytes, note: RequestNote) -> None:
    """A 4xx counted under its error type (the body's `error.type`), a store's 503 as a store error."""
    if status >= 500 and status != 503:
        return
    try:
        reason = str(json.loads(body)["error"]["type"])
    except (ValueError, KeyError, TypeError):
        reason = f"http_{status}"
    metrics.request_failed(status, reason, store_error_counted=note.store_error_counted)


class _HttpSpans:
    """Each request's SERVER span, the root of its trace unless its headers carry a trace context. The
    OpenTelemetry API is imported once here (tracing is an extra), not on every request."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from .._telemetry._light import LightTracer
        from .._telemetry._spans import SCOPE_HEADERS, annotate

        self.tracer, self.context, self.trace, self.propagate = tracer, context, trace, propagate
        self.server, self.error = SpanKind.SERVER, Status(StatusCode.ERROR)
        self.headers, self.annotate = SCOPE_HEADERS, annotate
        self.light = tracer if isinstance(tracer, LightTracer) else None
        self._fields: tuple[Any, frozenset[bytes]] = (None, frozenset())

    def read_fields(self) -> frozenset[bytes]:
        """The header names the global propagator reads, lowercase (worked out again only when another one is
        installed)."""
        propagator = self.propagate.get_global_textmap()
        if self._fields[0] is not propagator:
            self._fields = (propagator, frozenset(name.lower().encode("latin-1") for name in propagator.fields))
        return self._fields[1]

    def start(self, scope: Scope, note: RequestNote, carries_context: bool) -> Any:
        """The request's span: a new trace's root unless the headers carry a field the propagators read (then under
        what they extract)."""
        route = route_of(scope["path"])
        method: str = scope["method"]
        name, headers = f"{method} {route}", scope["headers"]
        attributes = {"http.request.method": method, "http.route": route, "agency_swarm.request_id": note.request_id}
        if not carries_context:
            if self.light is not None:
                return self.light.root(name, self.server, attributes)
            return self.tracer.start_span(name, context=self.context.Context(), kind=self.server, attributes=attributes)
        context = self.propagate.extract(headers, getter=self.headers)
        return self.tracer.start_span(name, context=context, kind=self.server, attributes=attributes)

    def attach(self, span: Any) -> object:
        """Make `span` current; the token `detach` takes."""
        return self.context.attach(self.trace.set_span_in_context(span))

    def detach(self, token: Any) -> None:
        self.context.detach(token)

    def end(self, span: Any, status: int, note: RequestNote) -> None:
        status = abs(status)
        if not span.is_recording():  # sampled out
            span.end()
            return
        attributes: dict[str, Any] = {"http.response.status_code": status}
        if note.principal is not None:
            attributes["enduser.id"] = note.principal
        self.annotate(span, attributes)
        if status >= 500:
            span.set_status(self.error)
        span.end()


def check_observability(metrics: bool, log_format: str) -> None:
    """What `serve --metrics`, `--log-format` and the OTLP variables need, said once before any worker starts."""
    if log_format not in LOG_FORMATS:
        raise ConfigError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}.")
    if metrics:
        require_extra("metrics", "prometheus_client", needed_by="serve --metrics")
    if tracing_wanted():
        for module in ("opentelemetry.sdk", "opentelemetry.proto", "requests"):
            if not _importable(module):
                raise MissingExtra("otel", module, "Tracing (OTEL_EXPORTER_OTLP_*)")


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def metrics_directory(metrics: bool) -> Iterator[None]:
    """With `metrics`: a private, new PROMETHEUS_MULTIPROC_DIR for this server's workers (each writes its values
    there, /metrics sums them), removed when the server stops; one left by an earlier server is never read."""
    if not metrics:
        yield
        return
    was = os.environ.get(MULTIPROC_VARIABLE)
    directory = tempfile.mkdtemp(prefix="agency-swarm-metrics-")
    os.environ[MULTIPROC_VARIABLE] = directory
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(MULTIPROC_VARIABLE, None)
        else:
            os.environ[MULTIPROC_VARIABLE] = was
        shutil.rmtree(directory, ignore_errors=True)
