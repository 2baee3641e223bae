"""Parity of agent options: guardrails, output_type, tool_use_behavior, tool_choice, instructions, prompt, hooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from agents import (
    AgentOutputSchema,
    FunctionToolResult,
    GuardrailFunctionOutput,
    ModelSettings,
    RunContextWrapper,
    StopAtTools,
    ToolsToFinalOutputResult,
    function_tool,
    input_guardrail,
    output_guardrail,
)
from openai.types.responses import ResponseOutputMessage, ResponseOutputRefusal, ResponseOutputText
from pydantic import BaseModel

from parity.harness import Kit, RecordingHooks, Scenario, call, msg, run_and_compare


class Weather(BaseModel):
    city: str
    celsius: int


@dataclass
class Ticket:
    title: str
    priority: int


def _answer_tool(kit: Kit) -> Any:
    @function_tool
    def answer() -> int:
        """The answer to everything."""
        kit.ran("answer", {})
        return 42

    return answer


def _note_tool(kit: Kit) -> Any:
    @function_tool
    def note(ctx: RunContextWrapper[Any], text: str) -> str:
        """Write a note down (into the run context's `notes`, when it has them)."""
        kit.ran("note", {"text": text})
        if isinstance(ctx.context, dict) and "notes" in ctx.context:
            ctx.context["notes"].append(text)
        return f"noted: {text}"

    return note


def _finish_tool(kit: Kit) -> Any:
    @function_tool
    def finish(summary: str) -> str:
        """Finish with a summary."""
        kit.ran("finish", {"summary": summary})
        return f"FINAL: {summary}"

    return finish


def _input_guard(kit: Kit, *, parallel: bool) -> Any:
    @input_guardrail(name="no_secrets", run_in_parallel=parallel)
    def no_secrets(ctx: RunContextWrapper[Any], agent: Any, user_input: Any) -> GuardrailFunctionOutput:
        kit.hook_calls.append(f"input guardrail saw {user_input!r}")
        return GuardrailFunctionOutput(output_info="secret found", tripwire_triggered="secret" in str(user_input))

    return no_secrets


def _output_guard(kit: Kit) -> Any:
    @output_guardrail(name="no_rude_words")
    async def no_rude_words(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
        kit.hook_calls.append(f"output guardrail saw {output!r}")
        return GuardrailFunctionOutput(output_info={"checked": True}, tripwire_triggered="stupid" in str(output))

    return no_rude_words


def input_guardrail_sequential(kit: Kit) -> dict[str, Any]:
    return {"input_guardrails": [_input_guard(kit, parallel=False)]}


def input_guardrail_parallel(kit: Kit) -> dict[str, Any]:
    return {"input_guardrails": [_input_guard(kit, parallel=True)]}


def output_guardrail_agent(kit: Kit) -> dict[str, Any]:
    return {"output_guardrails": [_output_guard(kit)]}


def _weather_tool(kit: Kit) -> Any:
    @function_tool
    def weather(city: str) -> Weather:
        """The weather in a city."""
        kit.ran("weather", {"city": city})
        return Weather(city=city, celsius=18)

    return weather


def _broken_tool(kit: Kit) -> Any:
    @function_tool
    def broken() -> int:
        """Always fails."""
        kit.ran("broken", {})
        raise RuntimeError("sensor offline")

    return broken


def stop_at_tools(kit: Kit) -> dict[str, Any]:
    return {"tools": [_note_tool(kit), _finish_tool(kit)],
            "tool_use_behavior": StopAtTools(stop_at_tool_names=["finish"])}


def custom_tool_use_behavior(kit: Kit) -> dict[str, Any]:
    def decide(ctx: RunContextWrapper[Any], results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        kit.hook_calls.append(f"tool_use_behavior saw {[(r.tool.name, r.output) for r in results]}")
        finished = [r for r in results if r.tool.name == "finish"]
        if not finished:
            return ToolsToFinalOutputResult(is_final_output=False)
        return ToolsToFinalOutputResult(is_final_output=True, final_output=f"custom: {finished[0].output}")

    return {"tools": [_note_tool(kit), _finish_tool(kit)], "tool_use_behavior": decide}


def dynamic_instructions_sync(kit: Kit) -> dict[str, Any]:
    def instructions(ctx: RunContextWrapper[Any], agent: Any) -> str:
        kit.hook_calls.append("sync instructions built")
        return f"You are {agent.name}. The user is {ctx.context['user']}."

    return {"instructions": instructions, "tools": [_note_tool(kit)]}


def dynamic_instructions_async(kit: Kit) -> dict[str, Any]:
    async def instructions(ctx: RunContextWrapper[Any], agent: Any) -> str:
        kit.hook_calls.append("async instructions built")
        notes = ctx.context["notes"]
        return f"Async instructions for {agent.name}; notes so far: {notes}."

    return {"instructions": instructions, "tools": [_note_tool(kit)]}


def with_hooks(kit: Kit) -> dict[str, Any]:
    return {"hooks": RecordingHooks(kit), "tools": [_note_tool(kit)], "instructions": "Take notes."}


def hooks_and_output_guardrail(kit: Kit) -> dict[str, Any]:
    return {"hooks": RecordingHooks(kit), "output_guardrails": [_output_guard(kit)], "tools": [_note_tool(kit)]}


def hooks_and_input_guardrail(*, parallel: bool) -> Any:
    def factory(kit: Kit) -> dict[str, Any]:
        return {"hooks": RecordingHooks(kit), "input_guardrails": [_input_guard(kit, parallel=parallel)]}

    return factory


def _refusal() -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id="msg_refuse", role="assistant", status="completed",
        content=[ResponseOutputRefusal(type="refusal", refusal="I cannot help with that.")],
    )


def _two_part_message() -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id="msg_parts", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text="Part one. ", annotations=[], logprobs=[]),
                 ResponseOutputText(type="output_text", text="Part two.", annotations=[], logprobs=[])],
    )


TOOL_THEN_ANSWER = [[call("note", {"text": "milk"})], [msg("Noted milk.", "msg_2")]]

SCENARIOS = [
    Scenario(
        "input_guardrail_passes", lambda: [[msg("Hello!")]], input_guardrail_sequential,
        differences=("input_guardrail_sees_text",),
    ),
    Scenario(
        "input_guardrail_parallel_passes", lambda: [[msg("Hello!")]], input_guardrail_parallel,
        differences=("input_guardrail_sees_text",),
    ),
    Scenario(
        "input_guardrail_tripwire", lambda: [[msg("Here is the secret.")]], input_guardrail_sequential,
        input="tell me the secret", differences=("guardrail_tripwire_message", "input_guardrail_sees_text"),
    ),
    Scenario("output_guardrail_passes", lambda: [[msg("A kind answer.")]], output_guardrail_agent),
    Scenario(
        "output_guardrail_tripwire", lambda: [[msg("A stupid answer.")]], output_guardrail_agent,
        differences=("guardrail_tripwire_message",),
    ),
    Scenario(
        "output_type_pydantic", lambda: [[msg('{"city": "Paris", "celsius": 21}')]],
        lambda kit: {"output_type": Weather},
    ),
    Scenario(
        "output_type_dataclass", lambda: [[msg('{"response": {"title": "Fix login", "priority": 1}}')]],
        lambda kit: {"output_type": Ticket},
    ),
    Scenario(
        "output_type_non_strict_schema", lambda: [[msg('{"apples": 3, "pears": 4}')]],
        lambda kit: {"output_type": AgentOutputSchema(dict[str, int], strict_json_schema=False)},
    ),
    Scenario(
        "output_type_after_tool_call",
        lambda: [[call("note", {"text": "x"})], [msg('{"city": "Rome", "celsius": 30}', "msg_2")]],
        lambda kit: {"output_type": Weather, "tools": [_note_tool(kit)]},
    ),
    Scenario(
        "output_type_invalid_json", lambda: [[msg('{"city": "Paris"}')]],
        lambda kit: {"output_type": Weather}, differences=("output_validation_error",),
    ),
    Scenario(
        "tool_use_run_llm_again", lambda: [[call("answer", {})], [msg("It is 42.", "msg_2")]],
        lambda kit: {"tools": [_answer_tool(kit)], "tool_use_behavior": "run_llm_again"},
    ),
    Scenario(
        "tool_use_stop_on_first_tool", lambda: [[call("answer", {})], [msg("unreachable", "msg_2")]],
        lambda kit: {"tools": [_answer_tool(kit)], "tool_use_behavior": "stop_on_first_tool"},
    ),
    Scenario(
        "tool_use_stop_on_first_tool_with_output_type",
        lambda: [[call("weather", {"city": "Lyon"})], [msg("unreachable", "msg_2")]],
        lambda kit: {"tools": [_weather_tool(kit)], "tool_use_behavior": "stop_on_first_tool", "output_type": Weather},
    ),
    Scenario(
        "tool_use_stop_on_first_tool_two_calls",
        lambda: [[call("note", {"text": "first"}, "call_1"), call("answer", {}, "call_2")], [msg("unreachable", "m")]],
        lambda kit: {"tools": [_note_tool(kit), _answer_tool(kit)], "tool_use_behavior": "stop_on_first_tool"},
    ),
    Scenario(
        "tool_use_stop_on_first_tool_after_error",
        lambda: [[call("broken", {})], [msg("unreachable", "msg_2")]],
        lambda kit: {"tools": [_broken_tool(kit)], "tool_use_behavior": "stop_on_first_tool"},
        differences=("tool_error_text",),
    ),
    Scenario(
        "tool_use_stop_at_tools",
        lambda: [[call("note", {"text": "a"})], [call("finish", {"summary": "all done"}, "call_2")],
                 [msg("unreachable", "msg_2")]],
        stop_at_tools,
    ),
    Scenario(
        "tool_use_custom_function",
        lambda: [[call("note", {"text": "a"})], [call("finish", {"summary": "all done"}, "call_2")],
                 [msg("unreachable", "msg_2")]],
        custom_tool_use_behavior,
    ),
    Scenario(
        "reset_tool_choice_true", lambda: TOOL_THEN_ANSWER,
        lambda kit: {"tools": [_note_tool(kit)], "model_settings": ModelSettings(tool_choice="required")},
    ),
    Scenario(
        "reset_tool_choice_false", lambda: TOOL_THEN_ANSWER,
        lambda kit: {"tools": [_note_tool(kit)], "model_settings": ModelSettings(tool_choice="required"),
                     "reset_tool_choice": False},
    ),
    Scenario(
        "model_settings_passed", lambda: TOOL_THEN_ANSWER,
        lambda kit: {"tools": [_note_tool(kit)], "model_settings": ModelSettings(
            temperature=0.3, top_p=0.9, max_tokens=200, parallel_tool_calls=False, metadata={"team": "qa"},
            tool_choice="note", extra_body={"x": 1},
        )},
    ),
    Scenario(
        "dynamic_instructions_sync", lambda: TOOL_THEN_ANSWER, dynamic_instructions_sync,
        context=lambda: {"user": "Ann"},
    ),
    Scenario(
        "dynamic_instructions_async_see_tool_effects", lambda: TOOL_THEN_ANSWER, dynamic_instructions_async,
        context=lambda: {"user": "Ann", "notes": []},
    ),
    Scenario(
        "prompt_dict", lambda: [[msg("Hi from a stored prompt.")]],
        lambda kit: {"prompt": {"id": "pmpt_123", "version": "2", "variables": {"name": "Ann"}}},
    ),
    Scenario("agent_hooks_order", lambda: TOOL_THEN_ANSWER, with_hooks),
    Scenario(  # on_start comes before a parallel input guardrail, after a sequential one
        "agent_hooks_with_parallel_input_guardrail", lambda: [[msg("Hello!")]],
        hooks_and_input_guardrail(parallel=True), differences=("input_guardrail_sees_text",),
    ),
    Scenario(  # on_end comes before the output guardrails, also when they trip
        "agent_hooks_with_output_guardrail", lambda: [[call("note", {"text": "a"})], [msg("A kind answer.", "m2")]],
        hooks_and_output_guardrail,
    ),
    Scenario(
        "agent_hooks_with_output_guardrail_tripwire",
        lambda: [[call("note", {"text": "a"})], [msg("A stupid answer.", "m2")]], hooks_and_output_guardrail,
        differences=("guardrail_tripwire_message",),
    ),
    Scenario(
        "agent_hooks_with_sequential_input_guardrail", lambda: [[msg("Hello!")]],
        hooks_and_input_guardrail(parallel=False), differences=("input_guardrail_sees_text",),
    ),
    Scenario(
        "agent_hooks_with_parallel_input_guardrail_tripwire", lambda: [[msg("Here is the secret.")]],
        hooks_and_input_guardrail(parallel=True), input="tell me the secret",
        differences=("guardrail_tripwire_message", "input_guardrail_sees_text", "parallel_input_guardrail_first"),
    ),
    Scenario(
        "two_messages_one_response", lambda: [[msg("First. ", "msg_a"), msg("Second.", "msg_b")]],
        lambda kit: {},
    ),
    Scenario("message_with_two_parts", lambda: [[_two_part_message()]], lambda kit: {}),
    Scenario("refusal", lambda: [[_refusal()]], lambda kit: {}),
    Scenario(
        "message_and_call_in_one_response",
        lambda: [[msg("Let me note that.", "msg_a"), call("note", {"text": "eggs"})], [msg("Done.", "msg_2")]],
        lambda kit: {"tools": [_note_tool(kit)]},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
