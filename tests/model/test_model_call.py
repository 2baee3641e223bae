"""One model-call path: a streamed call gives the hooks and usage what a blocking call gives; one-item shortcuts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import agents
import pytest
from agents import AgentHooks, AgentOutputSchemaBase, Handoff, Model, ModelResponse, ModelSettings, Tool, Usage
from agents.items import TResponseStreamEvent
from agents.models.interface import ModelTracing
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from agency_swarm import Agency, Agent, RetryPolicy
from agency_swarm._model._retry import RetryingModel
from agency_swarm.testing import ScriptedModel


def _cached(tokens: int) -> InputTokensDetails:
    fields = {name: 0 for name in ("cached_tokens", "cache_write_tokens") if name in InputTokensDetails.model_fields}
    return InputTokensDetails.model_validate({**fields, "cached_tokens": tokens})


class Detailed(ScriptedModel):
    """Reports cached and reasoning tokens, blocking and streamed alike."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        response = await super().get_response(*args, **kwargs)
        response.usage = Usage(
            requests=1, input_tokens=10, output_tokens=5, total_tokens=15,
            input_tokens_details=_cached(3),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=2),
        )
        return response

    def _usage(self) -> ResponseUsage:
        return ResponseUsage(
            input_tokens=10, input_tokens_details=_cached(3), output_tokens=5,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=2), total_tokens=15,
        )


class Seen(AgentHooks[Any]):
    def __init__(self) -> None:
        self.usages: list[tuple[int, int, int, int, int]] = []

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        usage = response.usage
        self.usages.append((
            usage.requests, usage.input_tokens, usage.output_tokens, usage.input_tokens_details.cached_tokens,
            usage.output_tokens_details.reasoning_tokens,
        ))


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_on_llm_end_and_usage_keep_token_details_in_both_modes(streaming: bool) -> None:
    hooks = Seen()
    agency = Agency(Agent(name="Solo", model=Detailed(["hi"]), hooks=hooks))
    if streaming:
        stream = agency.get_response_stream("hello")
        async for _ in stream:
            pass
        result = stream.result
    else:
        result = await agency.get_response("hello")
    assert hooks.usages == [(1, 10, 5, 3, 2)]
    usage = result.usage
    assert (usage.input_tokens_details.cached_tokens, usage.output_tokens_details.reasoning_tokens) == (3, 2)


def _generic(output: list[Any]) -> list[Any]:
    """The same response with a reasoning item in front: `next_step` then takes its generic scan, which skips it."""
    reasoning = ResponseReasoningItem(id="rs_1", summary=[], type="reasoning")
    return [reasoning, *output]


@pytest.mark.parametrize("kind", ["call", "send", "unknown", "text", "empty text", "refusal"])
def test_one_item_next_step_equals_the_generic_scan(kind: str) -> None:
    from types import SimpleNamespace

    from agency_swarm._turn._steps import FinalOutput, RunTools, next_step

    call = ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name={"send": "send_message", "unknown": "nope"}.get(kind, "ping"),
        arguments="{}",
    )
    part: Any = (
        ResponseOutputRefusal(type="refusal", refusal="no") if kind == "refusal"
        else ResponseOutputText(type="output_text", text="" if kind == "empty text" else "hi", annotations=[])
    )
    message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[part])
    item = call if kind in ("call", "send", "unknown") else message
    setup: Any = SimpleNamespace(schema=None, can_send=True, function_tools={"ping": object()})
    turn: Any = SimpleNamespace(agent=SimpleNamespace(name="A"), run=SimpleNamespace(chat_id="c"), depth=0)

    def outcome(output: list[Any]) -> Any:
        try:
            step = next_step(turn, setup, output)
        except Exception as error:
            return type(error), str(error)
        if isinstance(step, RunTools):
            return "run tools", step.calls, list(step.mcp_approvals)
        assert isinstance(step, FinalOutput)
        return "final", step.output

    assert outcome([item]) == outcome(_generic([item]))


def test_one_item_is_stored_as_the_generic_conversion_stores_it() -> None:
    from agency_swarm._base._items import stored_item
    from agency_swarm._turn._outputs import unusual_items

    call = ResponseFunctionToolCall(type="function_call", call_id="call_1", name="ping", arguments="{}")
    text = ResponseOutputText(type="output_text", text="hi", annotations=[])
    message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[text])
    for item in (call, message):
        assert [stored_item(item)] == unusual_items([item], [])


class Minimal(Model):
    """A custom model written with the SDK's exact abstract signature: the keyword-only arguments have no defaults,
    so a call that leaves one out raises TypeError."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, Any, Any]] = []

    async def get_response(
        self, system_instructions: str | None, input: Any, model_settings: ModelSettings, tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff], tracing: ModelTracing, *,
        previous_response_id: str | None, conversation_id: str | None, prompt: Any,
    ) -> ModelResponse:
        self.seen.append(("get_response", previous_response_id, conversation_id, prompt))
        return ModelResponse(output=[_text("hi")], usage=Usage(requests=1), response_id="resp_1")

    async def stream_response(
        self, system_instructions: str | None, input: Any, model_settings: ModelSettings, tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff], tracing: ModelTracing, *,
        previous_response_id: str | None, conversation_id: str | None, prompt: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        self.seen.append(("stream_response", previous_response_id, conversation_id, prompt))
        response = Response(
            id="resp_1", created_at=0.0, model="minimal", object="response", output=[_text("hi")],
            tool_choice="auto", tools=[], parallel_tool_calls=True, status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", sequence_number=0, response=response)


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_a_custom_model_with_the_sdks_exact_signature_answers_in_both_modes(streaming: bool) -> None:
    model = Minimal()
    agency = Agency([Agent(name="A", model=model)])
    if streaming:
        stream = agency.get_response_stream("Hello")
        async for _ in stream:
            pass
        result = stream.result
    else:
        result = await agency.get_response("Hello")
    assert result.final_output == "hi"
    kind = "stream_response" if streaming else "get_response"
    assert model.seen == [(kind, None, None, None)]


async def test_the_retrying_wrapper_passes_every_keyword_argument_on_when_called_as_a_model() -> None:
    """RetryingModel is an `agents.Model` too: called with only `prompt`, it still hands the inner model all three."""
    model = Minimal()
    wrapped = RetryingModel(model, agent="A", model_name="minimal", policy=RetryPolicy(), timeout=None)
    arguments = (None, "Hello", ModelSettings(), [], None, [], ModelTracing.DISABLED)
    events = [event async for event in wrapped.stream_response(*arguments, prompt=None)]
    response = await wrapped.get_response(*arguments, prompt=None)
    assert [event.type for event in events] == ["response.completed"]
    assert response.output[0].type == "message"
    assert model.seen == [("stream_response", None, None, None), ("get_response", None, None, None)]


_UNTRACED = agents.RunConfig(tracing_disabled=True)


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_usage_of_a_response_without_tokens_counts_as_runner_counts_it(streaming: bool) -> None:
    """A streamed response that reports no usage is no request (the SDK's adapters mark the ones that are); a
    blocking one says how many it was. Runner's context usage and ours agree either way."""
    runner_agent = agents.Agent(name="A", model=Minimal())
    if streaming:
        streamed = agents.Runner.run_streamed(runner_agent, "Hello", run_config=_UNTRACED)
        async for _ in streamed.stream_events():
            pass
        runner_usage = streamed.context_wrapper.usage
        stream = Agency([Agent(name="A", model=Minimal())]).get_response_stream("Hello")
        async for _ in stream:
            pass
        usage = stream.result.usage
    else:
        runner_usage = (await agents.Runner.run(runner_agent, "Hello", run_config=_UNTRACED)).context_wrapper.usage
        usage = (await Agency([Agent(name="A", model=Minimal())]).get_response("Hello")).usage
    assert usage == runner_usage
    assert usage.requests == (0 if streaming else 1)
