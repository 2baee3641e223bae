"""Tracing through the SDK's tracing API: the tree of one turn, as a recording processor sees it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from unittest.mock import ANY

import agents
import pytest
from agents import TracingProcessor, function_tool, response_span
from agents.tracing import Span, Trace
from openai.types.responses import ResponseFunctionToolCall

from agency_swarm import Agency, Agent
from agency_swarm.testing import ModelCall, ScriptedModel, ToolCall, send_message


class Recorder(TracingProcessor):
    def __init__(self) -> None:
        self.traces_started: list[Trace] = []
        self.traces_ended: list[Trace] = []
        self.spans_started: list[Span[Any]] = []
        self.spans_ended: list[Span[Any]] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces_started.append(trace)

    def on_trace_end(self, trace: Trace) -> None:
        self.traces_ended.append(trace)

    def on_span_start(self, span: Span[Any]) -> None:
        self.spans_started.append(span)

    def on_span_end(self, span: Span[Any]) -> None:
        self.spans_ended.append(span)

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None

    def of_type(self, kind: str) -> list[Span[Any]]:
        return [span for span in self.spans_ended if span.span_data.type == kind]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recording = Recorder()
    agents.set_trace_processors([recording])  # replaces the exporter: nothing leaves the machine
    agents.set_tracing_disabled(False)
    try:
        yield recording
    finally:
        agents.set_tracing_disabled(True)
        agents.set_trace_processors([])


@function_tool
def build(page: str) -> str:
    """Build a page."""
    return f"built {page}"


class SpanningModel(ScriptedModel):
    """Creates a response span the way the SDK's OpenAI models do: under whatever span is current."""

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        tracing = args[6]
        with response_span(disabled=tracing.is_disabled()):
            return await super().get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        tracing = args[6]
        with response_span(disabled=tracing.is_disabled()):
            async for event in super().stream_response(*args, **kwargs):
                yield event


def agency() -> Agency:
    ceo = Agent(name="CEO", model=SpanningModel.each_turn([send_message("Developer", "build home"), "shipped"]))
    dev = Agent(
        name="Developer", tools=[build],
        model=SpanningModel.each_turn([ToolCall("build", {"page": "home"}), "built it"]),
    )
    return Agency([ceo, [ceo, dev]])


def check_tree(recorder: Recorder, chat_id: str) -> None:
    [trace] = recorder.traces_started
    assert recorder.traces_ended == [trace]
    assert trace.export()["group_id"] == chat_id  # type: ignore[index]
    assert len(recorder.spans_started) == len(recorder.spans_ended)  # every span was closed
    assert {span.trace_id for span in recorder.spans_ended} == {trace.trace_id}
    by_id = {span.span_id: span for span in recorder.spans_ended}

    ceo, dev = sorted(recorder.of_type("agent"), key=lambda span: span.span_data.name)
    assert (ceo.span_data.name, dev.span_data.name) == ("CEO", "Developer")
    assert ceo.parent_id is None  # directly under the trace
    assert ceo.span_data.tools == ["send_message"]
    [send] = recorder.of_type("custom")
    assert send.span_data.name == "send_message"
    assert send.parent_id == ceo.span_id
    data = send.span_data.data
    assert data == {"caller": "CEO", "recipient": "Developer", "depth": 1, "chat_id": chat_id, "call_id": ANY}
    assert dev.parent_id == send.span_id
    [tool] = recorder.of_type("function")
    assert tool.parent_id == dev.span_id
    assert (tool.span_data.name, tool.span_data.input, tool.span_data.output) == (
        "build", '{"page": "home"}', "built home",
    )
    responses = recorder.of_type("response")
    assert len(responses) == 4  # two model calls per agent, each under its own agent's span
    assert sorted(by_id[span.parent_id].span_data.name for span in responses if span.parent_id) == [
        "CEO", "CEO", "Developer", "Developer",
    ]


async def test_one_trace_per_turn_with_agent_send_and_tool_spans(recorder: Recorder) -> None:
    result = await agency().get_response("ship it", chat_id="t1")
    assert result.final_output == "shipped"
    check_tree(recorder, "t1")


async def test_a_streamed_turn_makes_the_same_tree(recorder: Recorder) -> None:
    stream = agency().get_response_stream("ship it", chat_id="t2")
    async for _ in stream:
        pass
    check_tree(recorder, "t2")
    assert agents.get_current_span() is None  # nothing of the turn stays current in the caller's context


async def test_a_turn_inside_the_callers_trace_adds_to_it(recorder: Recorder) -> None:
    with agents.trace("my workflow") as mine:
        await agency().get_response("ship it", chat_id="t3")
    assert recorder.traces_started == [mine]
    assert {span.trace_id for span in recorder.spans_ended} == {mine.trace_id}
    assert len(recorder.of_type("agent")) == 2


async def test_no_spans_when_tracing_is_off(recorder: Recorder) -> None:
    agents.set_tracing_disabled(True)
    await agency().get_response("ship it", chat_id="t4")
    assert recorder.traces_started == []
    assert recorder.spans_started == []


async def test_a_failing_recipient_marks_its_spans_with_the_error(recorder: Recorder) -> None:
    def broken(call: ModelCall) -> Any:
        raise RuntimeError("model exploded")

    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "go"), "sorry"]))
    dev = Agent(name="Developer", model=ScriptedModel(broken))
    result = await Agency([ceo, [ceo, dev]]).get_response("go", chat_id="t5")
    assert result.final_output == "sorry"
    [send] = recorder.of_type("custom")
    assert send.error is not None
    assert "model exploded" in send.error["message"]
    dev_span = next(span for span in recorder.of_type("agent") if span.span_data.name == "Developer")
    assert dev_span.error is not None


def test_offline_turns_with_only_the_openai_exporter_and_no_key_make_no_trace() -> None:
    from agents.tracing.processors import BatchTraceProcessor, default_exporter

    from agency_swarm._turn._tracing import open_trace

    agents.set_tracing_disabled(False)
    agents.set_trace_processors([BatchTraceProcessor(default_exporter())])  # the SDK's default set-up
    try:
        assert open_trace("CEO", "c") is None  # it would only be dropped with "OPENAI_API_KEY is not set"
        agents.add_trace_processor(Recorder())  # someone listens: trace
        turn_trace = open_trace("CEO", "c")
        assert turn_trace is not None
        turn_trace.trace.finish()
    finally:
        agents.set_tracing_disabled(True)
        agents.set_trace_processors([])


async def test_a_failing_tool_marks_its_function_span(recorder: Recorder) -> None:
    @function_tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    ops = Agent(name="Ops", tools=[explode], model=ScriptedModel.each_turn([ToolCall("explode"), "it failed"]))
    result = await Agency(ops).get_response("go", chat_id="t6")
    assert result.final_output == "it failed"
    [tool] = recorder.of_type("function")
    assert tool.error is not None
    assert tool.error["data"]["tool_name"] == "explode"  # the SDK redacts the details in spans


async def test_a_namespaced_call_names_its_function_span_by_namespace_and_name(recorder: Recorder) -> None:
    @function_tool
    def lookup(q: str) -> str:
        """Look a record up."""
        return f"record {q}"

    tools = [
        *agents.tool_namespace(name="crm", description="Customer records.", tools=[lookup]),
        *agents.tool_namespace(name="billing", description="Invoices.", tools=[lookup]),
    ]
    crm_call = ResponseFunctionToolCall(
        type="function_call", id="fc_1", call_id="call_1", name="lookup", arguments='{"q": "x"}', namespace="crm",
    )
    ops = Agent(name="Ops", tools=tools, model=ScriptedModel.each_turn([crm_call, "found"]))
    assert (await Agency(ops).get_response("go", chat_id="t-ns")).final_output == "found"
    [tool] = recorder.of_type("function")
    assert tool.span_data.name == "crm.lookup"
