"""Parity of what a chat keeps when an output guardrail blocks the final answer: `Runner` with a session against
an agency's chat, over two turns. The blocked answer must not reach the next turn's model."""

from __future__ import annotations

from typing import Any

import agents
import pytest
from agents import (
    GuardrailFunctionOutput,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    StopAtTools,
    output_guardrail,
)

import agency_swarm
from parity.harness import AGENT_NAME, Kit, RecordingModel, _compare_values, call, msg, reasoning

BLOCKED = "the SECRET is 42"


@output_guardrail(name="no_secrets")
def _no_secrets(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="secret found", tripwire_triggered="SECRET" in str(output))


def _note_tool(kit: Kit) -> Any:
    @agents.function_tool
    def note(text: str) -> str:
        """Write a note down."""
        kit.ran("note", {"text": text})
        return f"noted: {text}"

    return note


def _reveal_tool(kit: Kit) -> Any:
    @agents.function_tool
    def reveal() -> str:
        """Tell the secret."""
        kit.ran("reveal", {})
        return BLOCKED

    return reveal


def _agent_options(kit: Kit, stop: bool) -> dict[str, Any]:
    options: dict[str, Any] = {"output_guardrails": [_no_secrets], "tools": [_note_tool(kit), _reveal_tool(kit)]}
    if stop:  # reveal's output is the final output the guardrail blocks
        options["tool_use_behavior"] = StopAtTools(stop_at_tool_names=["reveal"])
    return options


async def _runner_side(script: list[list[Any]], stream: bool, stop: bool) -> tuple[str | None, RecordingModel]:
    model = RecordingModel(script)
    agent = agents.Agent(name=AGENT_NAME, model=model, **_agent_options(Kit("runner"), stop))
    session = agents.SQLiteSession("parity")
    error: str | None = None
    for text in ("Hello", "Again"):
        try:
            if stream:
                streamed = agents.Runner.run_streamed(agent, text, session=session)
                async for _ in streamed.stream_events():
                    pass
            else:
                await agents.Runner.run(agent, text, session=session)
        except OutputGuardrailTripwireTriggered as tripped:
            error = error or type(tripped).__name__
    return error, model


async def _our_side(script: list[list[Any]], stream: bool, stop: bool) -> tuple[str | None, RecordingModel]:
    model = RecordingModel(script)
    agent = agency_swarm.Agent(name=AGENT_NAME, model=model, **_agent_options(Kit("ours"), stop))
    agency = agency_swarm.Agency([agent])
    error: str | None = None
    for text in ("Hello", "Again"):
        try:
            if stream:
                async for _ in agency.get_response_stream(text, chat_id="parity"):
                    pass
            else:
                await agency.get_response(text, chat_id="parity")
        except OutputGuardrailTripwireTriggered as tripped:
            error = error or type(tripped).__name__
    return error, model


SCRIPTS = {  # name -> (script, the tool's output ends the turn)
    "blocked_answer": (lambda: [[msg(BLOCKED)], [msg("Fine.", "msg_2")]], False),
    "blocked_answer_with_reasoning": (lambda: [[reasoning(), msg(BLOCKED)], [msg("Fine.", "msg_2")]], False),
    "blocked_answer_after_tool": (lambda: [
        [call("note", {"text": "milk"})], [msg(BLOCKED, "msg_2")], [msg("Fine.", "msg_3")],
    ], False),
    "blocked_tool_output_that_ended_the_turn": (lambda: [[call("reveal")], [msg("Fine.", "msg_2")]], True),
    "blocked_tool_outputs_of_two_calls": (lambda: [
        [call("reveal", {}, "call_1"), call("note", {"text": "milk"}, "call_2")], [msg("Fine.", "msg_2")],
    ], True),
    "blocked_tool_output_after_an_earlier_tool": (lambda: [
        [call("note", {"text": "milk"}, "call_1")], [call("reveal", {}, "call_2")], [msg("Fine.", "msg_2")],
    ], True),
}


KEPT_RESPONSE = {  # difference blocked_tool_response_kept: the blocked response's other items, ours keeps
    "blocked_tool_output_after_reasoning": lambda: [[reasoning(), call("reveal")], [msg("Fine.", "msg_2")]],
    "blocked_tool_output_after_a_message": lambda: [
        [msg("Let me look.", "msg_0"), call("reveal")], [msg("Fine.", "msg_2")],
    ],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_blocked_output_stays_out_of_the_next_turn(name: str, stream: bool, shortcuts: bool) -> None:
    script, stop = SCRIPTS[name]
    runner_error, runner = await _runner_side(script(), stream, stop)
    our_error, ours = await _our_side(script(), stream, stop)
    _compare_turns(runner_error, runner, our_error, ours)


@pytest.mark.parametrize("name", list(KEPT_RESPONSE))
async def test_blocked_tool_response_kept(name: str, stream: bool, shortcuts: bool) -> None:
    """Runner drops a blocked response whole when it holds more than calls (it cannot sanitize reasoning, and keeps
    only calls with outputs); ours stored it before its calls ran (a stored call never runs twice after a crash):
    it keeps the response's items, its calls' outputs withheld. The blocked text reaches neither next turn."""
    runner_error, runner = await _runner_side(KEPT_RESPONSE[name](), stream, True)
    our_error, ours = await _our_side(KEPT_RESPONSE[name](), stream, True)
    kept = ours.calls[-1].input[1:-1]  # between "Hello" and "Again"
    first = kept[0].get("type")
    assert [first, *(item.get("type") for item in kept[1:])] == [first, "function_call", "function_call_output"]
    assert kept[-1]["output"] == "Output withheld by an output guardrail."
    if first == "reasoning":  # Runner drops the whole response
        ours.calls[-1].input[1:-1] = []
    else:  # Runner drops the message, keeps the call with its withheld output
        assert first == "message"
        del ours.calls[-1].input[1]
    _compare_turns(runner_error, runner, our_error, ours)


def _compare_turns(runner_error: str | None, runner: RecordingModel, our_error: str | None,
                   ours: RecordingModel) -> None:
    problems: list[str] = []
    _compare_values("first turn's error", runner_error, our_error, problems)
    _compare_values("model call count", len(runner.calls), len(ours.calls), problems)
    for index, (left, right) in enumerate(zip(runner.calls, ours.calls, strict=False)):
        _compare_values(f"model call {index + 1}: input", left.input, right.input, problems)
    assert not problems, "\n".join(problems)
    assert runner_error == "OutputGuardrailTripwireTriggered"
    assert BLOCKED not in repr(ours.calls[-1].input)
