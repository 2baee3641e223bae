"""An approval inside an agent tool (`agent.as_tool(...)`) pauses the turn that called it; resume continues the
nested run; nothing it leaves in the SDK's process-wide store reaches another agency, chat or call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import FunctionTool
from openai.types.responses import ResponseFunctionToolCall

from agency_swarm import (
    Agency,
    Agent,
    ApprovalRequested,
    ChatPaused,
    ConfigError,
    FileThreadStore,
    Interruption,
    function_tool,
)
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

ran: list[str] = []


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(f"delete {path}")
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def outer_call(call_id: str = "call_out") -> ResponseFunctionToolCall:
    """The entry agent's call of the agent tool, with a fixed signature (call id, item id, arguments)."""
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{call_id}", call_id=call_id, name="clean_up",
        arguments='{"input": "remove a.txt"}', status="completed",
    )


def cleaner_tool(script: list[Any] | None = None) -> tuple[FunctionTool, ScriptedModel]:
    """A plain SDK agent that deletes with approval, as the tool `clean_up`."""
    model = ScriptedModel.each_turn(script or [ToolCall("delete_file", {"path": "a.txt"}), "removed a.txt"])
    cleaner = SdkAgent(name="Cleaner", tools=[delete_file], model=model)
    return cleaner.as_tool("clean_up", "Clean up files."), model


def solo(store: Any = None, call_id: str = "call_out") -> tuple[Agency, ScriptedModel, ScriptedModel]:
    tool, cleaner_model = cleaner_tool()
    model = ScriptedModel.each_turn([outer_call(call_id), "all clean"])
    return Agency(Agent(name="Main", tools=[tool], model=model), thread_store=store), model, cleaner_model


def outputs_of(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}


async def paused_turn(agency: Agency, chat_id: str, stream: bool) -> tuple[Any, list[Any]]:
    if not stream:
        return await agency.get_response("tidy up", chat_id=chat_id), []
    response = agency.get_response_stream("tidy up", chat_id=chat_id)
    events = [event async for event in response]
    return response.result, events


async def resumed(agency: Agency, chat_id: str, stream: bool, **decisions: Any) -> tuple[Any, list[Any]]:
    if not stream:
        return await agency.resume(chat_id, **decisions), []
    response = agency.resume_stream(chat_id, **decisions)
    events = [event async for event in response]
    return response.result, events


# -- the pause ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_an_approval_inside_an_agent_tool_pauses_the_calling_turn(stream: bool) -> None:
    agency, model, _ = solo()
    result, events = await paused_turn(agency, "c", stream)
    assert result.paused
    assert result.final_output is None
    [waiting] = result.interruptions
    assert waiting == Interruption(
        agent="Cleaner", caller="Main", depth=1, chat_id="c", call_id=waiting.call_id, tool="delete_file",
        arguments='{"path": "a.txt"}',
    )
    assert ran == []
    assert len(model.calls) == 1  # the outer model never read a "None" output
    items = agency.thread_manager.get_threads("c")["user->Main"]
    assert outputs_of(items) == {}
    assert [item for item in result.new_items if str(item.get("type", "")).startswith("agency_swarm.")] == []
    if stream:
        requests = [event for event in events if isinstance(event, ApprovalRequested)]
        assert [(event.agent, event.caller, event.depth, event.call_id) for event in requests] == [
            ("Cleaner", "Main", 1, waiting.call_id)
        ]
        assert events[-1].type == "approval_requested"


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_approving_continues_the_nested_run_then_the_calling_turn(stream: bool) -> None:
    agency, model, cleaner_model = solo()
    paused, _ = await paused_turn(agency, "c", stream)
    result, events = await resumed(agency, "c", stream, approve=[paused.interruptions[0].call_id])
    assert result.final_output == "all clean"
    assert ran == ["delete a.txt"]
    assert len(cleaner_model.calls) == 2  # the nested run went on; its agent was not started again
    assert cleaner_model.calls[-1].tool_outputs == ["deleted a.txt"]
    assert model.calls[-1].tool_outputs == ["removed a.txt"]
    if stream:
        assert [(event.type, event.output) for event in events if event.type == "tool_output"] == [
            ("tool_output", "removed a.txt")
        ]


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_the_agent_tools_model_calls_count_in_the_turns_usage_under_its_agent(stream: bool) -> None:
    agency, _, _ = solo()
    paused, _ = await paused_turn(agency, "c", stream)
    assert {name: usage.requests for name, usage in paused.usage_by_agent.items()} == {"Main": 1, "Cleaner": 1}
    result, _ = await resumed(agency, "c", stream, approve=[paused.interruptions[0].call_id])
    # as Runner's run context: the resumed turn's usage goes on from the pause, the nested run's calls included
    assert {name: usage.requests for name, usage in result.usage_by_agent.items()} == {"Main": 2, "Cleaner": 2}
    assert result.usage.requests == 4
    assert len(result.usage.request_usage_entries) == 4


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_rejecting_tells_the_nested_agent_and_never_runs_the_tool(stream: bool) -> None:
    agency, model, cleaner_model = solo()
    paused, _ = await paused_turn(agency, "c", stream)
    result, _ = await resumed(agency, "c", stream, reject=[paused.interruptions[0].call_id])
    assert result.final_output == "all clean"
    assert ran == []
    assert cleaner_model.calls[-1].tool_outputs == ["Tool execution was not approved."]
    assert model.calls[-1].tool_outputs == ["removed a.txt"]


# -- nothing left in the SDK's process-wide store ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_another_agency_with_the_same_call_signature_runs_its_own_agent_tool(stream: bool) -> None:
    first, _, _ = solo()
    paused, _ = await paused_turn(first, "c", stream)  # never resumed: its nested run stays paused
    assert paused.paused
    second, model, cleaner_model = solo()  # the same call id, item id and arguments
    result, _ = await paused_turn(second, "c", stream)
    assert len(cleaner_model.calls) == 1  # its own agent ran, instead of finding the first one's paused run
    assert [item.tool for item in result.interruptions] == ["delete_file"]
    again, _ = await resumed(second, "c", stream, approve=[result.interruptions[0].call_id])
    assert again.final_output == "all clean"
    assert model.calls[-1].tool_outputs == ["removed a.txt"]


async def test_the_same_agency_and_call_in_two_chats_keeps_their_nested_runs_apart() -> None:
    agency, _, cleaner_model = solo()
    one = await agency.get_response("tidy up", chat_id="one")
    two = await agency.get_response("tidy up", chat_id="two")
    assert one.paused
    assert two.paused
    assert len(cleaner_model.calls) == 2  # each chat's call ran the agent
    rejected = await agency.resume("two", reject=[two.interruptions[0].call_id])
    assert rejected.final_output == "all clean"
    assert ran == []
    approved = await agency.resume("one", approve=[one.interruptions[0].call_id])
    assert approved.final_output == "all clean"
    assert ran == ["delete a.txt"]


# -- resume: what is waiting, after a restart, and when undecided ------------------------------------------------


async def test_a_paused_nested_run_survives_a_restart_without_the_user_context(tmp_path: Path) -> None:
    agency, _, _ = solo(FileThreadStore(tmp_path))
    paused = await agency.get_response("tidy up", chat_id="r", context={"api_token": "s3cret"})
    call_id = paused.interruptions[0].call_id
    await agency.aclose()
    assert "s3cret" not in json.dumps(await FileThreadStore(tmp_path).load("r"))

    restarted, model, cleaner_model = solo(FileThreadStore(tmp_path))  # a new process: new agents, same files
    with pytest.raises(ChatPaused) as caught:
        await restarted.get_response("hello?", chat_id="r")
    assert [(item.agent, item.caller, item.depth, item.call_id) for item in caught.value.interruptions] == [
        ("Cleaner", "Main", 1, call_id)
    ]
    with pytest.raises(ConfigError, match=call_id):
        await restarted.resume("r", approve=["call_out"])  # the agent tool's own call is not what waits
    result = await restarted.resume("r", approve=[call_id])
    assert result.final_output == "all clean"
    assert ran == ["delete a.txt"]
    assert [call.tool_outputs for call in cleaner_model.calls] == [["deleted a.txt"]]
    assert [call.tool_outputs for call in model.calls] == [["removed a.txt"]]
    await restarted.aclose()


async def test_a_nested_run_waits_until_every_call_it_waits_for_is_decided() -> None:
    tool, cleaner_model = cleaner_tool([
        [ToolCall("delete_file", {"path": "a.txt"}), ToolCall("delete_file", {"path": "b.txt"})], "handled both",
    ])
    model = ScriptedModel.each_turn([outer_call(), "all clean"])
    agency = Agency(Agent(name="Main", tools=[tool], model=model))
    paused = await agency.get_response("tidy up", chat_id="p")
    first, second = (item.call_id for item in paused.interruptions)
    undecided = await agency.resume("p")
    assert [item.call_id for item in undecided.interruptions] == [first, second]
    partly = await agency.resume("p", approve=[second])
    assert [item.call_id for item in partly.interruptions] == [first]
    assert ran == []  # as under Runner: the nested run goes on only when all of it is decided
    with pytest.raises(ConfigError, match="not waiting"):
        await agency.resume("p", approve=[second])
    done = await agency.resume("p", reject=[first])
    assert done.final_output == "all clean"
    assert ran == ["delete b.txt"]
    assert len(cleaner_model.calls) == 2


async def test_an_agent_tool_of_a_nested_agent_pauses_every_caller() -> None:
    tool, _ = cleaner_tool()
    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Ops", "tidy up"), "Ops is done"]))
    ops = Agent(name="Ops", tools=[tool], model=ScriptedModel.each_turn([outer_call(), "all clean"]))
    agency = Agency([ceo, [ceo, ops]])
    paused = await agency.get_response("go", chat_id="d")
    [waiting] = paused.interruptions
    assert (waiting.agent, waiting.caller, waiting.depth) == ("Cleaner", "Ops", 2)
    result = await agency.resume("d", approve=[waiting.call_id])
    assert result.final_output == "Ops is done"
    assert ran == ["delete a.txt"]


class Killed(BaseException):
    """The process dies while the approved nested tool runs."""


async def test_a_crash_while_the_nested_run_goes_on_never_runs_the_approved_tool_again(tmp_path: Path) -> None:
    @function_tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Wipe a file."""
        ran.append(f"wipe {path}")
        if len(ran) == 1:
            raise Killed
        return f"wiped {path}"

    def build() -> tuple[Agency, ScriptedModel]:
        cleaner = SdkAgent(name="Cleaner", tools=[wipe], model=ScriptedModel.each_turn(
            [ToolCall("wipe", {"path": "a.txt"}), "wiped a.txt"]
        ))
        model = ScriptedModel.each_turn([outer_call(), "all clean"])
        agent = Agent(name="Main", tools=[cleaner.as_tool("clean_up", "Clean up files.")], model=model)
        return Agency(agent, thread_store=FileThreadStore(tmp_path)), model

    agency, _ = build()
    paused = await agency.get_response("tidy up", chat_id="k")
    with pytest.raises(Killed):
        await agency.resume("k", approve=[paused.interruptions[0].call_id])
    await agency.aclose()

    restarted, model = build()
    result = await restarted.resume("k")
    assert result.final_output == "all clean"
    assert ran == ["wipe a.txt"]  # once: the call that continued the nested run was cut short, not run again
    assert model.calls[-1].tool_outputs == [INTERRUPTED_OUTPUT]
    await restarted.aclose()
