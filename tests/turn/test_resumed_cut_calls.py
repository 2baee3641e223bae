"""A turn that goes on after a crash streams the calls of its last response with their outputs (the "interrupted" one
for a call the crash cut short, the stored one for a call that ended before it): a consumer that pairs each
`tool_called` with its `tool_output` (a durable turn's reader, across the worker's death) is never left with a call
that never ends, nor an output without its call, however far the dead run got in streaming them."""

from __future__ import annotations

from agents import function_tool

from agency_swarm import Agency, Agent, MemoryThreadStore
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT, turn_mark
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall

ran: list[str] = []


@function_tool
def record(note: str) -> str:
    """Record a note."""
    ran.append(note)
    return f"recorded {note}"


def step(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return ToolCall("record", {"note": call.last_user_message})
    return f"done: {call.last_user_message}"


async def test_a_turn_going_on_after_a_cut_call_streams_the_call_and_its_interrupted_output() -> None:
    ran.clear()
    store = MemoryThreadStore()
    call = {"type": "function_call", "id": "fc_cut", "call_id": "call_cut", "name": "record",
            "arguments": '{"note": "hello"}'}
    await store.append("c", "user->A", [turn_mark("t-1"), {"role": "user", "content": "hello"}, call])  # then a crash
    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[record]), thread_store=store)
    stream = agency.get_response_stream("hello", chat_id="c", turn_id="t-1")
    events = [event.to_dict() async for event in stream]
    about_the_call = [(event["type"], event.get("output")) for event in events if event.get("call_id") == "call_cut"]
    assert about_the_call == [("tool_called", None), ("tool_output", INTERRUPTED_OUTPUT)]
    called = next(event for event in events if event["type"] == "tool_called")
    assert (called["tool"], called["arguments"], called["agent"]) == ("record", '{"note": "hello"}', "A")
    assert stream.result.final_output == "done: hello"
    assert ran == []  # cut short, never run again


async def test_a_turn_going_on_after_a_call_ended_streams_the_call_and_its_stored_output() -> None:
    ran.clear()
    store = MemoryThreadStore()
    call = {"type": "function_call", "id": "fc_done", "call_id": "call_done", "name": "record",
            "arguments": '{"note": "hello"}'}
    output = {"type": "function_call_output", "call_id": "call_done", "output": "recorded hello"}
    await store.append("c", "user->A", [turn_mark("t-1"), {"role": "user", "content": "hello"}, call, output])
    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[record]), thread_store=store)
    stream = agency.get_response_stream("hello", chat_id="c", turn_id="t-1")
    events = [event.to_dict() async for event in stream]
    about_the_call = [(event["type"], event.get("output")) for event in events if event.get("call_id") == "call_done"]
    assert about_the_call == [("tool_called", None), ("tool_output", "recorded hello")]
    assert stream.result.final_output == "done: hello"
    assert ran == []  # its output was stored: never run again


async def test_a_turn_with_an_id_going_on_streams_every_call_it_made_not_only_the_last_responses() -> None:
    """A durable turn writes its events in batches: a crash can cut the events of an earlier response too."""
    ran.clear()
    store = MemoryThreadStore()
    first = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "record",
             "arguments": '{"note": "one"}'}
    thinking = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "one more", "annotations": []}]}
    second = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "record",
              "arguments": '{"note": "two"}'}
    await store.append("c", "user->A", [
        turn_mark("t-1"), {"role": "user", "content": "hello"},
        first, {"type": "function_call_output", "call_id": "call_1", "output": "recorded one"},
        thinking, second, {"type": "function_call_output", "call_id": "call_2", "output": "recorded two"},
    ])  # then a crash, before the answer and before any of it was streamed
    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[record]), thread_store=store)
    stream = agency.get_response_stream("hello", chat_id="c", turn_id="t-1")
    events = [event.to_dict() async for event in stream]
    calls = [(event["type"], event["call_id"]) for event in events if event["type"] in ("tool_called", "tool_output")]
    assert calls == [("tool_called", "call_1"), ("tool_output", "call_1"), ("tool_called", "call_2"),
                     ("tool_output", "call_2")]
    assert stream.result.final_output == "done: hello"
    assert ran == []
