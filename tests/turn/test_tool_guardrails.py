"""A function tool's own input and output guardrails: run as `Runner` runs them, at depth 0 and in nested agents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    AgentHooks,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailData,
    ToolOutputGuardrailTripwireTriggered,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)

from agency_swarm import Agency, Agent, ToolCalled, ToolOutput
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

RAN: list[str] = []


@tool_input_guardrail
def no_root(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    path = json.loads(data.context.tool_arguments).get("path")
    if path == "/":
        return ToolGuardrailFunctionOutput.reject_content("Refused: deleting / is not allowed.", output_info="root")
    if path == "/etc":
        return ToolGuardrailFunctionOutput.raise_exception(output_info="etc")
    return ToolGuardrailFunctionOutput.allow()


@tool_output_guardrail
def no_secrets(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    if "SECRET" in str(data.output):
        return ToolGuardrailFunctionOutput.reject_content("The output held a secret and was withheld.")
    if "BOOM" in str(data.output):
        return ToolGuardrailFunctionOutput.raise_exception(output_info="boom")
    return ToolGuardrailFunctionOutput.allow()


def delete_tool() -> Any:
    @function_tool(tool_input_guardrails=[no_root])
    def delete(path: str) -> str:
        """Delete a path."""
        RAN.append(path)
        return f"deleted {path}"

    return delete


def read_tool() -> Any:
    @function_tool(tool_output_guardrails=[no_secrets])
    async def read(path: str) -> str:
        """Read a file."""
        RAN.append(path)
        return {"a": "plain text", "s": "the SECRET is 42", "b": "BOOM"}[path]

    return read


@pytest.fixture(autouse=True)
def _clean() -> None:
    RAN.clear()


def tool_output(model: ScriptedModel, call: int = 1) -> str:
    (output,) = model.calls[call].tool_outputs
    return output


async def run(agent: Agent, streamed: bool, message: str = "go") -> Any:
    if not streamed:
        return await agent.get_response(message)
    stream = agent.get_response_stream(message)
    async for _ in stream:
        pass
    return stream.result


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_rejecting_input_guardrail_stops_the_tool_and_the_model_reads_why(streamed: bool) -> None:
    model = ScriptedModel([ToolCall("delete", {"path": "/"}), "ok"])
    agent = Agent(name="Ops", tools=[delete_tool()], model=model)
    result = await run(agent, streamed)
    assert RAN == []
    assert tool_output(model) == "Refused: deleting / is not allowed."
    assert result.final_output == "ok"
    (guarded,) = result.tool_input_guardrail_results
    assert guarded.output.output_info == "root"


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_allowing_input_guardrail_lets_the_tool_run(streamed: bool) -> None:
    model = ScriptedModel([ToolCall("delete", {"path": "/tmp/x"}), "ok"])
    result = await run(Agent(name="Ops", tools=[delete_tool()], model=model), streamed)
    assert RAN == ["/tmp/x"]
    assert tool_output(model) == "deleted /tmp/x"
    assert [item.output.behavior["type"] for item in result.tool_input_guardrail_results] == ["allow"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_raising_input_guardrail_ends_the_turn_with_the_sdks_exception(streamed: bool) -> None:
    agent = Agent(name="Ops", tools=[delete_tool()], model=ScriptedModel([ToolCall("delete", {"path": "/etc"}), "x"]))
    with pytest.raises(ToolInputGuardrailTripwireTriggered, match=r"'Ops'.*'delete'.*no_root.*etc") as raised:
        await run(agent, streamed)
    assert RAN == []
    assert raised.value.output.output_info == "etc"
    # the thread stays usable: the call got an output, so a next turn's request is valid
    threads = agent.wiring.thread_manager.get_threads("default")
    (items,) = threads.values()
    calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
    answered = {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}
    assert set(answered) == calls
    assert [output.startswith("Error: Agent 'Ops': tool 'delete' input guardrail") for output in answered.values()] == [
        True
    ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_rejecting_output_guardrail_replaces_what_the_model_reads(streamed: bool) -> None:
    model = ScriptedModel([ToolCall("read", {"path": "s"}), "ok"])
    result = await run(Agent(name="Ops", tools=[read_tool()], model=model), streamed)
    assert RAN == ["s"]  # output guardrails judge what the tool really returned
    assert tool_output(model) == "The output held a secret and was withheld."
    assert result.final_output == "ok"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_raising_output_guardrail_ends_the_turn(streamed: bool) -> None:
    agent = Agent(name="Ops", tools=[read_tool()], model=ScriptedModel([ToolCall("read", {"path": "b"}), "x"]))
    with pytest.raises(ToolOutputGuardrailTripwireTriggered, match=r"'Ops'.*'read'.*output guardrail"):
        await run(agent, streamed)
    assert RAN == ["b"]


async def test_a_passing_output_guardrail_keeps_the_output() -> None:
    model = ScriptedModel([ToolCall("read", {"path": "a"}), "ok"])
    await Agent(name="Ops", tools=[read_tool()], model=model).get_response("go")
    assert tool_output(model) == "plain text"


async def test_hooks_see_no_rejected_call_and_the_guarded_output_at_the_end() -> None:
    seen: list[str] = []

    class Hooks(AgentHooks[Any]):
        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            seen.append(f"start {tool.name}")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            seen.append(f"end {tool.name}: {result}")

    model = ScriptedModel([ToolCall("delete", {"path": "/"}), ToolCall("read", {"path": "s"}), "ok"])
    agent = Agent(name="Ops", tools=[delete_tool(), read_tool()], hooks=Hooks(), model=model)
    await agent.get_response("go")
    assert seen == ["start read", "end read: The output held a secret and was withheld."]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_nested_agents_tool_guardrail_holds_there_too(streamed: bool) -> None:
    worker_model = ScriptedModel([ToolCall("delete", {"path": "/"}), "could not delete /"])
    worker = Agent(name="Worker", tools=[delete_tool()], model=worker_model)
    ceo_model = ScriptedModel([send_message("Worker", "delete /"), "done"])
    ceo = Agent(name="CEO", model=ceo_model)
    agency = Agency([ceo, [ceo, worker]])
    if streamed:
        stream = agency.get_response_stream("clean up")
        events = [event async for event in stream]
        result = stream.result
        calls = {event.call_id for event in events if isinstance(event, ToolCalled)}
        outputs = {event.call_id for event in events if isinstance(event, ToolOutput)}
        assert calls == outputs  # every call, sends included, pairs with its output
    else:
        result = await agency.get_response("clean up")
    assert RAN == []
    assert tool_output(worker_model) == "Refused: deleting / is not allowed."
    assert tool_output(ceo_model) == "could not delete /"
    assert [item.output.output_info for item in result.tool_input_guardrail_results] == ["root"]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_raising_guardrail_in_a_nested_agent_fails_its_turn_and_the_caller_reads_why(streamed: bool) -> None:
    worker = Agent(name="Worker", tools=[delete_tool()], model=ScriptedModel([ToolCall("delete", {"path": "/etc"})]))
    ceo_model = ScriptedModel([send_message("Worker", "delete /etc"), "it was refused"])
    ceo = Agent(name="CEO", model=ceo_model)
    agency = Agency([ceo, [ceo, worker]])
    if streamed:
        stream = agency.get_response_stream("clean up")
        async for _ in stream:
            pass
        result = stream.result
    else:
        result = await agency.get_response("clean up")
    assert RAN == []
    reply = tool_output(ceo_model)
    assert "Worker failed to answer" in reply
    assert "ToolInputGuardrailTripwireTriggered" in reply
    assert "no_root" in reply
    assert result.final_output == "it was refused"
