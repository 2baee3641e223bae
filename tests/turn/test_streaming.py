"""Streaming: event types and order, stream.result, cancellation and errors mid-stream, to_dict."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest
from agents import function_tool
from pydantic import BaseModel

from agency_swarm import (
    Agency,
    Agent,
    AgentFinished,
    AgentStarted,
    Event,
    MessageSent,
    RawModelEvent,
    TextDelta,
    ToolCalled,
    ToolOutput,
)
from agency_swarm.testing import Fail, ScriptedModel, ToolCall, send_message

# -- helpers -------------------------------------------------------------------------------------------


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_team(*, chat_flows: bool = True, save: Any = None) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    """CEO delegates to Developer, who uses a tool; both answer with several words."""
    ceo_model = ScriptedModel([send_message("Developer", "build the page"), "The page is live now."])
    dev_model = ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "Built it with five parts."])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model, tools=[add])
    agency = Agency([ceo, [ceo, dev]], save_threads_callback=save)
    return agency, ceo_model, dev_model


async def collect(stream: Any) -> list[Event]:
    return [event async for event in stream]


def structural(events: list[Event]) -> list[tuple[str, str, int, str]]:
    """The events without raw and text_delta noise, as (type, agent, depth, caller)."""
    return [
        (event.type, event.agent, event.depth, event.caller)
        for event in events
        if not isinstance(event, RawModelEvent | TextDelta)
    ]


class SaveRecorder:
    def __init__(self) -> None:
        self.snapshots: list[tuple[str, dict[str, list[dict[str, Any]]]]] = []

    def __call__(self, chat_id: str, threads: dict[str, list[dict[str, Any]]]) -> None:
        self.snapshots.append((chat_id, {key: list(items) for key, items in threads.items()}))

    @property
    def last(self) -> dict[str, list[dict[str, Any]]]:
        assert self.snapshots, "the save callback was never called"
        return self.snapshots[-1][1]


def unanswered_calls(threads: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str]]:
    missing: list[tuple[str, str]] = []
    for key, items in threads.items():
        answered = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
        missing += [
            (key, item["call_id"])
            for item in items
            if item.get("type") == "function_call" and item.get("call_id") not in answered
        ]
    return missing


def other_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


# -- event types and order -----------------------------------------------------------------------------


async def test_stream_has_every_event_type_with_its_fields() -> None:
    agency, _, _ = make_team()

    events = await collect(agency.get_response_stream("Build a page"))

    types = {event.type for event in events}
    assert {"agent_started", "text_delta", "tool_called", "tool_output", "message_sent", "agent_finished", "raw"} <= (
        types
    )
    (sent,) = [event for event in events if isinstance(event, MessageSent)]
    assert sent.recipient == "Developer"
    assert sent.message == "build the page"
    assert sent.agent == "CEO"
    send_called, called = [event for event in events if isinstance(event, ToolCalled)]
    assert (send_called.tool, send_called.call_id) == ("send_message", sent.call_id)  # every call has its tool_called
    assert called.tool == "add"
    assert json.loads(called.arguments) == {"a": 2, "b": 3}
    finished = {event.agent: event.output for event in events if isinstance(event, AgentFinished)}
    assert finished == {"Developer": "Built it with five parts.", "CEO": "The page is live now."}
    raws = [event for event in events if isinstance(event, RawModelEvent)]
    assert raws
    assert all(getattr(event.data, "type", None) for event in raws)
    assert any(event.data.type == "response.completed" for event in raws)
    started = [event for event in events if isinstance(event, AgentStarted)]
    assert [(event.agent, event.message) for event in started] == [
        ("CEO", "Build a page"),
        ("Developer", "build the page"),
    ]


async def test_nested_stream_order() -> None:
    agency, _, _ = make_team()

    events = await collect(agency.get_response_stream("Build a page"))

    assert structural(events) == [
        ("agent_started", "CEO", 0, "user"),
        ("tool_called", "CEO", 0, "user"),
        ("message_sent", "CEO", 0, "user"),
        ("agent_started", "Developer", 1, "CEO"),
        ("tool_called", "Developer", 1, "CEO"),
        ("tool_output", "Developer", 1, "CEO"),
        ("agent_finished", "Developer", 1, "CEO"),
        ("tool_output", "CEO", 0, "user"),
        ("agent_finished", "CEO", 0, "user"),
    ]
    outputs = [event for event in events if isinstance(event, ToolOutput)]
    assert [(event.agent, event.tool, event.output) for event in outputs] == [
        ("Developer", "add", "5"),
        ("CEO", "send_message", "Built it with five parts."),
    ]
    (sent,) = [event for event in events if isinstance(event, MessageSent)]
    assert outputs[1].call_id == sent.call_id


async def test_each_recipients_start_and_finish_name_the_send_that_started_it() -> None:
    ceo_model = ScriptedModel([[send_message("Developer", "code"), send_message("QA", "test")], "both done"])
    dev_model = ScriptedModel.each_turn([send_message("QA", "check it"), "dev answer"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model)
    qa = Agent(name="QA", model=ScriptedModel.each_turn(["qa answer"]))

    events = await collect(Agency([ceo, [ceo, dev], [ceo, qa], [dev, qa]]).get_response_stream("go"))

    sends = {(event.agent, event.recipient): event.call_id for event in events if isinstance(event, MessageSent)}
    assert len(set(sends.values())) == 3  # QA is started twice, by two sends
    for event in events:
        if isinstance(event, AgentStarted | AgentFinished):
            expected = None if event.depth == 0 else sends[(event.caller, event.agent)]
            assert event.send_call_id == expected, event
            assert event.to_dict()["send_call_id"] == expected
    starts = [event for event in events if isinstance(event, AgentStarted)]
    assert sorted((event.caller, event.agent) for event in starts) == [
        ("CEO", "Developer"), ("CEO", "QA"), ("Developer", "QA"), ("user", "CEO")
    ]


async def test_raw_and_text_events_of_each_agent_sit_between_its_start_and_finish() -> None:
    agency, _, _ = make_team()

    events = await collect(agency.get_response_stream("Build a page"))

    index = {(event.type, event.agent): i for i, event in enumerate(events) if not isinstance(event, RawModelEvent)}
    dev_start, dev_end = index[("agent_started", "Developer")], index[("agent_finished", "Developer")]
    for i, event in enumerate(events):
        if event.agent == "Developer":
            assert dev_start <= i <= dev_end
            assert event.depth == 1
            assert event.caller == "CEO"
        else:
            assert event.depth == 0
            assert event.caller == "user"


async def test_all_events_carry_chat_id() -> None:
    agency, _, _ = make_team()

    events = await collect(agency.get_response_stream("Build a page", chat_id="chat-42"))

    assert events
    assert {event.chat_id for event in events} == {"chat-42"}


async def test_text_deltas_of_each_agent_join_to_its_final_text() -> None:
    agency, _, _ = make_team()

    events = await collect(agency.get_response_stream("Build a page"))

    deltas: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, TextDelta):
            deltas.setdefault(event.agent, []).append(event.delta)
    assert len(deltas["CEO"]) > 1  # streamed in pieces
    assert "".join(deltas["CEO"]) == "The page is live now."
    assert "".join(deltas["Developer"]) == "Built it with five parts."


async def test_parallel_sends_stream_both_recipients_events() -> None:
    dev_started = asyncio.Event()
    qa_started = asyncio.Event()

    @function_tool
    async def dev_work() -> str:
        """Waits for QA."""
        dev_started.set()
        await qa_started.wait()
        return "code"

    @function_tool
    async def qa_work() -> str:
        """Waits for Developer."""
        qa_started.set()
        await dev_started.wait()
        return "tests"

    ceo_model = ScriptedModel([[send_message("Developer", "code"), send_message("QA", "test")], "both done"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel([ToolCall("dev_work"), "dev answer"]), tools=[dev_work])
    qa = Agent(name="QA", model=ScriptedModel([ToolCall("qa_work"), "qa answer"]), tools=[qa_work])

    stream = Agency([ceo, [ceo, dev], [ceo, qa]]).get_response_stream("go")
    events = await asyncio.wait_for(collect(stream), timeout=10)

    assert stream.result.final_output == "both done"
    ceo_outputs = [event.output for event in events if isinstance(event, ToolOutput) and event.agent == "CEO"]
    assert ceo_outputs == ["dev answer", "qa answer"]
    finished = [event.agent for event in events if isinstance(event, AgentFinished)]
    assert sorted(finished[:2]) == ["Developer", "QA"]
    assert finished[2] == "CEO"
    assert ceo_model.calls[1].tool_outputs == ["dev answer", "qa answer"]


# -- stream.result -------------------------------------------------------------------------------------


def _shape(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(item.get("type"), item.get("role"), item.get("name"), item.get("output"), sorted(item)) for item in items]


async def test_stream_result_equals_get_response_for_same_script() -> None:
    blocking_agency, _, _ = make_team()
    streaming_agency, _, _ = make_team()

    expected = await blocking_agency.get_response("Build a page")
    stream = streaming_agency.get_response_stream("Build a page")
    await collect(stream)
    actual = stream.result

    assert actual.final_output == expected.final_output == "The page is live now."
    assert _shape(actual.new_items) == _shape(expected.new_items)
    assert actual.usage.requests == expected.usage.requests == 4
    assert actual.usage.input_tokens == expected.usage.input_tokens
    assert actual.usage.output_tokens == expected.usage.output_tokens
    assert {name: usage.requests for name, usage in actual.usage_by_agent.items()} == {"CEO": 2, "Developer": 2}
    assert actual.agent == expected.agent == "CEO"
    assert actual.chat_id == expected.chat_id


async def test_stream_result_with_structured_output() -> None:
    class Plan(BaseModel):
        steps: list[str]

    model = ScriptedModel([json.dumps({"steps": ["a", "b"]})])
    agent = Agent(name="Planner", model=model, output_type=Plan)

    stream = agent.get_response_stream("plan")
    events = await collect(stream)

    assert stream.result.final_output == Plan(steps=["a", "b"])
    (finished,) = [event for event in events if isinstance(event, AgentFinished)]
    assert finished.output == Plan(steps=["a", "b"])
    assert finished.to_dict()["output"] == {"steps": ["a", "b"]}


async def test_stream_result_before_exhaustion_raises() -> None:
    agency, _, _ = make_team()
    stream = agency.get_response_stream("Build a page")

    with pytest.raises(RuntimeError):
        _ = stream.result

    seen = 0
    async for _event in stream:
        seen += 1
        if seen == 1:
            with pytest.raises(RuntimeError):
                _ = stream.result
    assert stream.result.final_output == "The page is live now."


async def test_iterating_a_stream_twice_raises() -> None:
    agency, _, _ = make_team()
    stream = agency.get_response_stream("Build a page")
    await collect(stream)

    with pytest.raises(RuntimeError):
        await collect(stream)


async def test_iterating_a_stream_twice_concurrently_raises() -> None:
    agency, _, _ = make_team()
    stream = agency.get_response_stream("Build a page")

    async with stream:
        async for _event in stream:
            with pytest.raises(RuntimeError):
                stream.__aiter__()
            break


# -- cancellation --------------------------------------------------------------------------------------

async def test_breaking_out_early_cancels_turn_cleanly() -> None:
    save = SaveRecorder()
    agency, _, dev_model = make_team(save=save)

    stream = agency.get_response_stream("Build a page", chat_id="c1")
    async for event in stream:
        if isinstance(event, AgentStarted) and event.agent == "Developer":
            break
    await stream.aclose()

    assert save.snapshots
    assert save.snapshots[-1][0] == "c1"
    threads = save.last
    assert threads["user->CEO"][0] == {"role": "user", "content": "Build a page"}
    assert any(item.get("type") == "function_call" for item in threads["user->CEO"])
    assert unanswered_calls(threads) == []
    assert other_tasks() == set()
    assert dev_model.calls == []  # the Developer never reached its model
    assert stream.done


async def test_async_with_and_break_cancels_turn_cleanly() -> None:
    save = SaveRecorder()
    agency, _, _ = make_team(save=save)

    async with agency.get_response_stream("Build a page", chat_id="c2") as stream:
        async for event in stream:
            if isinstance(event, AgentStarted) and event.agent == "Developer":
                break

    assert save.snapshots
    assert unanswered_calls(save.last) == []
    assert any(item.get("type") == "function_call" for item in save.last["user->CEO"])
    assert other_tasks() == set()


async def test_breaking_out_during_parallel_sends_cancels_every_branch() -> None:
    save = SaveRecorder()
    both_running = asyncio.Event()
    running: set[str] = set()
    cancelled: list[str] = []
    never = asyncio.Event()

    def blocking_tool(name: str) -> Any:
        @function_tool(name_override=f"{name.lower()}_work")
        async def work() -> str:
            """Blocks until cancelled."""
            running.add(name)
            if len(running) == 2:
                both_running.set()
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            return "unreachable"

        return work

    ceo = Agent(
        name="CEO", model=ScriptedModel([[send_message("Developer", "code"), send_message("QA", "test")], "done"])
    )
    dev = Agent(
        name="Developer",
        model=ScriptedModel([ToolCall("developer_work"), "dev"]),
        tools=[blocking_tool("Developer")],
    )
    qa = Agent(name="QA", model=ScriptedModel([ToolCall("qa_work"), "qa"]), tools=[blocking_tool("QA")])
    agency = Agency([ceo, [ceo, dev], [ceo, qa]], save_threads_callback=save)

    async def consume_until_both_run(stream: Any) -> None:
        tool_calls = 0
        async for event in stream:
            if isinstance(event, ToolCalled):
                tool_calls += 1
                if tool_calls == 2:
                    await both_running.wait()
                    break

    stream = agency.get_response_stream("go", chat_id="par")
    await asyncio.wait_for(consume_until_both_run(stream), timeout=10)
    await asyncio.wait_for(stream.aclose(), timeout=10)

    assert sorted(cancelled) == ["Developer", "QA"]
    assert save.snapshots
    threads = save.last
    assert {"user->CEO", "CEO->Developer", "CEO->QA"} <= set(threads)
    assert unanswered_calls(threads) == []
    assert other_tasks() == set()


async def test_breaking_out_early_saves_what_was_produced() -> None:
    save = SaveRecorder()
    agency, _, dev_model = make_team(save=save)

    stream = agency.get_response_stream("Build a page", chat_id="c3")
    async for event in stream:
        if isinstance(event, AgentStarted) and event.agent == "Developer":
            break
    await stream.aclose()

    assert stream.done
    assert [chat for chat, _ in save.snapshots] == ["c3"]
    assert save.last["user->CEO"][0] == {"role": "user", "content": "Build a page"}
    assert dev_model.calls == []
    with pytest.raises(RuntimeError):
        _ = stream.result


async def test_breaking_out_during_plain_text_cancels_turn_cleanly() -> None:
    save = SaveRecorder()
    model = ScriptedModel(["a rather long answer in many words"])
    agency = Agency(Agent(name="Solo", model=model), save_threads_callback=save)

    async with agency.get_response_stream("talk", chat_id="c4") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break

    assert stream.done
    assert save.last == {"user->Solo": [{"role": "user", "content": "talk"}]}
    assert other_tasks() == set()


async def test_aclose_on_never_iterated_stream_returns() -> None:
    save = SaveRecorder()
    agency, ceo_model, _ = make_team(save=save)

    stream = agency.get_response_stream("Build a page")
    await asyncio.wait_for(stream.aclose(), timeout=10)

    assert ceo_model.calls == []
    assert stream.done


# -- errors mid-stream ---------------------------------------------------------------------------------


async def test_model_error_mid_stream_raises_and_keeps_what_was_produced() -> None:
    save = SaveRecorder()
    ceo = Agent(name="CEO", model=ScriptedModel([Fail(RuntimeError("boom"), partial_text="Hel")]))
    dev = Agent(name="Developer", model=ScriptedModel(["unused"]))
    agency = Agency([ceo, [ceo, dev]], save_threads_callback=save)

    seen: list[Event] = []
    stream = agency.get_response_stream("Say hello", chat_id="err")

    async def consume() -> None:
        async for event in stream:
            seen.append(event)

    with pytest.raises(RuntimeError, match="boom"):
        await consume()

    assert [event.delta for event in seen if isinstance(event, TextDelta)] == ["Hel"]
    assert seen[0].type == "agent_started"
    assert save.snapshots
    assert save.snapshots[-1][0] == "err"
    assert {"role": "user", "content": "Say hello"} in save.last["user->CEO"]
    with pytest.raises(RuntimeError):
        _ = stream.result
    assert other_tasks() == set()


async def test_model_error_mid_stream_after_tool_call_keeps_answered_calls() -> None:
    save = SaveRecorder()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1}), Fail(RuntimeError("boom"), partial_text="Hel")])
    agent = Agent(name="Solo", model=model, tools=[add])
    agency = Agency(agent, save_threads_callback=save)

    with pytest.raises(RuntimeError, match="boom"):
        await collect(agency.get_response_stream("add"))

    items = save.last["user->Solo"]
    assert [item.get("type", item.get("role")) for item in items] == ["user", "function_call", "function_call_output"]
    assert unanswered_calls(save.last) == []


# -- to_dict -------------------------------------------------------------------------------------------


async def test_every_event_of_a_nested_stream_serialises_to_json() -> None:
    class Verdict(BaseModel):
        ok: bool
        notes: str

    ceo_model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 2}), send_message("QA", "check")], "All good."])
    ceo = Agent(name="CEO", model=ceo_model, tools=[add])
    qa = Agent(name="QA", model=ScriptedModel([json.dumps({"ok": True, "notes": "fine"})]), output_type=Verdict)

    events = await collect(Agency([ceo, [ceo, qa]]).get_response_stream("go", chat_id="json-chat"))

    types_seen: set[str] = set()
    for event in events:
        data = event.to_dict()
        text = json.dumps(data)
        back = json.loads(text)
        assert back["type"] == event.type
        assert back["agent"] == event.agent
        assert back["caller"] == event.caller
        assert back["depth"] == event.depth
        assert back["chat_id"] == "json-chat"
        types_seen.add(back["type"])
        if isinstance(event, RawModelEvent):
            assert back["data"]["type"] == event.data.type
    assert {"agent_started", "text_delta", "tool_called", "tool_output", "message_sent", "agent_finished", "raw"} <= (
        types_seen
    )
    qa_finished = next(e for e in events if isinstance(e, AgentFinished) and e.agent == "QA")
    assert qa_finished.to_dict()["output"] == {"ok": True, "notes": "fine"}
    sent = next(e for e in events if isinstance(e, MessageSent))
    assert sent.to_dict()["recipient"] == "QA"


async def test_recipient_failure_mid_stream_becomes_callers_tool_output_event() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "CEO carries on"]))
    dev = Agent(name="Developer", model=ScriptedModel([Fail(RuntimeError("model down"), partial_text="Hel")]))

    stream = Agency([ceo, [ceo, dev]]).get_response_stream("go")
    events = await collect(stream)

    assert stream.result.final_output == "CEO carries on"
    assert structural(events) == [
        ("agent_started", "CEO", 0, "user"),
        ("tool_called", "CEO", 0, "user"),
        ("message_sent", "CEO", 0, "user"),
        ("agent_started", "Developer", 1, "CEO"),
        ("tool_output", "CEO", 0, "user"),
        ("agent_finished", "CEO", 0, "user"),
    ]
    (output,) = [event.output for event in events if isinstance(event, ToolOutput)]
    assert "Developer" in output
    assert "RuntimeError: model down" in output


def hanging_team(save: SaveRecorder) -> tuple[Agency, asyncio.Event]:
    """CEO sends to Developer, whose tool blocks until cancelled; the event says the tool is running."""
    tool_running = asyncio.Event()
    never = asyncio.Event()

    @function_tool
    async def hang() -> str:
        """Blocks until cancelled."""
        tool_running.set()
        await never.wait()
        return "unreachable"

    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "unused"]))
    dev = Agent(name="Developer", model=ScriptedModel([ToolCall("hang"), "unused"]), tools=[hang])
    return Agency([ceo, [ceo, dev]], save_threads_callback=save), tool_running


async def cancel_when_running(turn: Any, tool_running: asyncio.Event) -> None:
    task = asyncio.ensure_future(turn)
    await asyncio.wait_for(tool_running.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancelling_a_blocking_turn_mid_tool_saves_answered_threads() -> None:
    save = SaveRecorder()
    agency, tool_running = hanging_team(save)
    await cancel_when_running(agency.get_response("go", chat_id="cancel-me"), tool_running)

    assert [chat for chat, _ in save.snapshots] == ["cancel-me"]
    assert {"user->CEO", "CEO->Developer"} <= set(save.last)
    assert unanswered_calls(save.last) == []
    assert other_tasks() == set()


async def test_cancelling_a_streamed_turn_while_a_tool_waits_saves_answered_threads() -> None:
    save = SaveRecorder()
    agency, tool_running = hanging_team(save)
    seen: list[str] = []

    async def read() -> None:
        async for event in agency.get_response_stream("go", chat_id="cancel-me"):
            seen.append(event.type)

    # the cancellation reaches the tool through the stream's generator, where the turn waits
    await cancel_when_running(read(), tool_running)

    assert "tool_called" in seen
    assert "tool_output" not in seen
    assert [chat for chat, _ in save.snapshots] == ["cancel-me"]
    assert unanswered_calls(save.last) == []
    assert other_tasks() == set()


async def test_a_stream_dropped_before_iterating_leaves_no_turn_behind() -> None:
    agency, ceo_model, _ = make_team()
    stream = agency.get_response_stream("Build a page")
    del stream
    gc.collect()  # a turn coroutine made but never awaited would warn here, and warnings are errors
    assert ceo_model.calls == []
    assert (await agency.get_response("Build a page")).final_output == "The page is live now."


async def test_drive_lets_a_turn_await_while_it_unwinds_and_drops_what_it_emits_then() -> None:
    from agency_swarm._turn._channel import ReaderLeft, drive, to_reader

    def started(message: str) -> AgentStarted:
        return AgentStarted(agent="A", caller="user", depth=0, chat_id="c", message=message)

    unwound: list[str] = []

    async def turn() -> None:
        try:
            await to_reader(started("read"))
            await to_reader(started("never read"))
        except ReaderLeft:
            await asyncio.sleep(0)  # the clean-up may await (a store write, a lock)
            await to_reader(started("emitted while unwinding"))  # and what it emits then goes nowhere
            unwound.append("cleaned up")
            raise

    events = drive(turn)
    first = await anext(events)
    await events.aclose()
    assert first.message == "read"
    assert unwound == ["cleaned up"]
