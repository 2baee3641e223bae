"""A turn started with an id is never started twice: run again, it returns its result or goes on where it stopped."""

from __future__ import annotations

from typing import Any

import pytest
from agents import function_tool

from agency_swarm import Agency, Agent, ConfigError, FileThreadStore, MemoryThreadStore, SQLThreadStore
from agency_swarm.testing import Fail, ModelCall, ScriptedModel, Step, ToolCall

side_effects: list[str] = []


@function_tool
def record(note: str) -> str:
    """Record a note."""
    side_effects.append(note)
    return f"recorded {note}"


def flaky(fail_after_tool: list[bool]) -> ScriptedModel:
    """Calls `record`, then answers; the answer fails once while `fail_after_tool` holds True."""

    def step(call: ModelCall) -> Step:
        if not call.tool_outputs:
            return ToolCall("record", {"note": call.last_user_message})
        if fail_after_tool and fail_after_tool.pop():
            return Fail(RuntimeError("the model went away"))
        return f"done: {call.last_user_message}"

    return ScriptedModel(step)


def user_messages(threads: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [item["content"] for item in threads["user->A"] if item.get("role") == "user" and "type" not in item]


async def test_a_finished_turn_run_again_returns_its_result_without_running_anything() -> None:
    side_effects.clear()
    model = flaky([])
    agency = Agency(Agent(name="A", model=model, tools=[record]))
    first = await agency.get_response("hello", chat_id="c", turn_id="t-1")
    again = await agency.get_response("hello", chat_id="c", turn_id="t-1")
    assert first.final_output == again.final_output == "done: hello"
    assert again.new_items == first.new_items
    assert all(item.get("type") != "agency_swarm.turn_started" for item in again.new_items)
    assert len(model.calls) == 2
    assert side_effects == ["hello"]
    assert user_messages(await agency.get_threads("c")) == ["hello"]


async def test_an_unfinished_turn_run_again_goes_on_from_its_last_stored_item() -> None:
    side_effects.clear()
    model = flaky([True])
    agency = Agency(Agent(name="A", model=model, tools=[record]))
    with pytest.raises(RuntimeError, match="the model went away"):
        await agency.get_response("hello", chat_id="c", turn_id="t-1")
    result = await agency.get_response("hello", chat_id="c", turn_id="t-1")
    assert result.final_output == "done: hello"
    assert side_effects == ["hello"]  # the tool's output was stored: it never runs again
    assert user_messages(await agency.get_threads("c")) == ["hello"]
    assert len(model.calls[-1].input) == 3  # the message, the call, its output: nothing twice, nothing missing


async def test_another_turn_id_or_none_starts_a_new_turn() -> None:
    side_effects.clear()
    agency = Agency(Agent(name="A", model=flaky([]), tools=[record]))
    await agency.get_response("one", chat_id="c", turn_id="t-1")
    await agency.get_response("two", chat_id="c", turn_id="t-2")
    await agency.get_response("three", chat_id="c")
    assert user_messages(await agency.get_threads("c")) == ["one", "two", "three"]


@pytest.mark.parametrize("store", ["memory", "file", "sqlite"])
async def test_an_id_retried_after_other_turns_is_still_its_one_turn(store: str, tmp_path: Any) -> None:
    """One turn per id and chat, whatever came between: the id is looked up among all of the thread's marks."""
    side_effects.clear()
    model = flaky([])
    agency = Agency(Agent(name="A", model=model, tools=[record]), thread_store=store_for(store, tmp_path))
    first = await agency.get_response("one", chat_id="c", turn_id="t-1")
    await agency.get_response("two", chat_id="c", turn_id="t-2")
    await agency.get_response("three", chat_id="c")
    calls = len(model.calls)
    again = await agency.get_response("one", chat_id="c", turn_id="t-1")  # no longer the last turn with an id
    stream = agency.get_response_stream("two", chat_id="c", turn_id="t-2")
    streamed = [event.type async for event in stream]
    assert (again.final_output, again.new_items) == (first.final_output, first.new_items)
    assert stream.result.final_output == "done: two"
    assert streamed == ["tool_called", "tool_output", "agent_finished"]
    assert len(model.calls) == calls  # nothing ran again
    assert side_effects == ["one", "two", "three"]
    assert user_messages(await agency.get_threads("c")) == ["one", "two", "three"]
    await agency.aclose()


def store_for(kind: str, tmp_path: Any) -> Any:
    if kind == "file":
        return FileThreadStore(tmp_path / "chats")
    if kind == "sqlite":
        return SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    return MemoryThreadStore()


async def test_an_id_names_one_turn_of_the_chat_whichever_entry_point_it_went_to() -> None:
    a = Agent(name="A", model=ScriptedModel(lambda call: f"A: {call.last_user_message}"))
    b = Agent(name="B", model=ScriptedModel(lambda call: f"B: {call.last_user_message}"))
    agency = Agency([a, b])
    await agency.get_response("hello", recipient_agent="A", chat_id="c", turn_id="t-1")
    with pytest.raises(ConfigError, match="already names a turn of chat 'c' addressed to 'A'"):
        await agency.get_response("hello", recipient_agent="B", chat_id="c", turn_id="t-1")
    assert not (await agency.get_threads("c")).get("user->B")


async def test_another_process_on_the_store_returns_the_stored_result(tmp_path: Any) -> None:
    side_effects.clear()
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    first = Agency(Agent(name="A", model=flaky([]), tools=[record]), thread_store=SQLThreadStore(url))
    await first.get_response("hello", chat_id="c", turn_id="t-1")
    await first.aclose()
    model = flaky([])
    second = Agency(Agent(name="A", model=model, tools=[record]), thread_store=SQLThreadStore(url))
    again = await second.get_response("hello", chat_id="c", turn_id="t-1")
    await second.aclose()
    assert again.final_output == "done: hello"
    assert model.calls == []
    assert side_effects == ["hello"]


async def test_a_streamed_turn_run_again_streams_its_calls_and_its_end_again_without_running_them() -> None:
    side_effects.clear()
    agency = Agency(Agent(name="A", model=flaky([]), tools=[record]))
    await agency.get_response("hello", chat_id="c", turn_id="t-1")
    stream = agency.get_response_stream("hello", chat_id="c", turn_id="t-1")
    events = [event.to_dict() async for event in stream]
    call_id = events[0].get("call_id")
    assert [(event["type"], event.get("call_id")) for event in events] == [
        ("tool_called", call_id), ("tool_output", call_id), ("agent_finished", None)
    ]
    assert events[1]["output"] == "recorded hello"
    assert events[2]["output"] == "done: hello"
    assert stream.result.final_output == "done: hello"
    assert side_effects == ["hello"]  # rebuilt from the stored items: the tool did not run again


@pytest.mark.parametrize("bad", ["", "   ", "x" * 201, 7])
async def test_a_bad_turn_id_is_refused_before_anything_runs(bad: Any) -> None:
    model = flaky([])
    agency = Agency(Agent(name="A", model=model, tools=[record]))
    with pytest.raises(ConfigError, match="turn_id must be a non-blank str"):
        await agency.get_response("hello", chat_id="c", turn_id=bad)
    assert model.calls == []


async def test_a_resume_with_an_id_is_not_run_twice_and_keeps_its_decisions() -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    def step(call: ModelCall) -> Step:
        return ToolCall("deploy", {"target": "prod"}) if not call.tool_outputs else "deployed"

    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[deploy]))
    paused = await agency.get_response("ship it", chat_id="c")
    [waiting] = paused.interruptions
    first = await agency.resume("c", approve=[waiting.call_id], turn_id="r-1")
    again = await agency.resume("c", approve=[waiting.call_id], turn_id="r-1")  # the call no longer waits: fine
    assert first.final_output == again.final_output == "deployed"
    assert again.new_items == first.new_items
    assert ran == ["prod"]


async def test_a_resume_cut_short_goes_on_with_the_same_id_and_runs_nothing_twice() -> None:
    ran: list[str] = []
    fail = [True]

    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    def step(call: ModelCall) -> Step:
        if not call.tool_outputs:
            return ToolCall("deploy", {"target": "prod"})
        if fail and fail.pop():
            return Fail(RuntimeError("the model went away"))
        return "deployed"

    agency = Agency(Agent(name="A", model=ScriptedModel(step), tools=[deploy]))
    [waiting] = (await agency.get_response("ship it", chat_id="c")).interruptions
    with pytest.raises(RuntimeError, match="went away"):
        await agency.resume("c", approve=[waiting.call_id], turn_id="r-1")
    result = await agency.resume("c", approve=[waiting.call_id], turn_id="r-1")
    assert result.final_output == "deployed"
    assert ran == ["prod"]
    outputs = [i for i in (await agency.get_threads("c"))["user->A"] if i.get("type") == "function_call_output"]
    assert [output["output"] for output in outputs] == ["deployed prod"]
