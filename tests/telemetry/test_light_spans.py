"""The light span pipeline the server makes from the OTLP variables, as a real OTLP/HTTP receiver decodes it: the
span tree and its fields, sampling, the exporter's variables (headers, compression, batching), retries, the queue's
bound, export at interpreter exit, attribute values against the OpenTelemetry SDK as an oracle, and an application's
own SDK TracerProvider used as it is."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import SpanLimits, sampling
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from agency_swarm._telemetry import _otel, _spans
from agency_swarm._telemetry._batch import SpanBatcher
from agency_swarm._telemetry._light import LightTracer
from agency_swarm._telemetry._otel import flush_traces, tracer_from_env
from observability_support import Receiver, drop_pipelines, otlp_receiver

ROOT = Path(__file__).resolve().parents[2]
TRACE, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
KEY_VALUE = "offline-test-value-1"
SERVER, INTERNAL, CLIENT = 2, 1, 3  # OTLP's span kinds
HAS_IS_REMOTE, IS_REMOTE, SAMPLED = 0x100, 0x200, 0x01


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    with otlp_receiver() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url + "/")
        yield found
        drop_pipelines()


def light_tracer(monkeypatch: pytest.MonkeyPatch, **variables: str) -> LightTracer:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    tracer = tracer_from_env()
    assert isinstance(tracer, LightTracer)
    return tracer


def exported(receiver: Receiver) -> dict[str, ProtoSpan]:
    """Every span received, by name (each name once)."""
    found = [span for request in receiver.requests for resource in request.resource_spans
             for scope in resource.scope_spans for span in scope.spans]
    by_name = {span.name: span for span in found}
    assert len(by_name) == len(found), [span.name for span in found]
    return by_name


def values(span: Any) -> dict[str, Any]:
    """A span's (or event's) attributes as plain values; arrays as lists."""
    def plain(value: Any) -> Any:
        kind = value.WhichOneof("value")
        if kind == "array_value":
            return [plain(item) for item in value.array_value.values]
        return getattr(value, kind) if kind else None

    return {item.key: plain(item.value) for item in span.attributes}


def remote_parent(sampled: bool = True) -> Any:
    return extract({"traceparent": f"00-{TRACE}-{PARENT}-{'01' if sampled else '00'}", "tracestate": "vendor=v1"})


def call_that_fails(tracer: LightTracer, parent: Any, seen: list[Any]) -> None:
    """A CLIENT span made current by `start_as_current_span`, left by an exception (`seen`: it, the current span)."""
    with tracer.start_as_current_span("call", context=trace.set_span_in_context(parent), kind=SpanKind.CLIENT) as call:
        seen += [call, trace.get_current_span()]
        raise RuntimeError("boom")


def make_turn_shaped_tree(tracer: LightTracer) -> None:
    """A SERVER span under a caller's `traceparent`, a failing turn under it, a failing CLIENT call made current, a
    link and an OK status; and a root span of its own."""
    server = tracer.start_span("POST /chats/{chat_id}/messages", context=remote_parent(), kind=SpanKind.SERVER,
                               attributes={"http.route": "/chats/{chat_id}/messages", "tags": ["a", "b"]})
    server.set_attribute("sizes", (1, 2, 3))
    turn = _spans.start(tracer, "turn CEO", server, {"gen_ai.agent.name": "CEO"})
    try:
        raise ValueError("model exploded")
    except ValueError as error:
        turn.record_exception(error)
        _spans.end(turn, error)
    current: list[Any] = []
    with pytest.raises(RuntimeError, match="boom"):
        call_that_fails(tracer, server, current)
    assert current[0] is current[1]  # the span was current inside
    server.add_link(SpanContext(int(PARENT * 2, 16), int(PARENT, 16), True, TraceFlags(1)), {"why": "retry"})
    server.set_status(StatusCode.OK)
    server.set_status(Status(StatusCode.ERROR, "too late: OK is final"))
    server.end()
    server.end()  # once only
    assert not server.is_recording()
    tracer.start_span("own root").end()


def test_a_turn_shaped_tree_reaches_the_receiver_with_its_fields(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_turn_shaped_tree(light_tracer(monkeypatch, OTEL_SERVICE_NAME="light-test",
                                       OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci"))
    flush_traces()

    [request] = receiver.requests
    resource = values(request.resource_spans[0].resource)
    assert (resource["service.name"], resource["deployment.environment"]) == ("light-test", "ci")
    assert request.resource_spans[0].scope_spans[0].scope.name == "agency_swarm"
    spans = exported(receiver)
    http, turn_span, call_span, root_span = (spans[name] for name in (
        "POST /chats/{chat_id}/messages", "turn CEO", "call", "own root"))
    assert (http.kind, turn_span.kind, call_span.kind, root_span.kind) == (SERVER, INTERNAL, CLIENT, INTERNAL)
    assert {span.trace_id for span in (http, turn_span, call_span)} == {bytes.fromhex(TRACE)}
    assert (http.parent_span_id, http.trace_state) == (bytes.fromhex(PARENT), "vendor=v1")
    assert http.flags & 0x3FF == HAS_IS_REMOTE | IS_REMOTE | SAMPLED  # a remote parent: both bits
    assert turn_span.parent_span_id == call_span.parent_span_id == http.span_id
    assert turn_span.flags & 0x3FF == HAS_IS_REMOTE | SAMPLED
    assert (root_span.parent_span_id, root_span.flags & 0x301) == (b"", HAS_IS_REMOTE | SAMPLED)
    assert root_span.trace_id != http.trace_id
    assert values(http)["tags"] == ["a", "b"]
    assert values(http)["sizes"] == [1, 2, 3]
    assert http.status.code == 1  # OK
    assert 0 < http.start_time_unix_nano <= http.end_time_unix_nano
    [link] = http.links
    assert (link.span_id, values(link), link.flags & 0x300) == (bytes.fromhex(PARENT), {"why": "retry"}, 0x300)
    assert (turn_span.status.code, turn_span.status.message) == (2, "ValueError")
    assert values(turn_span)["error.type"] == "ValueError"
    [event] = turn_span.events
    recorded = values(event)
    assert (event.name, recorded["exception.type"], recorded["exception.message"]) == (
        "exception", "ValueError", "model exploded")
    assert "Traceback" in recorded["exception.stacktrace"]
    assert turn_span.start_time_unix_nano <= event.time_unix_nano <= turn_span.end_time_unix_nano
    assert (call_span.status.code, call_span.status.message) == (2, "RuntimeError: boom")
    assert values(call_span.events[0])["exception.message"] == "boom"


def test_always_off_records_nothing_and_exports_nothing(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    tracer = light_tracer(monkeypatch, OTEL_TRACES_SAMPLER="always_off")
    span = tracer.start_span("dropped", context=remote_parent())
    child = _spans.start(tracer, "dropped child", span, {"a": 1})
    assert not span.is_recording()
    assert not child.is_recording()
    child.end()
    span.end()
    flush_traces()
    assert receiver.paths == []
    [pipeline] = _otel._PIPELINES.values()
    assert pipeline.batcher.dropped == 0  # nothing was queued, not dropped


def test_a_ratio_of_zero_keeps_a_sampled_callers_trace_and_drops_its_own_roots_whole(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0")
    root = tracer.start_span("own root")
    under_root = _spans.start(tracer, "own root child", root, {})
    carrier: dict[str, str] = {}
    inject(carrier, context=trace.set_span_in_context(under_root))
    root_context, child_context = root.get_span_context(), under_root.get_span_context()
    _, trace_id, span_id, flags = carrier["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{child_context.trace_id:032x}", f"{child_context.span_id:016x}")
    assert int(flags, 16) & SAMPLED == 0  # the decision propagates
    assert child_context.trace_id == root_context.trace_id
    assert child_context.span_id != root_context.span_id
    continued = tracer.start_span("continued", context=remote_parent(sampled=True))
    under_continued = _spans.start(tracer, "continued child", continued, {})
    not_sampled = tracer.start_span("caller said no", context=remote_parent(sampled=False))
    for span in (under_root, root, under_continued, continued, not_sampled):
        span.end()
    flush_traces()
    assert set(exported(receiver)) == {"continued", "continued child"}


def test_the_headers_variable_reaches_the_receiver_and_no_log_line_holds_it(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_EXPORTER_OTLP_HEADERS="x-general=only-without-the-traces-one",
                          OTEL_EXPORTER_OTLP_TRACES_HEADERS=f"X-Api-Key={KEY_VALUE},x-tenant=team%20a")
    tracer.start_span("with headers").end()
    flush_traces()
    receiver.answers.append(400)
    tracer.start_span("refused").end()
    with caplog.at_level(logging.INFO):
        flush_traces()
    [sent, refused] = receiver.headers
    assert (sent["x-api-key"], sent["x-tenant"]) == (KEY_VALUE, "team a")
    assert sent["content-type"] == "application/x-protobuf"
    assert "x-general" not in sent
    assert refused["x-api-key"] == KEY_VALUE
    failures = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert failures == ["Span export to the OTLP endpoint failed (HTTP 400)."]  # once, the status only
    assert not any(KEY_VALUE in record.getMessage() or "refused" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_a_compressed_body_decodes(receiver: Receiver, monkeypatch: pytest.MonkeyPatch, compression: str) -> None:
    tracer = light_tracer(monkeypatch, OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=compression.upper())
    span = tracer.start_span("compressed", attributes={"text": "x" * 2000})
    span.end()
    flush_traces()
    assert receiver.headers[0]["content-encoding"] == compression
    assert len(receiver.wire[0]) < len(receiver.raw[0])
    assert receiver.wire[0][:2] == b"\x1f\x8b" if compression == "gzip" else receiver.wire[0][:1] == b"\x78"
    assert values(exported(receiver)["compressed"])["text"] == "x" * 2000


def test_force_flush_exports_every_span_ended_so_far_in_bounded_batches(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_BSP_SCHEDULE_DELAY="600000", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="100")
    for index in range(1000):
        tracer.start_span(f"span {index}").end()
    flush_traces()
    assert len(exported(receiver)) == 1000
    assert all(len(request.resource_spans[0].scope_spans[0].spans) <= 100 for request in receiver.requests)


def test_spans_ended_while_a_full_batch_is_sent_wait_for_the_next_full_batch() -> None:
    """A batch that fills is sent at once; what ends meanwhile is not sent in a small batch of its own when that send
    returns (a post per few spans under load), but with the next full batch, the delay or a flush."""
    sizes: list[int] = []
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()

    def export(batch: list[Any]) -> None:
        sizes.append(len(batch))
        if len(sizes) == 1:
            entered.set()
            assert release.wait(30)
            returned.set()

    batcher = SpanBatcher(export, {"OTEL_BSP_SCHEDULE_DELAY": "600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100"})
    try:
        for index in range(100):
            batcher.add(index)
        assert entered.wait(30), "the full batch was not sent"
        for index in range(30):
            batcher.add(index)
        release.set()
        assert returned.wait(30)
        for index in range(70):
            batcher.add(index)
        assert batcher.force_flush(30_000)
        assert sizes == [100, 100]
        for index in range(5):
            batcher.add(index)
        assert batcher.force_flush(30_000)
        assert sizes == [100, 100, 5]  # a flush sends what is queued, full or not
    finally:
        batcher.shutdown()


def test_a_batch_that_never_fills_is_sent_after_the_schedule_delay() -> None:
    sent: list[list[Any]] = []
    arrived = threading.Event()

    def export(batch: list[Any]) -> None:
        sent.append(batch)
        if sum(map(len, sent)) == 3:
            arrived.set()

    batcher = SpanBatcher(export, {"OTEL_BSP_SCHEDULE_DELAY": "20", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100"})
    try:
        for index in range(3):
            batcher.add(index)
        assert arrived.wait(30), "a partial batch was not sent after the delay"
        assert [item for batch in sent for item in batch] == [0, 1, 2]
    finally:
        batcher.shutdown()


def test_a_full_queue_drops_and_counts_spans_then_later_spans_export(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_BSP_MAX_QUEUE_SIZE="16", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="4",
                          OTEL_BSP_SCHEDULE_DELAY="600000", OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="60")
    [pipeline] = _otel._PIPELINES.values()
    receiver.open.clear()  # the receiver answers nothing: the export thread waits on its first batch
    with caplog.at_level(logging.WARNING):
        for index in range(300):
            tracer.start_span(f"early {index}").end()
            assert len(pipeline.batcher._queue) <= 16
        dropped = pipeline.batcher.dropped
        assert dropped >= 300 - 16 - 4  # at most a full queue and the batch in flight are kept
        receiver.open.set()
        flush_traces()
        for index in range(10):
            tracer.start_span(f"late {index}").end()
        flush_traces()
    names = set(exported(receiver))
    assert len([name for name in names if name.startswith("early")]) == 300 - dropped
    assert {f"late {index}" for index in range(10)} <= names
    warnings = [record.getMessage() for record in caplog.records if "dropped" in record.getMessage()]
    assert 1 <= len(warnings) <= 2, warnings  # per export cycle, not per span
    counts = [int(found[1]) for line in warnings if (found := re.search(r"(\d+) spans dropped", line))]
    assert sum(counts) == dropped


def test_a_503_is_retried_and_the_batch_arrives_once(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tracer = light_tracer(monkeypatch)
    receiver.answers.append(503)
    tracer.start_span("retried").end()
    with caplog.at_level(logging.WARNING):
        flush_traces()
    assert len(receiver.paths) == 2
    assert set(exported(receiver)) == {"retried"}
    assert [record for record in caplog.records if record.levelno >= logging.ERROR] == []


EXIT_SCRIPT = """
from agency_swarm._telemetry._otel import tracer_from_env

tracer = tracer_from_env()
parent = tracer.start_span("at exit 0")
tracer.start_span("at exit 1", context=__import__("opentelemetry.trace").trace.set_span_in_context(parent)).end()
parent.end()
"""


def run_python(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")])
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-c", script], env={**clean, "PYTHONPATH": path, **env},
                          capture_output=True, text=True, timeout=120, check=False)


def test_spans_still_queued_are_exported_at_interpreter_exit() -> None:
    with otlp_receiver() as receiver:
        done = run_python(EXIT_SCRIPT, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                        "OTEL_BSP_SCHEDULE_DELAY": "600000"})
        assert done.returncode == 0, done.stderr
        spans = exported(receiver)
    assert set(spans) == {"at exit 0", "at exit 1"}
    assert spans["at exit 1"].parent_span_id == spans["at exit 0"].span_id


FORK_SCRIPT = """
import os

from agency_swarm._telemetry._otel import flush_traces, tracer_from_env

tracer = tracer_from_env()
tracer.start_span("before fork").end()
child = os.fork()
if child == 0:
    tracer.start_span("in the child").end()
    flush_traces()
    os._exit(0)
os.waitpid(child, 0)
tracer.start_span("in the parent").end()
"""


def test_a_forked_child_exports_its_own_spans_on_a_connection_of_its_own() -> None:
    with otlp_receiver() as receiver:
        done = run_python(FORK_SCRIPT, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                        "OTEL_BSP_SCHEDULE_DELAY": "600000"})
        assert done.returncode == 0, done.stderr
        assert set(exported(receiver)) == {"before fork", "in the child", "in the parent"}  # each once


OWN_PROVIDER_SCRIPT = """
import asyncio, json

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agency_swarm._telemetry import _switch
from agency_swarm._telemetry._otel import flush_traces
from agency_swarm.serving import create_app
from observability_support import build_nested_agency

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


async def main():
    app = create_app(build_nested_agency, store="memory")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        answer = await client.post("/chats/own/messages", json={"message": "hi"})
    flush_traces()
    print(json.dumps({"status": answer.status_code, "tracer": type(_switch.ACTIVE.tracer).__module__,
                      "spans": [span.name for span in exporter.get_finished_spans()]}))


asyncio.run(main())
"""


def test_an_application_tracer_provider_gets_sdk_spans_and_nothing_goes_to_the_variables_endpoint() -> None:
    with otlp_receiver() as receiver:
        done = run_python(OWN_PROVIDER_SCRIPT, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
        assert done.returncode == 0, done.stderr
        assert receiver.paths == []
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["status"] == 200
    assert found["tracer"] == "opentelemetry.sdk.trace"
    assert {"POST /chats/{chat_id}/messages", "turn CEO", "invoke_agent CEO"} <= set(found["spans"])


def test_a_sampled_out_request_runs_its_turn_unwatched_and_a_sampled_one_watched(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a request span sampled out here, the turn asks no sampler, makes no span and gets no watch (the loop
    runs as with telemetry off); under a recorded one it gets its span; under a caller's unsampled `traceparent`
    (remote) the sampler still decides."""
    from agency_swarm._telemetry._switch import Telemetry
    from agency_swarm._telemetry._watch import watch_turn

    tracer = light_tracer(monkeypatch, OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0")
    telemetry = Telemetry(tracer=tracer)
    asked: list[str] = []
    sampler = tracer.sampler

    class Counting:
        def should_sample(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(args[2])
            return sampler.should_sample(*args, **kwargs)

    monkeypatch.setattr(tracer, "sampler", Counting())
    request = tracer.start_span("POST /chats/{chat_id}/messages", kind=SpanKind.SERVER)
    assert not request.is_recording()
    with trace.use_span(request):
        assert watch_turn(telemetry, "CEO", "chat-1") is None
    assert asked == ["POST /chats/{chat_id}/messages"]
    recorded = tracer.start_span("POST /chats/{chat_id}/messages", context=remote_parent(sampled=True))
    with trace.use_span(recorded):
        watch = watch_turn(telemetry, "CEO", "chat-2")
    assert watch is not None
    assert watch.span.is_recording()
    with trace.use_span(trace.get_current_span(remote_parent(sampled=False))):
        assert watch_turn(telemetry, "CEO", "chat-3") is None
    assert asked[-1] == "turn CEO"  # a remote parent: the sampler is asked, and drops it
    local_sampled = trace.NonRecordingSpan(SpanContext(int(TRACE, 16), int(PARENT, 16), False, TraceFlags(SAMPLED)))
    with trace.use_span(local_sampled):  # sampled but not recorded here: the sampler decides (parent-based: keep)
        kept = tracer.start_span("under a sampled local span")
    assert asked[-1] == "under a sampled local span"
    assert kept.is_recording()
    kept.end()
    watch.end(None, paused=False)
    recorded.end()
    flush_traces()
    assert set(exported(receiver)) == {"POST /chats/{chat_id}/messages", "turn CEO", "under a sampled local span"}


@pytest.mark.parametrize("sampler", ["parentbased_always_on", "always_on", "traceidratio"])
def test_a_root_made_without_asking_the_default_sampler_is_the_root_it_would_make(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, sampler: str
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_TRACES_SAMPLER=sampler, OTEL_TRACES_SAMPLER_ARG="1.0")
    assert tracer.roots_sampled is (sampler != "traceidratio")  # any other sampler decides each root itself
    made = []
    for asked in (False, True):
        tracer.roots_sampled = not asked
        made.append(tracer.start_span("root", kind=SpanKind.SERVER, attributes={"a": 1, "": 2, "b": [1, 2]}))
    fast, asked_sampler = made
    for field in ("trace_flags", "trace_state", "parent_id", "remote_parent", "kind", "attributes", "name"):
        assert getattr(fast, field) == getattr(asked_sampler, field), field
    assert fast.trace_flags & SAMPLED


def test_the_environment_requests_reads_is_read_once_when_the_exporter_is_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agency_swarm._telemetry._otlp import Sender, settings_from_env

    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "bypassed.example")
    (tmp_path / ".netrc").write_text("machine collector.example login robot password offline-test-value-2\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))
    proxied = Sender(settings_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.example:4318"})).session
    assert proxied.proxies.get("http") == "http://proxy.example:3128"
    assert proxied.auth == ("robot", "offline-test-value-2")
    assert proxied.trust_env is False  # nothing read again per post
    bypassed = Sender(settings_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://bypassed.example:4318"})).session
    assert "http" not in bypassed.proxies
    assert bypassed.auth is None


class _CountingIds(IdGenerator):
    def __init__(self) -> None:
        self.next = 0

    def generate_span_id(self) -> int:
        self.next += 1
        return self.next

    def generate_trace_id(self) -> int:
        return 0xABC


@pytest.mark.parametrize("roots_sampled", [True, False])
def test_a_providers_own_id_generator_makes_every_id(roots_sampled: bool) -> None:
    ended: list[Any] = []
    tracer = LightTracer(sampling.ALWAYS_ON, _CountingIds(), SpanLimits(), ended.append, roots_sampled=roots_sampled)
    root = tracer.root("root", SpanKind.SERVER, {})
    child = tracer.internal(root, "child", {})
    grandchild = tracer.child(child, "grandchild")
    assert [span.span_id for span in (root, child, grandchild)] == [1, 2, 3]
    assert {span.trace_id for span in (root, child, grandchild)} == {0xABC}


def test_the_sdks_random_ids_are_drawn_as_its_generator_draws_them() -> None:
    tracer = LightTracer(sampling.ALWAYS_ON, RandomIdGenerator(), SpanLimits(), lambda span: None, roots_sampled=True)
    state = random.getstate()
    try:
        random.seed(20261128)
        root = tracer.root("root", SpanKind.SERVER, {})
        child = tracer.internal(root, "child", {})
        random.seed(20261128)
        reference = RandomIdGenerator()
        expected = (reference.generate_trace_id(), reference.generate_span_id(), reference.generate_span_id())
    finally:
        random.setstate(state)
    assert (root.trace_id, root.span_id, child.span_id) == expected
    assert child.trace_id == root.trace_id


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirected_export_is_sent_where_it_is_redirected(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    tracer = light_tracer(monkeypatch, OTEL_BSP_SCHEDULE_DELAY="600000")
    receiver.answers.append(status)
    tracer.start_span("redirected").end()
    flush_traces()
    assert set(exported(receiver)) == {"redirected"}
    assert len(receiver.raw) == 2  # the redirect, then the export where it pointed
    assert receiver.raw[0] == receiver.raw[1]
