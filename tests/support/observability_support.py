"""A local OTLP/HTTP receiver (real HTTP on 127.0.0.1, protobuf decoded with opentelemetry-proto), and the nested
CEO -> Developer -> QA agency the observability tests serve."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents import function_tool
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from agency_swarm import Agency, Agent, ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

SECRET_TEXT = "the-user-text-7f3a"
"""What the user says: it must reach no span unless message text is switched on."""


@dataclass
class Span:
    name: str
    span_id: bytes
    parent_id: bytes
    trace_id: bytes
    attributes: dict[str, Any]
    status_code: int


@dataclass
class Receiver:
    url: str
    spans: list[Span] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    """Each export's body, decompressed."""
    changed: threading.Condition = field(default_factory=threading.Condition)
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    """Each export, decoded whole."""
    headers: list[dict[str, str]] = field(default_factory=list)
    """Each export's HTTP headers, names lowercased."""
    wire: list[bytes] = field(default_factory=list)
    """Each export's body as it came (compressed when the sender compressed it)."""
    answers: list[int] = field(default_factory=list)
    """Status codes to answer the next exports with, in order (a 503 says `Retry-After: 0`, a 307 or 308 redirects to
    the same path); then 200."""
    open: threading.Event = field(default_factory=threading.Event)
    """Cleared: an export waits (unanswered) until it is set again."""

    def wait_for(self, done: Callable[[list[Span]], bool], timeout: float) -> bool:
        """Until `done(spans)` holds (True), or `timeout` seconds passed without it (False): each export wakes it."""
        with self.changed:
            return self.changed.wait_for(lambda: done(self.spans), timeout)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


def _decompressed(body: bytes, encoding: str | None) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _received(receiver: Receiver, request: ExportTraceServiceRequest) -> None:
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                receiver.spans.append(Span(
                    span.name, span.span_id, span.parent_span_id, span.trace_id,
                    {item.key: _value(item.value) for item in span.attributes}, span.status.code,
                ))


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP trace receiver on a free port of 127.0.0.1; `spans` holds what it was sent, decoded."""
    receiver = Receiver("")
    receiver.open.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver.open.wait(60)
            wire = self.rfile.read(int(self.headers["content-length"]))
            answer = receiver.answers.pop(0) if receiver.answers else 200
            body = _decompressed(wire, self.headers.get("content-encoding"))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with receiver.changed:
                receiver.paths.append(self.path)
                receiver.wire.append(wire)
                receiver.raw.append(body)
                receiver.headers.append({name.lower(): value for name, value in self.headers.items()})
                if answer == 200:
                    receiver.requests.append(request)
                    _received(receiver, request)
                receiver.changed.notify_all()
            self._answer(answer)

        def _answer(self, status: int) -> None:
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(status)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            if status == 503:
                self.send_header("retry-after", "0")
            if status in (307, 308):  # to the same path: the export comes again
                self.send_header("location", self.path)
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        receiver.open.set()
        server.shutdown()
        server.server_close()
        thread.join(30)


def drop_pipelines() -> None:
    """Stop and forget the tracers made from the environment (a later test's variables make new ones)."""
    from agency_swarm._telemetry import _otel

    for pipeline in _otel._PIPELINES.values():
        pipeline.shutdown(timeout_millis=0)
    _otel._PIPELINES.clear()


@function_tool
def run_checks(suite: str) -> str:
    """Run the QA checks of `suite`."""
    return f"{suite}: all green"


def ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("Developer", f"Build: {call.last_user_message}")
    return f"CEO reports: {call.tool_outputs[-1]}"


def developer_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("QA", f"Test: {call.last_user_message}")
    return f"Developer built it; {call.tool_outputs[-1]}"


def qa_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return ToolCall("run_checks", {"suite": "smoke"})
    return f"QA says {call.tool_outputs[-1]}"


def build_nested_agency(store: ThreadStore) -> Agency:
    """CEO (priced model gpt-4o) -> Developer (gpt-4o-mini) -> QA (a model without a price) with a tool."""
    ceo = Agent(name="CEO", model=ScriptedModel(ceo_script, name="gpt-4o", input_tokens=1000, output_tokens=100))
    developer = Agent(name="Developer", model=ScriptedModel(developer_script, name="gpt-4o-mini"))
    qa = Agent(name="QA", model=ScriptedModel(qa_script, name="house-model"), tools=[run_checks])
    return Agency([ceo, [ceo, developer], [developer, qa]], thread_store=store)


def build_priced_agency(store: ThreadStore) -> Agency:
    """CEO -> Developer, both on priced models: a turn with a known cost."""
    ceo = Agent(name="CEO", model=ScriptedModel(ceo_script, name="gpt-4o", input_tokens=1000, output_tokens=100))
    developer = Agent(
        name="Developer", model=ScriptedModel(lambda call: "built", name="gpt-4o-mini", input_tokens=2000,
                                              output_tokens=500),
    )
    return Agency([ceo, [ceo, developer]], thread_store=store)
