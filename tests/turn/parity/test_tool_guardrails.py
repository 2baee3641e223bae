"""Parity of a function tool's own input and output guardrails, and (ours only) the rule for nested agents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)

import agency_swarm
from parity.harness import Kit, Outcome, RecordingModel, Scenario, call, msg, run_and_compare


def _input_guard(kit: Kit, name: str, verdict: str) -> Any:
    @tool_input_guardrail(name=name)
    def guard(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        arguments = json.loads(data.context.tool_arguments or "{}")
        kit.hook_calls.append(f"{name} saw {arguments} for {data.context.tool_name}")
        if verdict == "reject" and "rm" in str(arguments.get("command", "")):
            return ToolGuardrailFunctionOutput.reject_content(f"{name}: rm is not allowed", output_info={"rule": 1})
        if verdict == "raise" and "rm" in str(arguments.get("command", "")):
            return ToolGuardrailFunctionOutput.raise_exception(output_info={"rule": 2})
        return ToolGuardrailFunctionOutput.allow(output_info="fine")

    return guard


def _output_guard(kit: Kit, name: str, verdict: str) -> Any:
    @tool_output_guardrail(name=name)
    async def guard(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        kit.hook_calls.append(f"{name} saw output {data.output!r}")
        if verdict == "reject" and "SECRET" in str(data.output):
            return ToolGuardrailFunctionOutput.reject_content(f"{name}: output withheld", output_info="secret")
        if verdict == "raise" and "SECRET" in str(data.output):
            return ToolGuardrailFunctionOutput.raise_exception(output_info="secret")
        return ToolGuardrailFunctionOutput.allow()

    return guard


def _shell_tool(kit: Kit, inputs: list[Any] | None = None, outputs: list[Any] | None = None) -> Any:
    @function_tool(tool_input_guardrails=inputs, tool_output_guardrails=outputs)
    def run_command(command: str) -> str:
        """Run a shell command (pretend)."""
        kit.ran("run_command", {"command": command})
        return f"ran {command}; token=SECRET" if "env" in command else f"ran {command}"

    return run_command


def input_guarded(verdict: str) -> Any:
    def factory(kit: Kit) -> dict[str, Any]:
        return {"tools": [_shell_tool(kit, inputs=[_input_guard(kit, "first", verdict),
                                                    _input_guard(kit, "second", "allow")])]}

    return factory


def output_guarded(verdict: str) -> Any:
    def factory(kit: Kit) -> dict[str, Any]:
        return {"tools": [_shell_tool(kit, outputs=[_output_guard(kit, "first", verdict),
                                                     _output_guard(kit, "second", "allow")])]}

    return factory


def _did_not_run(runner: Outcome, ours: Outcome) -> None:
    for outcome in (runner, ours):
        assert not [args for name, args in outcome.tool_runs if "rm" in str(args)], (
            f"{outcome.side}: the guarded tool ran although its input guardrail stopped it: {outcome.tool_runs}"
        )


def _script(command: str) -> Any:
    return lambda: [[call("run_command", {"command": command})], [msg("Done.", "msg_2")]]


SCENARIOS = [
    Scenario("tool_input_guardrail_allows", _script("ls"), input_guarded("reject")),
    Scenario("tool_input_guardrail_rejects", _script("rm -rf /"), input_guarded("reject"), check=_did_not_run),
    Scenario(
        "tool_input_guardrail_raises", _script("rm -rf /"), input_guarded("raise"), check=_did_not_run,
        differences=("tool_guardrail_tripwire_message",),
    ),
    Scenario(
        "tool_input_guardrail_rejects_one_of_two_calls",
        lambda: [[call("run_command", {"command": "ls"}, "call_1"), call("run_command", {"command": "rm x"}, "call_2")],
                 [msg("Done.", "msg_2")]],
        input_guarded("reject"), check=_did_not_run,
    ),
    Scenario("tool_output_guardrail_allows", _script("env"), output_guarded("allow")),
    Scenario("tool_output_guardrail_rejects", _script("env"), output_guarded("reject")),
    Scenario(
        "tool_output_guardrail_raises", _script("env"), output_guarded("raise"),
        differences=("tool_guardrail_tripwire_message",),
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)


# -- nested agents: our loop only (Runner has no counterpart) -------------------------------------------------


def _send(message: str) -> Any:
    return call("send_message", {"recipient_agent": "Worker", "message": message, "additional_instructions": None},
                "call_send")


async def _run_nested(verdict: str, stream: bool) -> tuple[Kit, RecordingModel, RecordingModel, Any, list[Any]]:
    kit = Kit("ours")
    ceo_model = RecordingModel([[_send("clean up")], [msg("The worker reported back.", "msg_ceo")]])
    worker_model = RecordingModel([[call("run_command", {"command": "rm -rf /"}, "call_w")],
                                   [msg("I was not allowed to.", "msg_w")]])
    ceo = agency_swarm.Agent(name="CEO", description="Delegates.", model=ceo_model)
    worker = agency_swarm.Agent(
        name="Worker", description="Runs commands.", model=worker_model,
        tools=[_shell_tool(kit, inputs=[_input_guard(kit, "first", verdict)])],
    )
    agency = agency_swarm.Agency([ceo, [ceo, worker]])
    events: list[Any] = []
    if stream:
        response_stream = agency.get_response_stream("Please clean up.")
        async for event in response_stream:
            if event.type not in ("raw", "text_delta"):
                events.append(event)
        result = response_stream.result
    else:
        result = await agency.get_response("Please clean up.")
    return kit, ceo_model, worker_model, result, events


def _outputs(items: list[Any], call_id: str) -> list[str]:
    return [str(item.get("output")) for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output" and item.get("call_id") == call_id]


def _every_output_has_a_call(events: list[Any]) -> None:
    """As under Runner: each tool_output event follows a tool_called event for the same call."""
    called: set[str] = set()
    for event in events:
        if event.type == "tool_called":
            called.add(event.call_id)
        if event.type == "tool_output":
            assert event.call_id in called, (
                f"{event.agent}: tool_output for {event.tool} ({event.call_id}) without a tool_called before it; "
                f"events: {[(e.type, e.agent, getattr(e, 'tool', None)) for e in events]}"
            )


@pytest.mark.usefixtures("shortcuts")
async def test_nested_worker_tool_input_guardrail_rejects(stream: bool) -> None:
    kit, ceo_model, worker_model, result, events = await _run_nested("reject", stream)
    assert kit.tool_runs == [], f"the guarded tool ran: {kit.tool_runs}"
    assert len(worker_model.calls) == 2, "the worker's model must read the guardrail's message and answer"
    assert _outputs(worker_model.calls[1].input, "call_w") == ["first: rm is not allowed"]
    assert _outputs(ceo_model.calls[1].input, "call_send") == ["I was not allowed to."]
    assert result.final_output == "The worker reported back."
    if stream:
        _every_output_has_a_call(events)


@pytest.mark.usefixtures("shortcuts")
async def test_nested_worker_tool_input_guardrail_raises(stream: bool) -> None:
    kit, ceo_model, worker_model, result, events = await _run_nested("raise", stream)
    assert kit.tool_runs == [], f"the guarded tool ran: {kit.tool_runs}"
    assert len(worker_model.calls) == 1, "the worker's turn must end when its tool's guardrail raises"
    [output] = _outputs(ceo_model.calls[1].input, "call_send")
    assert output.startswith("Error: Worker failed to answer: ToolInputGuardrailTripwireTriggered"), output
    assert result.final_output == "The worker reported back."
    if stream:
        _every_output_has_a_call(events)
