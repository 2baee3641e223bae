"""Delegation through send_message: usage, recursion, refusals, failures and parallel sends."""

from __future__ import annotations

import asyncio
from typing import Any

from agents import function_tool

from agency_swarm import Agency, Agent
from agency_swarm.testing import Fail, ScriptedModel, ToolCall, send_message


def outputs_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "function_call_output"]


def calls_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "function_call"]


# -- usage ---------------------------------------------------------------------------------------------


async def test_usage_is_summed_over_every_model_call_and_split_by_agent() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "done"]))
    dev = Agent(name="Developer", model=ScriptedModel(["built"]))

    result = await Agency([ceo, [ceo, dev]]).get_response("Build it")

    assert result.final_output == "done"
    assert result.usage.requests == 3
    assert result.usage.input_tokens == 30
    assert result.usage.output_tokens == 15
    assert result.usage.total_tokens == 45
    assert set(result.usage_by_agent) == {"CEO", "Developer"}
    ceo_usage, dev_usage = result.usage_by_agent["CEO"], result.usage_by_agent["Developer"]
    assert (ceo_usage.requests, ceo_usage.input_tokens, ceo_usage.output_tokens) == (2, 20, 10)
    assert (dev_usage.requests, dev_usage.input_tokens, dev_usage.output_tokens) == (1, 10, 5)
    assert ceo_usage.total_tokens == 30
    assert dev_usage.total_tokens == 15


async def test_usage_uses_each_models_own_token_counts() -> None:
    ceo = Agent(
        name="CEO",
        model=ScriptedModel([send_message("Developer", "build"), "done"], input_tokens=100, output_tokens=7),
    )
    dev = Agent(name="Developer", model=ScriptedModel(["built"], input_tokens=1, output_tokens=2))

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.usage.requests == 3
    assert result.usage.input_tokens == 201
    assert result.usage.output_tokens == 16
    assert result.usage_by_agent["Developer"].input_tokens == 1
    assert result.usage_by_agent["CEO"].output_tokens == 14


async def test_usage_is_per_turn_not_cumulative() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "build"), "done"]))
    dev = Agent(name="Developer", model=ScriptedModel.each_turn(["built"]))
    agency = Agency([ceo, [ceo, dev]])

    first = await agency.get_response("one")
    second = await agency.get_response("two")

    assert first.usage.requests == 3
    assert second.usage.requests == 3
    assert second.usage.input_tokens == 30


# -- recursion -----------------------------------------------------------------------------------------


async def test_nested_recursion_returns_answer_up_the_chain() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "build and test"), "CEO: shipped"])
    dev_model = ScriptedModel([send_message("QA", "test the build"), "Developer: QA says all green"])
    qa_model = ScriptedModel(["QA: all green"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model)
    qa = Agent(name="QA", model=qa_model)

    result = await Agency([ceo, [ceo, dev, qa]]).get_response("ship it")

    assert result.final_output == "CEO: shipped"
    assert qa_model.calls[0].last_user_message == "test the build"
    assert dev_model.calls[0].last_user_message == "build and test"
    assert dev_model.calls[1].tool_outputs == ["QA: all green"]
    assert ceo_model.calls[1].tool_outputs == ["Developer: QA says all green"]
    assert result.usage.requests == 5
    assert set(result.usage_by_agent) == {"CEO", "Developer", "QA"}


async def test_recipient_sees_message_as_user_input_and_keeps_its_thread_per_sender() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "first task"), send_message("Developer", "second"), "ok"])
    dev_model = ScriptedModel(["r1", "r2"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model)

    await Agency([ceo, [ceo, dev]]).get_response("go")

    # The second message lands on the same CEO->Developer thread, after the first exchange.
    second_input = dev_model.calls[1].input
    user_messages = [item["content"] for item in second_input if item.get("role") == "user"]
    assert user_messages == ["first task", "second"]
    assert ceo_model.calls[2].tool_outputs == ["r1", "r2"]


async def test_additional_instructions_apply_to_that_reply_only() -> None:
    ceo = Agent(
        name="CEO",
        model=ScriptedModel(
            [send_message("Developer", "task one", "Answer in French."), send_message("Developer", "task two"), "ok"]
        ),
    )
    dev_model = ScriptedModel(["un", "two"])
    dev = Agent(name="Developer", instructions="You write code.", model=dev_model)

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ok"
    first, second = dev_model.calls
    assert first.system_instructions is not None
    assert first.system_instructions.startswith("You write code.")
    assert first.system_instructions.endswith("Answer in French.")
    assert second.system_instructions == "You write code."


async def test_send_message_tool_lists_only_allowed_recipients() -> None:
    ceo_model = ScriptedModel(["hi"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", description="Writes code", model=ScriptedModel(["x"]))
    qa = Agent(name="QA", model=ScriptedModel(["x"]))

    await Agency([ceo, [ceo, dev], [dev, qa]]).get_response("hi")

    assert "send_message" in ceo_model.calls[0].tool_names
    schema = ceo_model.calls[0].tool_schema("send_message")
    assert schema["properties"]["recipient_agent"]["enum"] == ["Developer"]


# -- refusals ------------------------------------------------------------------------------------------


async def test_not_allowed_recipient_gets_output_naming_allowed_ones() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "ceo done"]))
    dev_model = ScriptedModel([send_message("CEO", "can you help?"), "dev done alone"])
    dev = Agent(name="Developer", model=dev_model)
    qa_model = ScriptedModel(["unused"])
    qa = Agent(name="QA", model=qa_model)

    result = await Agency([ceo, [ceo, dev], [dev, qa]]).get_response("go")

    assert result.final_output == "ceo done"
    (output,) = dev_model.calls[1].tool_outputs
    assert "CEO" in output
    assert "QA" in output  # the allowed recipient is named
    assert dev_model.calls[1].input[-1]["type"] == "function_call_output"
    assert qa_model.calls == []


async def test_unknown_recipient_name_gets_output_naming_allowed_ones() -> None:
    ceo_model = ScriptedModel([send_message("Nobody", "hello?"), "fine"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel(["unused"]))
    qa = Agent(name="QA", model=ScriptedModel(["unused"]))

    result = await Agency([ceo, [ceo, dev], [ceo, qa]]).get_response("go")

    assert result.final_output == "fine"
    (output,) = ceo_model.calls[1].tool_outputs
    assert "Nobody" in output
    assert "Developer" in output
    assert "QA" in output


async def test_agent_without_flows_has_no_send_message_and_call_is_answered() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "ceo done"]))
    dev_model = ScriptedModel([send_message("CEO", "help"), "dev alone"])
    dev = Agent(name="Developer", model=dev_model)

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "ceo done"
    assert "send_message" not in dev_model.calls[0].tool_names
    (output,) = dev_model.calls[1].tool_outputs
    assert output.startswith("Error")
    assert "send_message" in output


async def test_malformed_send_message_arguments_become_output() -> None:
    ceo_model = ScriptedModel([ToolCall("send_message", "{oops"), "fine"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel(["unused"]))

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "fine"
    (output,) = ceo_model.calls[1].tool_outputs
    assert "JSON" in output
    assert "Developer" in output


async def test_depth_limit_refuses_send_beyond_max_recursion_depth() -> None:
    a_model = ScriptedModel([send_message("B", "go deeper"), "a done"])
    b_model = ScriptedModel([send_message("C", "deeper still"), "b done"])
    c_model = ScriptedModel(["unused"])
    a, b, c = Agent(name="A", model=a_model), Agent(name="B", model=b_model), Agent(name="C", model=c_model)

    result = await Agency([a, [a, b, c]], max_recursion_depth=1).get_response("go")

    assert result.final_output == "a done"
    assert c_model.calls == []
    (refusal,) = b_model.calls[1].tool_outputs
    assert "depth" in refusal.lower()
    assert "1" in refusal
    assert "C" in refusal
    assert a_model.calls[1].tool_outputs == ["b done"]


async def test_max_recursion_depth_zero_means_entry_agent_cannot_send() -> None:
    a_model = ScriptedModel([send_message("B", "help"), "alone"])
    b_model = ScriptedModel(["unused"])
    a, b = Agent(name="A", model=a_model), Agent(name="B", model=b_model)

    result = await Agency([a, [a, b]], max_recursion_depth=0).get_response("go")

    assert result.final_output == "alone"
    assert b_model.calls == []
    (refusal,) = a_model.calls[1].tool_outputs
    assert "depth" in refusal.lower()
    assert "0" in refusal


async def test_reentry_in_a_cycle_is_refused() -> None:
    ceo_model = ScriptedModel(
        [
            send_message("Developer", "build"),  # depth 0 -> Developer
            send_message("Developer", "again"),  # depth 2 (CEO answering Developer) -> refused
            "CEO to Developer: do it yourself",  # CEO's answer at depth 2
            "CEO final",  # CEO's answer at depth 0
        ]
    )
    dev_model = ScriptedModel([send_message("CEO", "question"), "dev built it"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=dev_model)

    result = await Agency([ceo, [ceo, dev], [dev, ceo]]).get_response("go")

    assert result.final_output == "CEO final"
    assert len(dev_model.calls) == 2  # Developer never got the re-entrant message
    (refusal,) = ceo_model.calls[2].tool_outputs
    assert "Developer" in refusal
    assert "still working on an earlier message from CEO" in refusal
    assert dev_model.calls[1].tool_outputs == ["CEO to Developer: do it yourself"]
    assert ceo_model.calls[3].tool_outputs == ["dev built it"]


async def test_sequential_sends_to_same_recipient_are_not_refused() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "one"), send_message("Developer", "two"), "done"])
    dev = Agent(name="Developer", model=ScriptedModel(["r1", "r2"]))
    ceo = Agent(name="CEO", model=ceo_model)

    await Agency([ceo, [ceo, dev]]).get_response("go")

    assert ceo_model.calls[1].tool_outputs == ["r1"]
    assert ceo_model.calls[2].tool_outputs == ["r1", "r2"]


# -- failures ------------------------------------------------------------------------------------------


async def test_recipient_model_failure_becomes_callers_tool_output() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "build"), "CEO: developer is down, sorry"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel([Fail(RuntimeError("model down"))]))

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "CEO: developer is down, sorry"
    (output,) = ceo_model.calls[1].tool_outputs
    assert "Developer" in output
    assert "failed" in output
    assert "RuntimeError" in output
    assert "model down" in output


async def test_recipient_failure_is_also_shown_when_streaming() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "build"), "CEO carries on"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel([Fail(RuntimeError("model down"), partial_text="Hel")]))

    stream = Agency([ceo, [ceo, dev]]).get_response_stream("go")
    async for _ in stream:
        pass

    assert stream.result.final_output == "CEO carries on"
    (output,) = ceo_model.calls[1].tool_outputs
    assert "RuntimeError" in output
    assert "model down" in output


# -- parallel sends ------------------------------------------------------------------------------------


async def test_parallel_sends_run_concurrently_and_outputs_keep_call_order() -> None:
    dev_started = asyncio.Event()
    qa_started = asyncio.Event()

    @function_tool
    async def dev_work() -> str:
        """Developer waits for QA to be working too."""
        dev_started.set()
        await qa_started.wait()
        return "code"

    @function_tool
    async def qa_work() -> str:
        """QA waits for Developer to be working too."""
        qa_started.set()
        await dev_started.wait()
        return "tests"

    ceo_model = ScriptedModel(
        [[send_message("Developer", "write code"), send_message("QA", "write tests")], "CEO: both done"]
    )
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel([ToolCall("dev_work"), "dev: code written"]), tools=[dev_work])
    qa = Agent(name="QA", model=ScriptedModel([ToolCall("qa_work"), "qa: tests written"]), tools=[qa_work])

    result = await asyncio.wait_for(Agency([ceo, [ceo, dev], [ceo, qa]]).get_response("go"), timeout=10)

    assert result.final_output == "CEO: both done"
    second_input = ceo_model.calls[1].input
    call_ids = [item["call_id"] for item in calls_of(second_input)]
    assert [item["call_id"] for item in outputs_of(second_input)] == call_ids
    assert ceo_model.calls[1].tool_outputs == ["dev: code written", "qa: tests written"]
    assert result.usage.requests == 6


async def test_parallel_sends_keep_call_order_when_second_finishes_first() -> None:
    dev_may_finish = asyncio.Event()

    @function_tool
    async def dev_work() -> str:
        """Finishes only after QA has answered."""
        await dev_may_finish.wait()
        return "code"

    @function_tool
    def qa_work() -> str:
        """Lets the Developer finish."""
        dev_may_finish.set()
        return "tests"

    ceo_model = ScriptedModel([[send_message("Developer", "code"), send_message("QA", "test")], "done"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", model=ScriptedModel([ToolCall("dev_work"), "dev answer"]), tools=[dev_work])
    qa = Agent(name="QA", model=ScriptedModel([ToolCall("qa_work"), "qa answer"]), tools=[qa_work])

    await asyncio.wait_for(Agency([ceo, [ceo, dev], [ceo, qa]]).get_response("go"), timeout=10)

    assert ceo_model.calls[1].tool_outputs == ["dev answer", "qa answer"]


async def test_parallel_send_and_function_tool_mix() -> None:
    @function_tool
    def note(text: str) -> str:
        """Writes a note."""
        return f"noted: {text}"

    ceo_model = ScriptedModel([[ToolCall("note", {"text": "x"}), send_message("Developer", "build")], "done"])
    ceo = Agent(name="CEO", model=ceo_model, tools=[note])
    dev = Agent(name="Developer", model=ScriptedModel(["built"]))

    result = await Agency([ceo, [ceo, dev]]).get_response("go")

    assert result.final_output == "done"
    assert ceo_model.calls[1].tool_outputs == ["noted: x", "built"]


# -- standalone agents ---------------------------------------------------------------------------------


async def test_agent_outside_agency_works_alone_with_its_own_threads() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = Agent(name="Solo", model=model)

    first = await agent.get_response("hi")
    second = await agent.get_response("again")

    assert first.final_output == "first answer"
    assert second.final_output == "second answer"
    assert "send_message" not in model.calls[0].tool_names
    assert model.calls[0].tools == []
    # the second turn sees the first one's history (in-memory thread user->Solo)
    user_messages = [item["content"] for item in model.calls[1].input if item.get("role") == "user"]
    assert user_messages == ["hi", "again"]
    assert len(model.calls[1].input) == 3


async def test_standalone_agents_do_not_share_threads() -> None:
    model_a = ScriptedModel(["a1"])
    model_b = ScriptedModel(["b1"])
    a = Agent(name="A", model=model_a)
    b = Agent(name="B", model=model_b)

    await a.get_response("to a")
    await b.get_response("to b")

    assert model_b.calls[0].input == [{"role": "user", "content": "to b"}]


async def test_standalone_agent_separates_chats() -> None:
    model = ScriptedModel.each_turn(["answer"])
    agent = Agent(name="Solo", model=model)

    await agent.get_response("in chat one", chat_id="one")
    await agent.get_response("in chat two", chat_id="two")

    assert model.calls[1].input == [{"role": "user", "content": "in chat two"}]
