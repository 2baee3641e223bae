"""Function tools, limits, structured output, hooks and guardrails through the public API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import (
    AgentHooks,
    FunctionTool,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    function_tool,
    input_guardrail,
    output_guardrail,
    tool_namespace,
)
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall
from pydantic import BaseModel

from agency_swarm import Agency, Agent, ChatPaused, MaxStepsExceeded, OutputValidationError
from agency_swarm.testing import ScriptedModel, Text, ToolCall, send_message

# -- helpers -------------------------------------------------------------------------------------------


def outputs_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "function_call_output"]


def calls_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "function_call"]


def output_for(items: list[dict[str, Any]], call_name: str) -> str:
    """The output text of the (single) call named `call_name` in `items`."""
    (call,) = [item for item in calls_of(items) if item["name"] == call_name]
    (out,) = [item for item in outputs_of(items) if item["call_id"] == call["call_id"]]
    return str(out["output"])


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
async def shout(text: str) -> str:
    """Upper-case the text, asynchronously."""
    await asyncio.sleep(0)
    return text.upper()


# -- running tools -------------------------------------------------------------------------------------


async def test_sync_tool_output_reaches_model_as_function_call_output() -> None:
    model = ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), "five"])
    agent = Agent(name="Calc", model=model, tools=[add])

    result = await agent.get_response("add 2 and 3")

    assert result.final_output == "five"
    assert len(model.calls) == 2
    second_input = model.calls[1].input
    (call,) = calls_of(second_input)
    (out,) = outputs_of(second_input)
    assert call["name"] == "add"
    assert out["call_id"] == call["call_id"]
    assert out["output"] == "5"
    assert model.calls[1].tool_outputs == ["5"]


async def test_async_tool_output_reaches_model() -> None:
    model = ScriptedModel([ToolCall("shout", {"text": "hi there"}), "done"])
    agent = Agent(name="Loud", model=model, tools=[shout])

    result = await agent.get_response("shout")

    assert result.final_output == "done"
    assert model.calls[1].tool_outputs == ["HI THERE"]
    # the thread keeps the call and its output
    assert output_for(result.new_items, "shout") == "HI THERE"


async def test_parallel_tool_calls_run_concurrently_and_outputs_keep_call_order() -> None:
    first_ready = asyncio.Event()
    second_ready = asyncio.Event()
    finished: list[str] = []

    @function_tool
    async def first() -> str:
        """Waits for second to start."""
        first_ready.set()
        await second_ready.wait()  # deadlocks unless `second` runs at the same time
        finished.append("first")
        return "out-first"

    @function_tool
    async def second() -> str:
        """Waits for first to start, then finishes before it."""
        second_ready.set()
        await first_ready.wait()
        finished.append("second")
        return "out-second"

    model = ScriptedModel([[ToolCall("first"), ToolCall("second")], "both done"])
    agent = Agent(name="Par", model=model, tools=[first, second])

    result = await asyncio.wait_for(agent.get_response("go"), timeout=10)

    assert result.final_output == "both done"
    assert sorted(finished) == ["first", "second"]
    second_input = model.calls[1].input
    names_in_call_order = [item["name"] for item in calls_of(second_input)]
    assert names_in_call_order == ["first", "second"]
    call_ids = [item["call_id"] for item in calls_of(second_input)]
    assert [item["call_id"] for item in outputs_of(second_input)] == call_ids
    assert model.calls[1].tool_outputs == ["out-first", "out-second"]


async def test_outputs_follow_call_order_even_when_later_call_finishes_first() -> None:
    slow_may_finish = asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Finishes only after fast has finished."""
        await slow_may_finish.wait()
        return "slow-out"

    @function_tool
    async def fast() -> str:
        """Finishes first."""
        slow_may_finish.set()
        return "fast-out"

    model = ScriptedModel([[ToolCall("slow"), ToolCall("fast")], "ok"])
    agent = Agent(name="Order", model=model, tools=[slow, fast])

    await asyncio.wait_for(agent.get_response("go"), timeout=10)

    assert model.calls[1].tool_outputs == ["slow-out", "fast-out"]


async def test_raising_tool_gives_model_error_type_and_message_and_turn_goes_on() -> None:
    @function_tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"kaboom: {reason}")

    model = ScriptedModel([ToolCall("explode", {"reason": "bad input"}), "recovered"])
    agent = Agent(name="Fragile", model=model, tools=[explode])

    result = await agent.get_response("try it")

    assert result.final_output == "recovered"
    (output,) = model.calls[1].tool_outputs
    assert "ValueError" in output
    assert "kaboom: bad input" in output


async def test_malformed_json_arguments_give_error_output_and_turn_goes_on() -> None:
    model = ScriptedModel([ToolCall("add", "{not json"), "sorry"])
    agent = Agent(name="Calc", model=model, tools=[add])

    result = await agent.get_response("add")

    assert result.final_output == "sorry"
    (output,) = model.calls[1].tool_outputs
    assert "error" in output.lower()
    assert "json" in output.lower()


async def test_wrong_typed_arguments_give_error_output_and_turn_goes_on() -> None:
    model = ScriptedModel([ToolCall("add", {"a": "not a number", "b": 1}), "sorry"])
    agent = Agent(name="Calc", model=model, tools=[add])

    result = await agent.get_response("add")

    assert result.final_output == "sorry"
    (output,) = model.calls[1].tool_outputs
    assert "error" in output.lower()
    assert output != "1"


async def test_unknown_tool_lists_available_tools() -> None:
    model = ScriptedModel([ToolCall("multiply", {"a": 1, "b": 2}), "fine"])
    agent = Agent(name="Calc", model=model, tools=[add, shout])

    result = await agent.get_response("multiply")

    assert result.final_output == "fine"
    (output,) = model.calls[1].tool_outputs
    assert "multiply" in output
    assert "add" in output
    assert "shout" in output


async def test_unknown_tool_in_agency_lists_send_message_too() -> None:
    ceo_model = ScriptedModel([ToolCall("nope"), "fine"])
    ceo = Agent(name="CEO", model=ceo_model, tools=[add])
    dev = Agent(name="Developer", model=ScriptedModel(["unused"]))

    await Agency([ceo, [ceo, dev]]).get_response("hi")

    (output,) = ceo_model.calls[1].tool_outputs
    assert "nope" in output
    assert "add" in output
    assert "send_message" in output


async def test_context_reaches_tool_through_run_context_wrapper() -> None:
    seen: list[Any] = []

    @function_tool
    def whoami(ctx: RunContextWrapper[dict[str, str]]) -> str:
        """Reads the user id from the run context."""
        seen.append(ctx.context)
        return ctx.context["user_id"]

    model = ScriptedModel([ToolCall("whoami"), "done"])
    agent = Agent(name="Ctx", model=model, tools=[whoami])
    context = {"user_id": "u-42"}

    await agent.get_response("who am I?", context=context)

    assert seen == [context]
    assert seen[0] is context
    assert model.calls[1].tool_outputs == ["u-42"]


async def test_context_reaches_tool_in_recipient_through_agency() -> None:
    seen: list[Any] = []

    @function_tool
    def lookup(ctx: ToolContext[dict[str, int]]) -> str:
        """Reads the context inside a recipient agent."""
        seen.append((ctx.context, ctx.tool_name))
        return str(ctx.context["n"])

    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "look it up"), "ceo done"]))
    dev_model = ScriptedModel([ToolCall("lookup"), "dev done"])
    dev = Agent(name="Developer", model=dev_model, tools=[lookup])
    context = {"n": 7}

    result = await Agency([ceo, [ceo, dev]]).get_response("go", context=context)

    assert result.final_output == "ceo done"
    assert seen == [(context, "lookup")]
    assert seen[0][0] is context
    assert dev_model.calls[1].tool_outputs == ["7"]


async def test_disabled_tools_are_not_sent_to_the_model() -> None:
    @function_tool(is_enabled=False)
    def hidden() -> str:
        """Never offered."""
        return "x"

    @function_tool(is_enabled=lambda ctx, agent: False)
    def hidden_by_callable() -> str:
        """Never offered either."""
        return "y"

    model = ScriptedModel(["hello"])
    agent = Agent(name="T", model=model, tools=[add, hidden, hidden_by_callable])

    await agent.get_response("hi")

    assert model.calls[0].tool_names == ["add"]


async def test_stop_on_first_tool_makes_tool_output_final() -> None:
    model = ScriptedModel([ToolCall("add", {"a": 20, "b": 22})])
    agent = Agent(name="Stopper", model=model, tools=[add], tool_use_behavior="stop_on_first_tool")

    result = await agent.get_response("add")

    assert result.final_output == "42"  # as under Runner: without an output_type the tool's output becomes str()
    assert len(model.calls) == 1


async def test_stop_on_first_tool_with_parallel_calls_uses_first_in_call_order() -> None:
    first_may_finish = asyncio.Event()

    @function_tool
    async def first_tool() -> str:
        """Finishes after second_tool."""
        await first_may_finish.wait()
        return "first"

    @function_tool
    def second_tool() -> str:
        """Finishes first."""
        first_may_finish.set()
        return "second"

    model = ScriptedModel([[ToolCall("first_tool"), ToolCall("second_tool")]])
    agent = Agent(
        name="Stopper", model=model, tools=[first_tool, second_tool], tool_use_behavior="stop_on_first_tool"
    )

    result = await asyncio.wait_for(agent.get_response("go"), timeout=10)

    assert result.final_output == "first"
    assert len(model.calls) == 1


async def test_stop_at_tool_names_stops_only_on_listed_tool() -> None:
    model = ScriptedModel([ToolCall("shout", {"text": "a"}), ToolCall("add", {"a": 1, "b": 1}), "unused"])
    agent = Agent(
        name="Stopper", model=model, tools=[add, shout], tool_use_behavior={"stop_at_tool_names": ["add"]}
    )

    result = await agent.get_response("go")

    assert result.final_output == "2"
    assert len(model.calls) == 2


async def test_tool_context_sees_live_usage() -> None:
    seen: list[int] = []

    @function_tool
    def count(ctx: RunContextWrapper[Any]) -> str:
        """Reports the requests made so far."""
        seen.append(ctx.usage.requests)
        return "ok"

    model = ScriptedModel([ToolCall("count"), ToolCall("count"), "done"])
    agent = Agent(name="Counter", model=model, tools=[count])

    await agent.get_response("go")

    assert seen == [1, 2]


# -- max_steps -----------------------------------------------------------------------------------------


async def test_max_steps_exceeded_at_top_level() -> None:
    model = ScriptedModel(lambda call: ToolCall("add", {"a": 1, "b": 1}))
    agent = Agent(name="Looper", model=model, tools=[add], max_steps=2)

    with pytest.raises(MaxStepsExceeded) as info:
        await agent.get_response("loop", chat_id="chat-7")

    error = info.value
    assert error.agent == "Looper"
    assert error.chat_id == "chat-7"
    assert error.max_steps == 2
    assert "Looper" in str(error)
    assert "chat-7" in str(error)
    assert "2" in str(error)
    assert len(model.calls) == 2


async def test_max_steps_inside_recipient_becomes_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "loop forever"), "ceo carried on"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev_model = ScriptedModel(lambda call: ToolCall("add", {"a": 1, "b": 1}))
    dev = Agent(name="Developer", model=dev_model, tools=[add], max_steps=2)

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ceo carried on"
    assert len(dev_model.calls) == 2
    (output,) = ceo_model.calls[1].tool_outputs
    assert "Developer" in output
    assert "MaxStepsExceeded" in output
    assert "max_steps=2" in output


# -- structured output ---------------------------------------------------------------------------------


class Report(BaseModel):
    title: str
    score: int


async def test_output_type_on_entry_agent_gives_validated_instance() -> None:
    model = ScriptedModel([json.dumps({"title": "Q3", "score": 9})])
    agent = Agent(name="Reporter", model=model, output_type=Report)

    result = await agent.get_response("report")

    assert isinstance(result.final_output, Report)
    assert result.final_output == Report(title="Q3", score=9)
    assert model.calls[0].output_schema is not None


async def test_output_type_on_recipient_gives_caller_json_of_object() -> None:
    ceo_model = ScriptedModel([send_message("Analyst", "report please"), "thanks"])
    ceo = Agent(name="CEO", model=ceo_model)
    analyst = Agent(
        name="Analyst", model=ScriptedModel([json.dumps({"title": "Q4", "score": 3})]), output_type=Report
    )

    result = await Agency([ceo, [ceo, analyst]]).get_response("go")

    assert result.final_output == "thanks"
    (output,) = ceo_model.calls[1].tool_outputs
    assert json.loads(output) == {"title": "Q4", "score": 3}
    assert Report.model_validate_json(output) == Report(title="Q4", score=3)


async def test_invalid_json_for_output_type_raises_output_validation_error() -> None:
    model = ScriptedModel(["this is not json"])
    agent = Agent(name="Reporter", model=model, output_type=Report)

    with pytest.raises(OutputValidationError) as info:
        await agent.get_response("report", chat_id="c1")

    assert info.value.agent == "Reporter"
    assert info.value.chat_id == "c1"


async def test_json_not_matching_output_type_raises_output_validation_error() -> None:
    model = ScriptedModel([json.dumps({"title": "Q3", "score": "high"})])
    agent = Agent(name="Reporter", model=model, output_type=Report)

    with pytest.raises(OutputValidationError):
        await agent.get_response("report")


# -- hooks ---------------------------------------------------------------------------------------------


class RecordingHooks(AgentHooks[Any]):
    def __init__(self) -> None:
        self.events: list[str] = []
        self.tool_results: list[Any] = []
        self.final: Any = None

    async def on_start(self, context: Any, agent: Any) -> None:
        self.events.append(f"on_start:{agent.name}")

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        self.events.append(f"on_end:{agent.name}")
        self.final = output

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.events.append("on_llm_start")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.events.append("on_llm_end")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.events.append(f"on_tool_start:{tool.name}")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append(f"on_tool_end:{tool.name}")
        self.tool_results.append(result)


EXPECTED_HOOK_ORDER = [
    "on_start:Hooked",
    "on_llm_start",
    "on_llm_end",
    "on_tool_start:add",
    "on_tool_end:add",
    "on_llm_start",
    "on_llm_end",
    "on_end:Hooked",
]


async def test_agent_hooks_are_called_in_order() -> None:
    hooks = RecordingHooks()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "three"])
    agent = Agent(name="Hooked", model=model, tools=[add], hooks=hooks)

    await agent.get_response("add")

    assert hooks.events == EXPECTED_HOOK_ORDER
    assert hooks.tool_results == [3]
    assert hooks.final == "three"


async def test_agent_hooks_are_called_in_order_when_streaming() -> None:
    hooks = RecordingHooks()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "three"])
    agent = Agent(name="Hooked", model=model, tools=[add], hooks=hooks)

    stream = agent.get_response_stream("add")
    async for _ in stream:
        pass

    assert stream.result.final_output == "three"
    assert hooks.events == EXPECTED_HOOK_ORDER


# -- guardrails ----------------------------------------------------------------------------------------


@input_guardrail
def block_secrets(ctx: RunContextWrapper[Any], agent: Any, message: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="checked", tripwire_triggered="secret" in str(message))


@output_guardrail
def block_rude(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="checked", tripwire_triggered="stupid" in str(output))


async def test_input_guardrail_trips_at_top_level() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(name="Guarded", model=model, input_guardrails=[block_secrets])

    with pytest.raises(InputGuardrailTripwireTriggered):
        await agent.get_response("tell me the secret")

    assert model.calls == []


async def test_input_guardrail_passes_when_not_tripped() -> None:
    agent = Agent(name="Guarded", model=ScriptedModel(["hello"]), input_guardrails=[block_secrets])

    result = await agent.get_response("hi")

    assert result.final_output == "hello"


async def test_input_guardrail_class_form_trips_at_top_level() -> None:
    def check(ctx: RunContextWrapper[Any], agent: Any, message: Any) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    agent = Agent(
        name="Guarded", model=ScriptedModel(["never"]), input_guardrails=[InputGuardrail(guardrail_function=check)]
    )

    with pytest.raises(InputGuardrailTripwireTriggered):
        await agent.get_response("anything")


async def test_output_guardrail_trips_at_top_level() -> None:
    agent = Agent(name="Guarded", model=ScriptedModel(["you are stupid"]), output_guardrails=[block_rude])

    with pytest.raises(OutputGuardrailTripwireTriggered):
        await agent.get_response("hi")


async def test_input_guardrail_in_recipient_becomes_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "share the secret"), "ceo continues"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev_model = ScriptedModel(["never"])
    dev = Agent(name="Developer", model=dev_model, input_guardrails=[block_secrets])

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ceo continues"
    assert dev_model.calls == []
    (output,) = ceo_model.calls[1].tool_outputs
    assert "Developer" in output
    assert "InputGuardrailTripwireTriggered" in output


async def test_output_guardrail_in_recipient_becomes_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "say something"), "ceo continues"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel(["stupid answer"]), output_guardrails=[block_rude])

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ceo continues"
    (output,) = ceo_model.calls[1].tool_outputs
    assert "Developer" in output
    assert "OutputGuardrailTripwireTriggered" in output


async def test_text_step_helper_is_a_plain_reply() -> None:
    agent = Agent(name="Plain", model=ScriptedModel([Text("plain")]))

    result = await agent.get_response("hi")

    assert result.final_output == "plain"


async def test_a_tool_with_a_timeout_goes_through_the_sdk_and_the_model_reads_the_timeout() -> None:
    never = asyncio.Event()

    @function_tool(timeout=0.01)
    async def slow() -> str:
        """Never finishes on its own."""
        await never.wait()
        return "unreachable"

    model = ScriptedModel([ToolCall("slow"), "gave up"])
    result = await Agency(Agent(name="Solo", tools=[slow], model=model)).get_response("go")

    assert result.final_output == "gave up"
    assert "timed out" in model.calls[1].tool_outputs[0]


async def test_a_hand_written_tool_declaring_run_context_wrapper_gets_the_plain_context() -> None:
    seen: list[Any] = []

    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> str:
        seen.append(ctx)
        return f"got {arguments}"

    tool = FunctionTool(
        name="plain",
        description="A tool written by hand against RunContextWrapper.",
        params_json_schema={"type": "object", "properties": {}, "required": [], "additionalProperties": False},
        on_invoke_tool=invoke,
    )
    model = ScriptedModel([ToolCall("plain", {}), "ok"])
    await Agency(Agent(name="Solo", tools=[tool], model=model)).get_response("go", context={"user": 7})

    assert model.calls[1].tool_outputs == ["got {}"]
    assert seen[0].context == {"user": 7}
    assert not isinstance(seen[0], ToolContext)  # the SDK's rule: such wrappers get only the base context


def _namespaced_lookups(ran: list[str]) -> list[Any]:
    def lookup_in(label: str, **options: Any) -> Any:
        @function_tool(name_override="lookup", **options)
        def lookup(q: str) -> str:
            """Look a record up."""
            ran.append(f"{label} {q}")
            return f"{label} record {q}"

        return lookup

    return [
        *tool_namespace(name="crm", description="Customer records.", tools=[lookup_in("crm", needs_approval=True)]),
        *tool_namespace(name="billing", description="Invoices.", tools=[lookup_in("billing")]),
    ]


def _namespaced_call(namespace: str | None, call_id: str = "call_ns") -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{call_id}", call_id=call_id, name="lookup", arguments='{"q": "x"}',
        namespace=namespace,
    )


async def test_an_approved_namespaced_call_runs_the_tool_it_named_after_resume() -> None:
    """The call waits for approval as crm.lookup (billing.lookup needs none), and after resume crm.lookup runs: the
    stored call keeps its namespace."""
    ran: list[str] = []
    agent = Agent(name="A", tools=_namespaced_lookups(ran), model=ScriptedModel([_namespaced_call("crm"), "done"]))
    agency = Agency(agent)
    paused = await agency.get_response("find x", chat_id="ns")
    assert paused.paused
    assert ran == []
    result = await agency.resume("ns", approve=[paused.interruptions[0].call_id])
    assert result.final_output == "done"
    assert ran == ["crm x"]


async def test_a_call_that_names_no_namespace_of_the_agent_runs_nothing() -> None:
    ran: list[str] = []
    script = [[_namespaced_call("hr", "call_1"), _namespaced_call(None, "call_2")], "done"]
    model = ScriptedModel(script)
    agent = Agent(name="A", tools=_namespaced_lookups(ran), model=model)
    result = await Agency(agent).get_response("find x")
    assert result.final_output == "done"
    assert ran == []
    assert model.calls[1].tool_outputs == [
        "Error: there is no tool named 'hr.lookup'. Available tools: crm.lookup, billing.lookup.",
        "Error: there is no tool named 'lookup'. Available tools: crm.lookup, billing.lookup.",
    ]


async def test_a_send_message_call_with_a_namespace_sends_nothing() -> None:
    """The send tool has no namespace: a call that gives it one names no tool of the agent."""
    call = ResponseFunctionToolCall(
        type="function_call", id="fc_1", call_id="call_1", name="send_message", namespace="team",
        arguments=json.dumps({"recipient_agent": "Dev", "message": "build it"}),
    )
    ceo_model = ScriptedModel([call, "done"])
    dev_model = ScriptedModel(["built"])
    ceo, dev = Agent(name="CEO", model=ceo_model), Agent(name="Dev", model=dev_model)
    result = await Agency(ceo, communication_flows=[(ceo, dev)]).get_response("go")
    assert result.final_output == "done"
    assert dev_model.calls == []
    assert ceo_model.calls[1].tool_outputs == [
        "Error: there is no tool named 'team.send_message'. Available tools: send_message."
    ]


async def test_an_interruption_names_the_namespace_of_the_tool_that_waits() -> None:
    ran: list[str] = []
    agent = Agent(name="A", tools=_namespaced_lookups(ran), model=ScriptedModel([_namespaced_call("crm"), "done"]))
    agency = Agency(agent)
    paused = await agency.get_response("find x", chat_id="ns")
    [waiting] = paused.interruptions
    assert (waiting.namespace, waiting.tool) == ("crm", "lookup")
    with pytest.raises(ChatPaused) as refused:
        await agency.get_response("and y?", chat_id="ns")
    assert [(item.namespace, item.tool) for item in refused.value.interruptions] == [("crm", "lookup")]
