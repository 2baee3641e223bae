"""CPU per traced one-agent turn: the four spans of a turn (HTTP SERVER span, turn, invoke_agent, chat), made the way
the server makes them, with the light pipeline agency_swarm makes from the OTLP variables and with the OpenTelemetry
SDK (TracerProvider + BatchSpanProcessor + OTLPSpanExporter), both exporting over HTTP to a receiver in another
process that reads each export and discards it.

A round makes TURNS turns (fewer spans than the SDK's queue holds, so neither drops any), then flushes; its cost is
the process's CPU time (every thread: the caller's and the export thread's encoding and sending) over the round,
divided by the turns. Rounds of the two pipelines alternate; a cell is the median round (min–max in brackets).

    python benchmarks/span_cost.py [--rounds 15] [--turns 400]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from agency_swarm._telemetry import _spans
from agency_swarm._telemetry._otlp import LightPipeline

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Discard)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextmanager
def discarding_receiver() -> Iterator[str]:
    """An OTLP/HTTP endpoint in a process of its own: its CPU is not this process's."""
    process = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1/traces"
    finally:
        process.terminate()
        process.wait(10)


def one_turn(tracer: Any, index: int) -> None:
    """The spans of a one-agent turn as the server makes them: each child started from its parent."""
    http = tracer.start_span(
        "POST /chats/{chat_id}/messages", kind=SpanKind.SERVER,
        attributes={"http.request.method": "POST", "http.route": "/chats/{chat_id}/messages",
                    "agency_swarm.request_id": f"{index:032x}"},
    )
    turn = _spans.start(tracer, "turn CEO", http, {"agency_swarm.chat_id": f"chat-{index}",
                                                   "gen_ai.agent.name": "CEO"})
    agent = _spans.start(tracer, "invoke_agent CEO", turn, {"gen_ai.operation.name": "invoke_agent",
                                                           "gen_ai.agent.name": "CEO"})
    chat = _spans.start(tracer, "chat gpt-4o", agent, {"gen_ai.operation.name": "chat",
                                                      "gen_ai.request.model": "gpt-4o"})
    chat.set_attribute("gen_ai.usage.input_tokens", 1000 + index % 500)
    chat.set_attribute("gen_ai.usage.output_tokens", 100 + index % 50)
    _spans.end(chat)
    _spans.end(agent)
    turn.set_attribute("agency_swarm.turn.outcome", "completed")
    _spans.end(turn)
    http.set_attribute("http.response.status_code", 200)
    if index < 0:
        http.set_status(Status(StatusCode.ERROR))
    http.end()


def one_round(tracer: Any, flush: Callable[[], Any], turns: int) -> tuple[float, float]:
    """(all threads' CPU, the caller's CPU) per turn in µs, for `turns` turns and a flush."""
    process, caller = time.process_time(), time.thread_time()
    for index in range(turns):
        one_turn(tracer, index)
    caller = time.thread_time() - caller
    flush()
    return (time.process_time() - process) / turns * 1e6, caller / turns * 1e6


def sdk_pipeline(url: str) -> tuple[Any, Callable[[], Any]]:
    provider = TracerProvider(resource=Resource.create({"service.name": "span-cost"}), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider.get_tracer("agency_swarm"), provider.force_flush


def light_pipeline(url: str) -> tuple[Any, Callable[[], Any]]:
    provider = TracerProvider(resource=Resource.create({"service.name": "span-cost"}), shutdown_on_exit=False)
    pipeline = LightPipeline(provider, ("agency_swarm", "bench"), {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url})
    return pipeline.tracer, pipeline.force_flush


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}–{max(values):,.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=400, help="turns per round (4 spans each; at most 512)")
    args = parser.parse_args()
    turns = min(args.turns, 512)  # 4 spans a turn: the SDK's queue (2048) never overflows
    with discarding_receiver() as url:
        pipelines = {"light (agency_swarm)": light_pipeline(url), "OpenTelemetry SDK": sdk_pipeline(url)}
        for tracer, flush in pipelines.values():  # warm up: connections, caches, imports
            one_round(tracer, flush, turns)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in pipelines}
        for _ in range(args.rounds):
            for name, (tracer, flush) in pipelines.items():
                results[name].append(one_round(tracer, flush, turns))
    print(f"CPU per 4-span turn, µs: median of {args.rounds} rounds of {turns} turns (min–max)\n")
    print("| pipeline | total (all threads) | in the caller (start, attributes, end) | export (total − caller) |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        totals, callers = [row[0] for row in rows], [row[1] for row in rows]
        print(f"| {name} | {cell(totals)} | {cell(callers)} | {cell([t - c for t, c in rows])} |")


if __name__ == "__main__":
    main()
