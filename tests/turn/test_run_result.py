"""RunResult's Runner-like fields over a whole agency turn: guardrail results of every agent (each naming its
agent), every model response, to_input_list(), last_agent and the run context."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from agents import (
    GuardrailFunctionOutput,
    ModelResponse,
    RunContextWrapper,
    function_tool,
    input_guardrail,
    output_guardrail,
)

from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel, ToolCall, send_message


@input_guardrail(name="polite_input", run_in_parallel=False)
def polite_input(ctx: RunContextWrapper[Any], agent: Any, text: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=f"{agent.name} read {text!r}", tripwire_triggered=False)


@output_guardrail(name="no_secrets")
def no_secrets(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=agent.name, tripwire_triggered="SECRET" in str(output))


@function_tool
def count(ctx: RunContextWrapper[Any]) -> str:
    """Count a visit in the context."""
    ctx.context["visits"] += 1
    return "counted"


def _agency(dev_answer: str = "Built.") -> Agency:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Dev", "Build it"), "Done."]),
                input_guardrails=[polite_input], output_guardrails=[no_secrets])
    dev = Agent(name="Dev", model=ScriptedModel([ToolCall("count"), dev_answer]), tools=[count],
                input_guardrails=[polite_input], output_guardrails=[no_secrets])
    return Agency([ceo, [ceo, dev]])


async def _turn(agency: Agency, streamed: bool, context: Any) -> Any:
    if not streamed:
        return await agency.get_response("Ship it", context=context)
    stream = agency.get_response_stream("Ship it", context=context)
    async for _ in stream:
        pass
    return stream.result


@pytest.mark.parametrize("streamed", [False, True])
async def test_guardrail_results_of_every_agent_name_their_agent(streamed: bool) -> None:
    result = await _turn(_agency(), streamed, {"visits": 0})
    assert [(item.agent.name, item.guardrail.get_name(), item.output.output_info)
            for item in result.input_guardrail_results] == [
        ("CEO", "polite_input", "CEO read 'Ship it'"), ("Dev", "polite_input", "Dev read 'Build it'"),
    ]
    assert [(item.agent.name, item.agent_output, item.output.tripwire_triggered)
            for item in result.output_guardrail_results] == [("Dev", "Built.", False), ("CEO", "Done.", False)]


async def test_a_nested_tripwire_is_in_the_results_and_the_turn_goes_on() -> None:
    result = await _turn(_agency(dev_answer="the SECRET"), False, {"visits": 0})
    assert result.final_output == "Done."
    assert [(item.agent.name, item.output.tripwire_triggered) for item in result.output_guardrail_results] == [
        ("Dev", True), ("CEO", False),
    ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_raw_responses_context_and_last_agent(streamed: bool) -> None:
    context = {"visits": 0}
    agency = _agency()
    result = await _turn(agency, streamed, context)
    responses = result.raw_responses
    assert all(isinstance(response, ModelResponse) for response in responses)
    assert [[item.type for item in response.output] for response in responses] == [
        ["function_call"], ["function_call"], ["message"], ["message"],  # CEO sends, Dev counts, Dev, CEO answer
    ]
    assert sum(response.usage.total_tokens for response in responses) == result.usage.total_tokens
    assert result.raw_responses is responses  # built once, when first read
    assert result.context_wrapper.context is context
    assert context["visits"] == 1
    assert result.context_wrapper.usage.requests == result.usage.requests == 4
    assert result.last_agent is agency.agents["CEO"]
    assert result.agent == "CEO"


async def test_to_input_list_is_a_copy_of_the_turn_for_the_model() -> None:
    agency = _agency()
    result = await agency.get_response("Ship it", chat_id="copy")
    listed = result.to_input_list()
    assert listed == result.new_items
    assert [item.get("role", item.get("type")) for item in listed] == [
        "user", "function_call", "function_call_output", "assistant",
    ]
    listed[0]["content"] = "changed"
    assert (await agency.get_threads("copy"))["user->CEO"][0]["content"] == "Ship it"


async def test_a_turn_without_guardrails_has_empty_results() -> None:
    result = await Agency([Agent(name="Solo", model=ScriptedModel(["Hi."]))]).get_response("Hello")
    assert result.input_guardrail_results == []
    assert result.output_guardrail_results == []
    assert result.context_wrapper.turn_input == [{"content": "Hello", "role": "user"}]
    assert len(result.raw_responses) == 1


async def test_a_result_pickles_without_the_live_turn() -> None:
    """A durable turn stores its result: the agent (its tools hold local functions) and the turn's state stay
    behind; what the turn produced travels."""
    result = await _agency().get_response("Ship it", context={"visits": 0})
    result.tool_guardrails = None  # guardrail objects hold functions (the durable runner drops them the same way)
    again = pickle.loads(pickle.dumps(result))
    assert (again.final_output, again.new_items, again.agent) == (result.final_output, result.new_items, "CEO")
    assert again.usage.requests == result.usage.requests == 4
    assert again.last_agent is None
    assert again.raw_responses == []
    assert again.context_wrapper.context is None
    assert result.last_agent is not None  # the original keeps them
