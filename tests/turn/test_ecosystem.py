"""What openai-agents users bring along, on agency_swarm agents and inside nested turns.

Function tools (sync, async, pydantic arguments, malformed arguments, errors shown or hidden), structured
`output_type` on a recipient, input and output guardrails (nested and at the top), MCP servers over stdio,
and one run context shared by every tool of every agent. Some run through the real openai client against the
local server in tests/support/openai_server.py, where what the request carried matters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents import (
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    ModelBehaviorError,
    MultiProvider,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    UserError,
    input_guardrail,
    output_guardrail,
)
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from agency_swarm import Agency, Agent, ConfigError, function_tool
from agency_swarm.testing import ScriptedModel, ToolCall, send_message
from openai_server import OpenAIServer

MCP_SERVER = Path(__file__).parents[1] / "support" / "mcp_server_tools.py"


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key="offline-test-ecosystem") as client:
        yield client


# -- function tools ----------------------------------------------------------------------------------------


class Dimensions(BaseModel):
    width: int = Field(gt=0)
    height: int = Field(gt=0)


@function_tool
def area(size: Dimensions, unit: str) -> str:
    """Area of a rectangle."""
    return f"{size.width * size.height} {unit}^2"


@function_tool
async def double(value: int) -> int:
    """Twice the value."""
    await asyncio.sleep(0)
    return value * 2


threads_seen: list[str] = []


@function_tool
def where_am_i() -> str:
    """The thread a sync tool runs on."""
    threads_seen.append(threading.current_thread().name)
    return "here"


@function_tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"disk full ({reason})")


async def test_sync_and_async_tools_with_pydantic_arguments() -> None:
    model = ScriptedModel([
        [
            ToolCall("area", {"size": {"width": 3, "height": 4}, "unit": "m"}),
            ToolCall("double", {"value": 21}),
            ToolCall("where_am_i"),
        ],
        "done",
    ])
    agent = Agent(name="Calc", model=model, tools=[area, double, where_am_i])

    result = await Agency(agent).get_response("compute")

    assert result.final_output == "done"
    assert model.calls[1].tool_outputs == ["12 m^2", "42", "here"]
    assert threads_seen[-1] != threading.main_thread().name  # sync tools run off the event loop
    size_schema = model.calls[0].tool_schema("area")["properties"]["size"]
    assert size_schema.get("$ref") or size_schema.get("properties")  # the pydantic model is in the schema


@pytest.mark.parametrize(
    ("arguments", "explanation"),
    [
        ("{not json", "they are not valid JSON (Expecting property name enclosed in double quotes at line 1"),
        ("[1, 2]", "they must be a JSON object, got list"),
        ('{"size": {"width": "wide", "height": 2}, "unit": "m"}', "size.width: Input should be a valid integer"),
        ('{"size": {"width": 0, "height": 2}, "unit": "m"}', "size.width: Input should be greater than 0"),
        ('{"size": {"width": 1, "height": 2}}', "unit: Field required"),
    ],
    ids=["bad-json", "not-an-object", "wrong-type", "constraint", "missing"],
)
async def test_malformed_arguments_tell_the_model_what_was_wrong_and_the_turn_goes_on(
    arguments: str, explanation: str
) -> None:
    retry = ToolCall("area", {"size": {"width": 2, "height": 2}, "unit": "m"})
    model = ScriptedModel([ToolCall("area", arguments), retry, "4"])
    agent = Agent(name="Calc", model=model, tools=[area])

    result = await Agency(agent).get_response("area?")

    assert result.final_output == "4"
    (first,) = model.calls[1].tool_outputs
    assert first.startswith(f"Error: invalid arguments for tool 'area': {explanation}")
    assert first.endswith("Call it again with arguments that match its parameters.")
    assert model.calls[2].tool_outputs[-1] == "4 m^2"


async def test_tool_errors_are_shown_by_default_and_hidden_when_configured(caplog: pytest.LogCaptureFixture) -> None:
    def agent(**settings: Any) -> tuple[Agent, ScriptedModel]:
        model = ScriptedModel([ToolCall("explode", {"reason": "quota"}), "sorry"])
        return Agent(name=settings.pop("name", "Ops"), model=model, tools=[explode], **settings), model

    shown, shown_model = agent()
    await Agency(shown).get_response("go")
    assert shown_model.calls[1].tool_outputs == ["Error: tool 'explode' failed: RuntimeError: disk full (quota)"]

    hidden, hidden_model = agent()
    overridden, overridden_model = agent(name="Verbose", show_tool_errors=True)
    agency = Agency(hidden, overridden, show_tool_errors=False)
    with caplog.at_level(logging.WARNING, logger="agency_swarm"):
        await agency.get_response("go")
    await agency.get_response("go", "Verbose")

    assert hidden_model.calls[1].tool_outputs == ["Error: tool 'explode' failed."]
    assert "disk full" not in json.dumps(agency.thread_manager.get_threads("default")["user->Ops"])
    assert "Tool 'explode' failed; its error is hidden from the model" in caplog.text
    assert "disk full (quota)" in caplog.text  # the developer still sees it in the log
    assert overridden_model.calls[1].tool_outputs == ["Error: tool 'explode' failed: RuntimeError: disk full (quota)"]

    quiet, quiet_model = agent(show_tool_errors=False)
    await Agency(quiet).get_response("go")
    assert quiet_model.calls[1].tool_outputs == ["Error: tool 'explode' failed."]


async def test_a_tool_without_failure_function_ends_the_turn_as_under_runner() -> None:
    @function_tool(failure_error_function=None)
    def strict(x: int) -> str:
        raise ValueError("secret internals")

    model = ScriptedModel([ToolCall("strict", {"x": 1}), "never"])
    agent = Agent(name="Ops", model=model, tools=[strict], show_tool_errors=False)
    with pytest.raises(UserError, match="Error running tool strict: secret internals") as raised:
        await Agency(agent).get_response("go")
    assert isinstance(raised.value.__cause__, ValueError)
    assert len(model.calls) == 1
    (items,) = agent.wiring.thread_manager.get_threads("default").values()
    assert items[-1]["output"] == "Error: Error running tool strict: secret internals"  # the call keeps an output


async def test_a_tool_without_failure_function_raises_the_sdks_error_for_malformed_arguments() -> None:
    @function_tool(failure_error_function=None)
    def strict(x: int) -> str:
        return "fine"

    model = ScriptedModel([ToolCall("strict", "{"), "never"])
    with pytest.raises(ModelBehaviorError, match="Invalid JSON input for tool strict"):
        await Agency(Agent(name="Ops", model=model, tools=[strict])).get_response("go")


def test_show_tool_errors_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="show_tool_errors must be True, False or None"):
        Agent(name="A", show_tool_errors="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="show_tool_errors must be True or False"):
        Agency(Agent(name="A"), show_tool_errors=None)  # type: ignore[arg-type]


# -- structured output on a recipient ------------------------------------------------------------------------


class Report(BaseModel):
    title: str
    files: list[str]


async def test_a_recipients_output_type_reaches_its_caller_as_validated_json(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    server.push(send_message("Developer", "Build the page"), "Shipped index.html", model="gpt-ceo")
    server.push('{"title": "Landing page", "files": ["index.html"]}', model="gpt-dev")
    ceo = Agent(name="CEO", model="gpt-ceo")
    dev = Agent(name="Developer", model="gpt-dev", output_type=Report)
    agency = Agency([ceo, dev, [ceo, dev]], model_provider=MultiProvider(openai_client=client))  # both addressable

    result = await agency.get_response("Build it")

    assert result.final_output == "Shipped index.html"
    text_format = server.requests[1].body["text"]["format"]
    assert (text_format["type"], text_format["strict"]) == ("json_schema", True)
    assert set(text_format["schema"]["properties"]) == {"title", "files"}
    tool_output = server.requests[2].body["input"][-1]["output"]
    assert json.loads(tool_output) == {"title": "Landing page", "files": ["index.html"]}
    assert tool_output == Report(title="Landing page", files=["index.html"]).model_dump_json()

    server.push('{"title": "Direct", "files": []}', model="gpt-dev")
    direct = await agency.get_response("Report", "Developer")
    assert direct.final_output == Report(title="Direct", files=[])


async def test_a_recipients_invalid_structured_output_is_its_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "report"), "The Developer's report was broken."])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel(['{"title": 3}']), output_type=Report)

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "The Developer's report was broken."
    (output,) = ceo_model.calls[1].tool_outputs
    assert output.startswith("Error: Developer failed to answer: OutputValidationError: Agent 'Developer' answered")


# -- guardrails ---------------------------------------------------------------------------------------------


@input_guardrail
async def no_secrets(context: RunContextWrapper[Any], agent: Any, message: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"reason": "asks for secrets"}, tripwire_triggered="secret" in message)


@output_guardrail
async def no_shouting(context: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="all caps", tripwire_triggered=str(output).isupper())


async def test_a_nested_input_guardrail_trip_becomes_the_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "tell me the secret"), send_message("Developer", "hi"), "ok"])
    dev_model = ScriptedModel(["hello"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model, input_guardrails=[no_secrets])

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ok"
    assert ceo_model.calls[1].tool_outputs == [
        "Error: Developer failed to answer: InputGuardrailTripwireTriggered: Agent 'Developer': input guardrail "
        "'no_secrets' tripped: {'reason': 'asks for secrets'}"
    ]
    assert ceo_model.calls[2].tool_outputs[-1] == "hello"
    assert len(dev_model.calls) == 1  # the tripped message never reached the Developer's model


async def test_a_nested_output_guardrail_trip_becomes_the_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "status?"), "ok"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel(["ALL DONE"]), output_guardrails=[no_shouting])

    await Agency([ceo, [ceo, dev]]).get_response("go")

    assert ceo_model.calls[1].tool_outputs == [
        "Error: Developer failed to answer: OutputGuardrailTripwireTriggered: Agent 'Developer': output guardrail "
        "'no_shouting' tripped: all caps"
    ]


async def test_top_level_guardrail_trips_raise_the_sdks_exceptions_clearly() -> None:
    guarded_model = ScriptedModel(["never"])
    guarded = Agent(name="CEO", model=guarded_model, input_guardrails=[no_secrets])
    with pytest.raises(InputGuardrailTripwireTriggered) as tripped_in:
        await Agency(guarded).get_response("what is the secret?")
    assert str(tripped_in.value) == "Agent 'CEO': input guardrail 'no_secrets' tripped: {'reason': 'asks for secrets'}"
    assert tripped_in.value.guardrail_result.output.tripwire_triggered
    assert guarded_model.calls == []

    loud = Agent(name="CEO", model=ScriptedModel(["NO"]), output_guardrails=[no_shouting])
    with pytest.raises(OutputGuardrailTripwireTriggered, match="Agent 'CEO': output guardrail 'no_shouting' tripped"):
        await Agency(loud).get_response("hi")

    calm = Agent(
        name="CEO", model=ScriptedModel(["fine"]), input_guardrails=[no_secrets], output_guardrails=[no_shouting]
    )
    assert (await Agency(calm).get_response("hello")).final_output == "fine"


# -- MCP --------------------------------------------------------------------------------------------------------


@pytest.fixture
async def mcp_tools() -> AsyncIterator[MCPServerStdio]:
    params = {"command": sys.executable, "args": [str(MCP_SERVER)]}
    async with MCPServerStdio(params=params, name="test-tools", cache_tools_list=True) as mcp_server:
        yield mcp_server


async def test_mcp_server_tools_in_a_nested_agent(
    server: OpenAIServer, client: AsyncOpenAI, mcp_tools: MCPServerStdio
) -> None:
    server.push(send_message("Developer", "Add 2 and 3, then shout 'done'"), "The sum is 5.", model="gpt-ceo")
    server.push([ToolCall("add", {"a": 2, "b": 3}), ToolCall("shout", {"text": "done"})], "5, DONE", model="gpt-dev")
    ceo = Agent(name="CEO", model="gpt-ceo")
    dev = Agent(name="Developer", model="gpt-dev", mcp_servers=[mcp_tools])
    agency = Agency([ceo, [ceo, dev]], model_provider=MultiProvider(openai_client=client))

    result = await agency.get_response("Compute")

    assert result.final_output == "The sum is 5."
    first_dev = server.requests[1]
    assert set(first_dev.tool_names) == {"add", "shout"}
    assert first_dev.tool("add")["parameters"]["properties"]["a"]["type"] == "integer"
    assert first_dev.tool("add")["description"] == "Add two integers."
    outputs = [item for item in server.requests[2].body["input"] if item.get("type") == "function_call_output"]
    texts = [part["text"] for item in outputs for part in item["output"]]
    assert texts == ["5", "DONE"]
    assert server.requests[3].body["input"][-1]["output"] == "5, DONE"


# -- one run context for every tool of every agent -----------------------------------------------------------


@dataclass
class Ledger:
    entries: list[str] = field(default_factory=list)


@function_tool
def note(context: RunContextWrapper[Ledger], text: str) -> str:
    """Write to the shared ledger."""
    context.context.entries.append(text)
    return f"{len(context.context.entries)} entries"


@function_tool
async def count_entries(context: RunContextWrapper[Ledger]) -> int:
    """How many entries the ledger has."""
    return len(context.context.entries)


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_the_run_context_reaches_every_tool_of_every_agent(streaming: bool) -> None:
    ceo_model = ScriptedModel([ToolCall("note", {"text": "from CEO"}), send_message("Developer", "note it"), "ok"])
    dev_model = ScriptedModel([ToolCall("note", {"text": "from Developer"}), send_message("QA", "count"), "noted"])
    qa_model = ScriptedModel([ToolCall("count_entries"), "2 entries"])
    ceo = Agent(name="CEO", model=ceo_model, tools=[note])
    dev = Agent(name="Developer", model=dev_model, tools=[note])
    qa = Agent(name="QA", model=qa_model, tools=[count_entries])
    agency = Agency([ceo, [ceo, dev, qa]])
    ledger = Ledger()

    if streaming:
        stream = agency.get_response_stream("go", context=ledger)
        async for _ in stream:
            pass
    else:
        await agency.get_response("go", context=ledger)

    assert ledger.entries == ["from CEO", "from Developer"]
    assert qa_model.calls[1].tool_outputs == ["2"]
    assert dev_model.calls[2].tool_outputs[-1] == "2 entries"
