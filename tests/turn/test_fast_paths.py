"""The loop's shortcuts must give exactly what the long way gives, and must notice every change they depend on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import agents
import pytest
from agents import FunctionTool, function_tool
from agents.tracing import Trace
from agents.tracing.provider import DefaultTraceProvider
from agents.tracing.setup import get_trace_provider, set_trace_provider
from pydantic import BaseModel

from agency_swarm import Agency, Agent, RunResult
from agency_swarm.testing import ScriptedModel, ToolCall, send_message


@function_tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@function_tool
def echo(text: str) -> str:
    """Repeat the text."""
    return text


def _solo(**settings: Any) -> tuple[Agent, Agency, ScriptedModel]:
    model = ScriptedModel.each_turn(["ok"])
    agent = Agent(name="Solo", instructions="first", model=model, **settings)
    return agent, Agency(agent), model


async def test_the_setup_follows_new_instructions_between_turns() -> None:
    agent, agency, model = _solo()
    await agency.get_response("one")
    agent.instructions = "second"
    await agency.get_response("two")
    agent.instructions = None
    await agency.get_response("three")
    assert [call.system_instructions for call in model.calls] == ["first", "second", None]


async def test_the_setup_follows_tools_added_removed_and_switched_off() -> None:
    agent, agency, model = _solo(tools=[ping])
    await agency.get_response("one")
    agent.tools.append(echo)  # the same list, changed in place
    await agency.get_response("two")
    echo.is_enabled = False
    try:
        await agency.get_response("three")
    finally:
        echo.is_enabled = True
    agent.tools = []
    await agency.get_response("four")
    assert [call.tool_names for call in model.calls] == [["ping"], ["ping", "echo"], ["ping"], []]


async def test_the_setup_follows_a_new_output_type() -> None:
    class Answer(BaseModel):
        value: int

    model = ScriptedModel.each_turn(['{"value": 3}'])
    agent = Agent(name="Solo", model=model)
    agency = Agency(agent)
    assert (await agency.get_response("one")).final_output == '{"value": 3}'
    agent.output_type = Answer
    assert (await agency.get_response("two")).final_output == Answer(value=3)
    assert model.calls[0].output_schema is None
    assert model.calls[1].output_schema is not None


async def test_placeholders_and_additional_instructions_are_rendered_every_turn() -> None:
    model = ScriptedModel.each_turn(["ok"])
    agent = Agent(name="Solo", instructions="I am {{agent_name}}.", model=model)
    agency = Agency(agent)
    await agency.get_response("one")
    await agency.get_response("two", additional_instructions="Be short.")
    await agency.get_response("three")
    assert [call.system_instructions for call in model.calls] == [
        "I am Solo.", "I am Solo.\n\nBe short.", "I am Solo."
    ]
    assert agency._wirings["Solo"].setups == {}  # a prompt with placeholders is never kept for reuse


async def test_a_setup_is_kept_per_agency_for_an_agent_in_two_agencies() -> None:
    model = ScriptedModel.each_turn(["ok"])
    agent = Agent(name="Solo", instructions="mine", model=model)
    plain, shared = Agency(agent), Agency(agent, shared_instructions="ours")
    await plain.get_response("one")
    await shared.get_response("two")
    await plain.get_response("three")
    assert [call.system_instructions for call in model.calls] == ["mine", "ours\n\nmine", "mine"]


async def test_a_sender_sees_its_recipients_after_the_chart_changes_its_send_tool() -> None:
    ceo_model = ScriptedModel.each_turn([send_message("Dev", "go"), "done"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Dev", model=ScriptedModel.each_turn(["built"]))
    qa = Agent(name="QA", model=ScriptedModel.each_turn(["tested"]))
    first = Agency(ceo, communication_flows=[(ceo, dev)])
    await first.get_response("one")
    second = Agency(ceo, communication_flows=[(ceo, dev), (ceo, qa)])
    await second.get_response("two")
    enums = [call.tool_schema("send_message")["properties"]["recipient_agent"]["enum"] for call in ceo_model.calls]
    assert enums == [["Dev"], ["Dev"], ["Dev", "QA"], ["Dev", "QA"]]


async def test_usage_is_summed_per_model_when_read() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Dev", "go"), "done"]))
    dev = Agent(name="Dev", model=ScriptedModel(["built"]))
    result = await Agency(ceo, communication_flows=[(ceo, dev)]).get_response("hi")
    assert [key for key, _ in result.usage_records] == [("CEO", "scripted-model"), ("Dev", "scripted-model"),
                                                        ("CEO", "scripted-model")]
    totals = result.totals_by_model
    assert result.totals_by_model is totals  # summed once
    assert {key: value.requests for key, value in totals.items()} == {
        ("CEO", "scripted-model"): 2, ("Dev", "scripted-model"): 1,
    }
    assert result.usage.requests == 3
    assert result.usage.total_tokens == sum(usage.total_tokens for _, usage in result.usage_records)


def test_a_run_result_built_without_usage_has_none() -> None:
    result = RunResult(final_output="x", new_items=[], chat_id="c", agent="A")
    assert result.totals_by_model == {}
    assert result.usage.requests == 0


async def test_a_tool_reads_the_usage_of_the_calls_before_it() -> None:
    seen: list[int] = []

    async def on_invoke(context: Any, arguments: str) -> str:
        seen.append(context.usage.requests)
        return "ok"

    tool = FunctionTool(
        name="count", description="count", params_json_schema={"type": "object", "properties": {}},
        on_invoke_tool=on_invoke,
    )
    model = ScriptedModel([ToolCall("count", {}), ToolCall("count", {}), "done"])
    agent = Agent(name="Solo", model=model, tools=[tool])
    result = await Agency(agent).get_response("hi")
    assert seen == [1, 2]  # the context's usage is kept current after it exists
    assert result.usage.requests == 3


class _Recorder(agents.TracingProcessor):
    def __init__(self) -> None:
        self.traces: list[Trace] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace)

    def on_trace_end(self, trace: Trace) -> None:
        return None

    def on_span_start(self, span: Any) -> None:
        return None

    def on_span_end(self, span: Any) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self) -> None:
        return None


class _OwnProvider(DefaultTraceProvider):
    """Another provider class: the loop must ask it, not read the default provider's fields."""


@pytest.fixture
def own_provider() -> Iterator[tuple[_OwnProvider, _Recorder]]:
    before = get_trace_provider()
    provider, recorder = _OwnProvider(), _Recorder()
    provider.register_processor(recorder)
    set_trace_provider(provider)
    try:
        yield provider, recorder
    finally:
        set_trace_provider(before)


async def test_a_provider_of_another_class_is_asked_whether_tracing_is_on(
    own_provider: tuple[_OwnProvider, _Recorder],
) -> None:
    provider, recorder = own_provider
    agent = Agent(name="Solo", model=ScriptedModel.each_turn(["ok"]))
    agency = Agency(agent)
    provider.set_disabled(True)
    await agency.get_response("off")
    assert recorder.traces == []
    provider.set_disabled(False)
    await agency.get_response("on")
    assert [trace.name for trace in recorder.traces] == ["agency_swarm turn: Solo"]


async def test_a_thread_appends_one_item_to_its_store_and_its_listeners() -> None:
    from agency_swarm import MemoryThreadStore, ThreadManager

    store = MemoryThreadStore()
    manager = ThreadManager(store=store)
    seen: list[Any] = []
    manager.subscribe(lambda thread, item: seen.append((thread.key, item)))
    thread = manager.get_thread("c", "user", "CEO")
    item = {"role": "user", "content": "hi"}
    await thread.append(item)
    assert thread.items == [item]
    assert await store.load("c") == {"user->CEO": [item]}
    assert seen == [("user->CEO", item)]


def _policy(waits: list[float], attempts: int = 3) -> Any:
    from agency_swarm import RetryPolicy

    async def record(seconds: float) -> None:
        waits.append(seconds)

    return RetryPolicy(max_attempts=attempts, initial_delay=0.25, jitter=False, sleep=record)


async def test_a_model_called_directly_is_retried_by_the_policy_after_a_transient_failure() -> None:
    from agency_swarm.testing import Fail

    waits: list[float] = []
    model = ScriptedModel([Fail(ConnectionResetError("reset")), Fail(ConnectionResetError("reset")), "ok"])
    agent = Agent(name="Solo", model=model, retry=_policy(waits))
    result = await Agency(agent).get_response("hi")
    assert result.final_output == "ok"
    assert waits == [0.25, 0.5]  # after the first (direct) attempt and after the second
    assert len(model.calls) == 3


async def test_a_model_called_directly_raises_the_policys_error_with_chat_and_depth() -> None:
    from agency_swarm import ModelUnavailable
    from agency_swarm.testing import Fail

    waits: list[float] = []
    dev = Agent(name="Dev", model=ScriptedModel([Fail(ConnectionResetError("reset"))] * 2), retry=_policy(waits, 2))
    with pytest.raises(ModelUnavailable) as raised:
        await Agency(dev).get_response("hi", chat_id="direct")
    assert (raised.value.agent, raised.value.chat_id, raised.value.depth) == ("Dev", "direct", 0)
    assert raised.value.attempts == 2
    assert waits == [0.25]


async def test_a_foreign_error_from_a_model_called_directly_passes_through_untouched() -> None:
    from agency_swarm.testing import Fail

    bug = KeyError("a bug in the model")
    agent = Agent(name="Solo", model=ScriptedModel([Fail(bug)]), retry=_policy([]))
    with pytest.raises(KeyError) as raised:
        await Agency(agent).get_response("hi")
    assert raised.value is bug


@pytest.mark.parametrize(("chat_id", "fits"), [
    ("x" * 200, True), ("x" * 201, False), ("é" * 127, True), ("é" * 128, False),
    ("\U0001f600" * 63, True), ("\U0001f600" * 64, False),
])
def test_chat_ids_fit_255_utf8_bytes_whatever_their_characters(chat_id: str, fits: bool) -> None:
    from agency_swarm import InvalidChatId
    from agency_swarm._threads._manager import check_chat_id

    if fits:
        assert check_chat_id(chat_id) == chat_id
    else:
        with pytest.raises(InvalidChatId, match="too long"):
            check_chat_id(chat_id)
