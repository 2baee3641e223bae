"""The loop's less travelled branches: RunAgain, tool_choice reset, odd model streams, prompts, bad agent set-up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    AgentHooks,
    AgentOutputSchema,
    FunctionToolResult,
    GuardrailFunctionOutput,
    ModelSettings,
    RunContextWrapper,
    Tool,
    ToolsToFinalOutputResult,
    UserError,
    function_tool,
    output_guardrail,
)
from agents.items import ToolCallOutputItem
from openai.types.responses import ResponseFailedEvent, ResponseReasoningItem
from pydantic import BaseModel

from agency_swarm import Agency, Agent, ConfigError, ModelError
from agency_swarm.testing import ScriptedModel, ToolCall, send_message


class Verdict(BaseModel):
    ok: bool


async def test_structured_output_waits_for_text_with_run_again() -> None:
    model = ScriptedModel([[], '{"ok": true}'])  # first response has no items at all
    result = await Agent(name="Judge", output_type=Verdict, model=model).get_response("judge")
    assert result.final_output == Verdict(ok=True)
    assert len(model.calls) == 2


async def test_an_output_schema_instance_is_used_as_is_and_output_type_can_change() -> None:
    model = ScriptedModel(['{"ok": false}', '{"response": [1, 2]}'])  # non-object types are wrapped
    judge = Agent(name="Judge", output_type=AgentOutputSchema(Verdict), model=model)
    assert (await judge.get_response("a")).final_output == Verdict(ok=False)
    judge.output_type = list[int]
    assert (await judge.get_response("b")).final_output == [1, 2]


async def test_a_recipients_non_model_output_reaches_the_caller_as_json() -> None:
    ceo_model = ScriptedModel([send_message("Counter", "count"), "ok"])
    ceo = Agent(name="CEO", model=ceo_model)
    counter = Agent(name="Counter", output_type=list[int], model=ScriptedModel(['{"response": [1, 2, 3]}']))
    await Agency([ceo, [ceo, counter]]).get_response("go")
    assert ceo_model.calls[1].tool_outputs == ["[1, 2, 3]"]


async def test_tool_choice_is_reset_after_a_tool_ran() -> None:
    @function_tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    model = ScriptedModel([ToolCall("ping"), "done"])
    agent = Agent(name="Solo", tools=[ping], model=model, model_settings=ModelSettings(tool_choice="required"))
    await agent.get_response("go")
    assert [call.model_settings.tool_choice for call in model.calls] == ["required", None]


async def test_an_async_is_enabled_callback_decides_per_run() -> None:
    async def only_for_admins(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        return bool(ctx.context and ctx.context.get("admin"))

    @function_tool(is_enabled=only_for_admins)
    def wipe() -> str:
        """Dangerous."""
        return "wiped"

    model = ScriptedModel.each_turn(["hi"])
    agent = Agent(name="Solo", tools=[wipe], model=model)
    await agent.get_response("a", context={"admin": False})
    await agent.get_response("b", context={"admin": True})
    assert [call.tool_names for call in model.calls] == [[], ["wipe"]]


@function_tool
def ping() -> int:
    """Answers 7."""
    return 7


async def test_a_function_as_tool_use_behavior_decides_with_the_sdks_tool_results() -> None:
    seen: list[tuple[str, Any, str]] = []

    async def decide(ctx: Any, results: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        for result in results:
            assert isinstance(result.run_item, ToolCallOutputItem)
            seen.append((result.tool.name, result.output, result.run_item.raw_item["output"]))
        return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output * 6)

    model = ScriptedModel([ToolCall("ping"), "never asked"])
    agent = Agent(name="Solo", tools=[ping], tool_use_behavior=decide, model=model)
    result = await agent.get_response("go")
    assert seen == [("ping", 7, "7")]
    assert result.final_output == "42"  # no output_type: str(), as under Runner
    assert len(model.calls) == 1


async def test_a_function_as_tool_use_behavior_may_let_the_model_go_on() -> None:
    def decide(ctx: Any, results: Any) -> ToolsToFinalOutputResult:
        return ToolsToFinalOutputResult(is_final_output=False)

    agent = Agent(name="Solo", tools=[ping], tool_use_behavior=decide, model=ScriptedModel([ToolCall("ping"), "x"]))
    assert (await agent.get_response("go")).final_output == "x"


async def test_a_tool_use_behavior_function_returning_something_else_raises_the_sdks_error() -> None:
    def decide(ctx: Any, results: Any) -> Any:
        return None

    agent = Agent(name="Solo", tools=[ping], tool_use_behavior=decide, model=ScriptedModel([ToolCall("ping"), "x"]))
    with pytest.raises(UserError, match=r"Solo.*ToolsToFinalOutputResult"):
        await agent.get_response("go")


async def test_the_agents_prompt_reaches_the_model() -> None:
    model = ScriptedModel(["hi"])
    await Agent(name="Solo", prompt={"id": "pmpt_123"}, model=model).get_response("go")
    assert model.calls[0].prompt["id"] == "pmpt_123"


async def test_a_passing_output_guardrail_lets_the_output_through() -> None:
    @output_guardrail
    def fine(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="fine", tripwire_triggered=False)

    result = await Agent(name="Solo", output_guardrails=[fine], model=ScriptedModel(["hi"])).get_response("go")
    assert result.final_output == "hi"


# -- models that misbehave while streaming ------------------------------------------------------------------


class OddStreamModel(ScriptedModel):
    """Streams what the test says instead of a proper response."""

    def __init__(self, events: list[Any], *, with_aclose: bool = True) -> None:
        super().__init__(["unused"])
        self.events = events
        self.with_aclose = with_aclose

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        events = self.events

        class Plain:  # an async iterator that is not a generator: no aclose()
            def __init__(self) -> None:
                self.items = iter(events)

            def __aiter__(self) -> Plain:
                return self

            async def __anext__(self) -> Any:
                try:
                    return next(self.items)
                except StopIteration:
                    raise StopAsyncIteration from None

        async def generator() -> AsyncIterator[Any]:
            for event in events:
                yield event

        return generator() if self.with_aclose else Plain()


def failed_event() -> ResponseFailedEvent:
    return ResponseFailedEvent.model_validate({
        "type": "response.failed", "sequence_number": 0,
        "response": {
            "id": "resp_1", "object": "response", "created_at": 0, "model": "m", "status": "failed", "output": [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": {"code": "server_error", "message": "overloaded"},
        },
    })


async def test_a_failed_response_in_a_stream_raises_model_error_with_the_reason() -> None:
    agent = Agent(name="Solo", model=OddStreamModel([failed_event()]))
    stream = agent.get_response_stream("go", chat_id="f1")
    with pytest.raises(ModelError, match="overloaded") as caught:
        async for _ in stream:
            pass
    assert (caught.value.agent, caught.value.chat_id, caught.value.depth) == ("Solo", "f1", 0)


@pytest.mark.parametrize("with_aclose", [True, False])
async def test_a_stream_that_ends_without_completion_raises_model_error(with_aclose: bool) -> None:
    agent = Agent(name="Solo", model=OddStreamModel([], with_aclose=with_aclose))
    with pytest.raises(ModelError, match=r"response\.completed"):
        async for _ in agent.get_response_stream("go"):
            pass


class ReasoningModel(ScriptedModel):
    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        response = await super().get_response(*args, **kwargs)
        reasoning = ResponseReasoningItem(id="rs_1", type="reasoning", summary=[])
        response.output.insert(0, reasoning)
        return response


async def test_reasoning_items_are_kept_in_the_thread_before_the_message() -> None:
    agent = Agent(name="Solo", model=ReasoningModel(["thought through"]))
    result = await agent.get_response("go")
    assert result.final_output == "thought through"
    assert [item.get("type") for item in result.new_items] == [None, "reasoning", "message"]


# -- a failure that is not a tool error stops the turn, and the thread stays valid ---------------------------


class ExplodingHooks(AgentHooks[Any]):
    async def on_tool_start(self, context: Any, agent: Any, tool: Tool) -> None:
        raise RuntimeError("hook bug")


async def test_an_error_outside_the_tool_in_parallel_calls_raises_and_repairs_the_thread() -> None:
    @function_tool
    def one() -> str:
        """One."""
        return "1"

    @function_tool
    def two() -> str:
        """Two."""
        return "2"

    saved: dict[str, Any] = {}
    agent = Agent(name="Solo", tools=[one, two], hooks=ExplodingHooks(),
                  model=ScriptedModel([[ToolCall("one"), ToolCall("two")], "never"]))
    agency = Agency(agent, save_threads_callback=lambda chat, threads: saved.update(threads))
    with pytest.raises(UserError, match="Error running tool one: hook bug") as raised:  # as Runner wraps it
        await agency.get_response("go")
    assert isinstance(raised.value.__cause__, RuntimeError)
    items = saved["user->Solo"]
    calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
    outputs = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
    assert len(calls) == 2
    assert calls == outputs


# -- bad agent set-up and bad calls --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"description": 3}, "description"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": True}, "max_steps"),
        ({"handoffs": [Agent(name="Other")]}, "handoffs"),
    ],
)
def test_bad_agent_settings_raise_config_error(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Agent(name="Bad", **kwargs)


def test_handoff_description_becomes_the_description() -> None:
    assert Agent(name="A", handoff_description="Does A").description == "Does A"


async def test_a_model_reassigned_to_neither_a_name_nor_a_model_is_a_clear_error() -> None:
    agent = Agent(name="Solo", model=ScriptedModel(["hi"]))
    agent.model = 42  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="model"):
        await agent.get_response("go")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"message": 5}, "message"),
        ({"message": "hi", "additional_instructions": 5}, "additional_instructions"),
        ({"message": "hi", "sender_name": "A->B"}, "sender_name"),
        ({"message": "hi", "sender_name": ""}, "sender_name"),
    ],
)
async def test_bad_call_arguments_raise_before_anything_runs(kwargs: dict[str, Any], fragment: str) -> None:
    model = ScriptedModel(["hi"])
    with pytest.raises(ConfigError, match=fragment):
        await Agent(name="Solo", model=model).get_response(**kwargs)
    assert model.calls == []


def test_agent_get_response_sync_with_a_sender_name() -> None:
    model = ScriptedModel(["hello, boss"])
    agent = Agent(name="Solo", model=model)
    result = agent.get_response_sync("hi", sender_name="Boss", chat_id="s")
    assert result.final_output == "hello, boss"
    assert list(agent.wiring.thread_manager.get_threads("s")) == ["Boss->Solo"]
