"""The chart: both spellings, what it rejects, recipients, and what each agent's model is given."""

from __future__ import annotations

from typing import Any

import agents
import pytest

from agency_swarm import Agency, AgencySwarmError, Agent, ChartError, ConfigError, function_tool
from agency_swarm.testing import ScriptedModel, send_message


def make_agent(name: str, *script: Any, description: str | None = None, **kwargs: Any) -> Agent:
    return Agent(
        name=name,
        description=description or f"{name} does {name.lower()} things",
        model=ScriptedModel(list(script) or [f"{name} answers"]),
        **kwargs,
    )


def names(agents_: list[Agent]) -> list[str]:
    return [agent.name for agent in agents_]


def model_of(agent: Agent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def send_tool(agent: Agent) -> agents.FunctionTool:
    call = model_of(agent).calls[0]
    (tool,) = [tool for tool in call.tools if tool.name == "send_message"]
    assert isinstance(tool, agents.FunctionTool)
    return tool


# -- spellings --------------------------------------------------------------------------------------


def test_both_spellings_describe_the_same_agency() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    nested = Agency([ceo, [ceo, dev]])
    nested_view = (nested.agents, nested.entry_points, nested.communication_flows)

    ceo2, dev2 = make_agent("CEO"), make_agent("Developer")
    flat = Agency(ceo2, communication_flows=[(ceo2, dev2)])

    assert nested_view[0] == {"CEO": ceo, "Developer": dev}
    assert flat.agents == {"CEO": ceo2, "Developer": dev2}
    assert names(nested_view[1]) == names(flat.entry_points) == ["CEO"]
    assert nested_view[1][0] is ceo
    assert flat.entry_points[0] is ceo2
    assert nested_view[2] == flat.communication_flows == [("CEO", "Developer")]


def test_several_positional_entry_points_with_flows() -> None:
    ceo, pm, dev = make_agent("CEO"), make_agent("PM"), make_agent("Developer")
    agency = Agency(ceo, pm, communication_flows=[(ceo, dev), (pm, dev)])
    assert agency.entry_points == [ceo, pm]
    assert agency.agents == {"CEO": ceo, "PM": pm, "Developer": dev}
    assert agency.communication_flows == [("CEO", "Developer"), ("PM", "Developer")]

    same = Agency([ceo, pm, [ceo, dev], [pm, dev]])
    assert same.entry_points == [ceo, pm]
    assert same.agents == agency.agents
    assert same.communication_flows == agency.communication_flows


def test_chain_means_consecutive_pairs_only() -> None:
    a, b, c = make_agent("A"), make_agent("B"), make_agent("C")
    agency = Agency([a, [a, b, c]])
    assert agency.communication_flows == [("A", "B"), ("B", "C")]
    assert ("A", "C") not in agency.communication_flows
    assert agency.entry_points == [a]


def test_flows_given_as_chains_in_communication_flows() -> None:
    a, b, c = make_agent("A"), make_agent("B"), make_agent("C")
    agency = Agency(a, communication_flows=[[a, b, c]])
    assert agency.communication_flows == [("A", "B"), ("B", "C")]


def test_flow_only_agents_are_agents_but_not_entry_points() -> None:
    ceo, dev, qa = make_agent("CEO"), make_agent("Developer"), make_agent("QA")
    agency = Agency([ceo, [ceo, dev], [dev, qa]])
    assert set(agency.agents) == {"CEO", "Developer", "QA"}
    assert agency.agents["QA"] is qa
    assert agency.entry_points == [ceo]


def test_duplicate_flows_and_entries_are_kept_once() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    agency = Agency([ceo, ceo, [ceo, dev], [ceo, dev]])
    assert agency.entry_points == [ceo]
    assert agency.communication_flows == [("CEO", "Developer")]


def test_cycles_are_allowed() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    agency = Agency([ceo, [ceo, dev], [dev, ceo]])
    assert sorted(agency.communication_flows) == [("CEO", "Developer"), ("Developer", "CEO")]
    assert agency.entry_points == [ceo]


async def test_a_cycle_runs_and_refuses_re_entry() -> None:
    ceo = Agent(
        name="CEO",
        model=ScriptedModel.each_turn([send_message("Developer", "please build"), "ceo final"]),
    )
    dev = Agent(
        name="Developer",
        model=ScriptedModel.each_turn([send_message("CEO", "a question"), "dev done"]),
    )
    agency = Agency([ceo, [ceo, dev], [dev, ceo]])
    result = await agency.get_response("start", chat_id="cycle")
    assert result.final_output == "ceo final"
    threads = agency.thread_manager.get_threads("cycle")
    assert set(threads) == {"user->CEO", "CEO->Developer", "Developer->CEO"}
    # The nested CEO (asked by the Developer) tried to message the Developer again, which is still busy.
    nested_ceo_outputs = [item for item in threads["Developer->CEO"] if item.get("type") == "function_call_output"]
    assert len(nested_ceo_outputs) == 1
    assert nested_ceo_outputs[0]["output"].startswith("Error")
    assert "Developer" in nested_ceo_outputs[0]["output"]
    # each delivered message keeps the call id of the send that carried it
    ceo_send, dev_send = threads["user->CEO"][1]["call_id"], threads["CEO->Developer"][1]["call_id"]
    assert threads["CEO->Developer"][0] == {"role": "user", "content": "please build", "send_call_id": ceo_send}
    assert threads["Developer->CEO"][0] == {"role": "user", "content": "a question", "send_call_id": dev_send}


async def test_an_agent_shared_by_two_agencies_does_not_leak_between_them() -> None:
    ceo = make_agent("CEO", send_message("Developer", "build"), "done")
    dev = make_agent("Developer", "built")
    first = Agency([ceo, [ceo, dev]])
    try:
        second = Agency([ceo])
    except ConfigError:
        return  # refusing to put one agent in two agencies is an acceptable answer too
    result = await first.get_response("go", chat_id="c")
    assert result.final_output == "done"
    assert model_of(ceo).calls[0].tool_names == ["send_message"]
    assert set(first.thread_manager.get_threads("c")) == {"user->CEO", "CEO->Developer"}
    assert second.thread_manager.get_threads("c") == {}


# -- bad charts -------------------------------------------------------------------------------------


def test_chart_error_is_a_config_error() -> None:
    assert issubclass(ChartError, ConfigError)
    assert issubclass(ChartError, AgencySwarmError)


@pytest.mark.parametrize("bad", ["CEO", 42, None])
def test_non_agent_entry_is_rejected(bad: Any) -> None:
    with pytest.raises(ChartError, match=r"not an agency_swarm\.Agent"):
        Agency([make_agent("CEO"), bad])


def test_non_agent_in_a_flow_is_rejected() -> None:
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match=r"not an agency_swarm\.Agent"):
        Agency(ceo, communication_flows=[(ceo, "Developer")])
    with pytest.raises(ChartError, match=r"not an agency_swarm\.Agent"):
        Agency([ceo, [ceo, "Developer"]])


def test_plain_openai_agents_agent_is_rejected_with_a_hint() -> None:
    plain = agents.Agent(name="Plain")
    with pytest.raises(ChartError, match=r"not an agency_swarm\.Agent") as caught:
        Agency([plain])
    assert "openai-agents" in str(caught.value)
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match="openai-agents"):
        Agency([ceo, [ceo, plain]])


def test_two_different_agents_with_the_same_name() -> None:
    ceo, other = make_agent("CEO"), make_agent("CEO")
    with pytest.raises(ChartError, match="'CEO'") as caught:
        Agency([ceo, [ceo, make_agent("Developer")], other])
    assert "unique" in str(caught.value)
    with pytest.raises(ChartError, match="unique"):
        Agency(ceo, communication_flows=[(ceo, other)])


def test_the_same_agent_twice_is_not_a_duplicate() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    agency = Agency([ceo, [ceo, dev], [dev, ceo]], communication_flows=[(ceo, dev)])
    assert agency.agents == {"CEO": ceo, "Developer": dev}


def test_an_agent_cannot_message_itself() -> None:
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match="cannot message itself") as caught:
        Agency([ceo, [ceo, ceo]])
    assert "'CEO'" in str(caught.value)
    with pytest.raises(ChartError, match="cannot message itself"):
        Agency(ceo, communication_flows=[(ceo, ceo)])


@pytest.mark.parametrize("chart", [(), ([],)])
def test_empty_chart(chart: tuple[Any, ...]) -> None:
    with pytest.raises(ChartError, match="empty"):
        Agency(*chart)


def test_flows_without_an_entry_point() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    with pytest.raises(ChartError, match="no entry point"):
        Agency([[ceo, dev]])
    with pytest.raises(ChartError, match="no entry point"):
        Agency(communication_flows=[(ceo, dev)])


def test_a_flow_needs_two_agents() -> None:
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match="sender and a recipient"):
        Agency([ceo, [ceo]])


def test_flow_that_is_not_a_pair() -> None:
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match="pair"):
        Agency(ceo, communication_flows=[ceo])


def test_name_with_arrow_is_rejected() -> None:
    with pytest.raises(ChartError, match="'->'") as caught:
        Agency([make_agent("CEO->Dev")])
    assert "CEO->Dev" in str(caught.value)
    ceo = make_agent("CEO")
    with pytest.raises(ChartError, match="'->'"):
        Agency([ceo, [ceo, make_agent("A->B")]])


def test_name_user_is_reserved() -> None:
    with pytest.raises(ChartError, match="'user'") as caught:
        Agency([make_agent("user")])
    assert "reserved" in str(caught.value)


# -- other configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [-1, True, False, "3", 2.0, None])
def test_bad_max_recursion_depth(depth: Any) -> None:
    with pytest.raises(ConfigError, match="max_recursion_depth"):
        Agency(make_agent("CEO"), max_recursion_depth=depth)


def test_zero_max_recursion_depth_is_valid() -> None:
    assert Agency(make_agent("CEO"), max_recursion_depth=0).max_recursion_depth == 0


@pytest.mark.parametrize("shared", [5, ["be nice"], b"bytes"])
def test_bad_shared_instructions(shared: Any) -> None:
    with pytest.raises(ConfigError, match="shared_instructions"):
        Agency(make_agent("CEO"), shared_instructions=shared)


def test_own_send_message_tool_with_recipients_is_rejected() -> None:
    @function_tool
    def send_message(text: str) -> str:
        """Send a text."""
        return text

    ceo = make_agent("CEO", tools=[send_message])
    with pytest.raises(ConfigError, match="send_message") as caught:
        Agency([ceo, [ceo, make_agent("Developer")]])
    assert "'CEO'" in str(caught.value)


async def test_own_send_message_tool_without_recipients_is_kept() -> None:
    @function_tool
    def send_message(text: str) -> str:
        """Send a text."""
        return f"sent {text}"

    dev = make_agent("Developer", tools=[send_message])
    ceo = make_agent("CEO")
    agency = Agency([ceo, dev, [ceo, dev]])
    await agency.get_response("hi", "Developer")
    call = model_of(dev).calls[0]
    assert call.tool_names == ["send_message"]
    assert call.tools[0] is send_message


# -- recipient_agent --------------------------------------------------------------------------------


async def test_recipient_by_name_or_agent() -> None:
    ceo, dev = make_agent("CEO", "ceo reply"), make_agent("Developer", "dev 1", "dev 2")
    agency = Agency([ceo, dev, [ceo, dev]])

    by_name = await agency.get_response("hello dev", "Developer", chat_id="c")
    by_agent = await agency.get_response("hello again", recipient_agent=dev, chat_id="c")
    default = await agency.get_response("hello ceo", chat_id="c")

    assert (by_name.final_output, by_name.agent) == ("dev 1", "Developer")
    assert (by_agent.final_output, by_agent.agent) == ("dev 2", "Developer")
    assert (default.final_output, default.agent) == ("ceo reply", "CEO")
    threads = agency.thread_manager.get_threads("c")
    assert set(threads) == {"user->Developer", "user->CEO"}


async def test_unknown_recipient_lists_the_agents() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    agency = Agency([ceo, [ceo, dev]])
    with pytest.raises(ConfigError, match="Nobody") as caught:
        await agency.get_response("hi", "Nobody")
    assert "CEO" in str(caught.value)
    assert "Developer" in str(caught.value)
    assert model_of(ceo).calls == []


async def test_recipient_agent_object_from_another_agency_is_rejected() -> None:
    ceo, dev = make_agent("CEO"), make_agent("Developer")
    agency = Agency([ceo, [ceo, dev]])
    impostor = make_agent("Developer")
    with pytest.raises(ConfigError, match="CEO, Developer"):
        await agency.get_response("hi", impostor)
    assert model_of(dev).calls == []
    assert model_of(impostor).calls == []


def test_unknown_recipient_for_stream_and_sync() -> None:
    agency = Agency([make_agent("CEO")])
    with pytest.raises(ConfigError, match="CEO"):
        agency.get_response_stream("hi", "Ghost")
    with pytest.raises(ConfigError, match="CEO"):
        agency.get_response_sync("hi", "Ghost")


async def test_reassigning_model_after_build_takes_effect() -> None:
    first, second = ScriptedModel(["from first"]), ScriptedModel(["from second"])
    ceo = Agent(name="CEO", model=first)
    agency = Agency(ceo)
    assert (await agency.get_response("one")).final_output == "from first"
    ceo.model = second
    assert (await agency.get_response("two")).final_output == "from second"
    assert len(first.calls) == 1
    assert len(second.calls) == 1
    # The new model continues the same thread.
    assert second.calls[0].input[0] == {"role": "user", "content": "one"}


async def test_reassigning_a_recipient_model_takes_effect() -> None:
    ceo = make_agent("CEO", send_message("Developer", "a"), "x", send_message("Developer", "b"), "y")
    old, new = ScriptedModel(["old dev"]), ScriptedModel(["new dev"])
    dev = Agent(name="Developer", model=old)
    agency = Agency([ceo, [ceo, dev]])
    await agency.get_response("first")
    dev.model = new
    await agency.get_response("second")
    assert model_of(ceo).calls[3].tool_outputs == ["new dev"]
    assert len(old.calls) == len(new.calls) == 1


# -- the send_message tool ------------------------------------------------------------------------


async def test_send_message_schema_lists_exactly_the_allowed_recipients() -> None:
    ceo = make_agent("CEO")
    dev = make_agent("Developer", description="Writes the code")
    qa = make_agent("QA", description="Tests the code")
    designer = make_agent("Designer")
    agency = Agency([ceo, designer, [ceo, dev], [ceo, qa], [dev, qa]])
    await agency.get_response("hi")

    call = model_of(ceo).calls[0]
    assert call.tool_names == ["send_message"]
    schema = call.tool_schema("send_message")
    assert schema["properties"]["recipient_agent"]["enum"] == ["Developer", "QA"]
    assert {"recipient_agent", "message", "additional_instructions"} <= set(schema["required"])
    assert schema["properties"]["message"]["type"] == "string"

    description = send_tool(ceo).description
    lines = description.splitlines()
    assert "- Developer: Writes the code" in lines
    assert "- QA: Tests the code" in lines
    assert not any("Designer" in line for line in lines)
    assert not any(line.startswith("- CEO") for line in lines)


async def test_each_agent_gets_its_own_recipient_enum() -> None:
    a, b, c = make_agent("A"), make_agent("B"), make_agent("C")
    agency = Agency([a, b, c, [a, b, c]])
    for agent in (a, b, c):
        await agency.get_response("hi", agent)
    assert model_of(a).calls[0].tool_schema("send_message")["properties"]["recipient_agent"]["enum"] == ["B"]
    assert model_of(b).calls[0].tool_schema("send_message")["properties"]["recipient_agent"]["enum"] == ["C"]
    assert "send_message" not in model_of(c).calls[0].tool_names


async def test_agent_without_outgoing_flows_has_no_send_message_tool() -> None:
    ceo = make_agent("CEO", send_message("Developer", "build"), "done")
    dev = make_agent("Developer")
    await Agency([ceo, [ceo, dev]]).get_response("go")
    assert model_of(dev).calls[0].tool_names == []
    assert model_of(dev).calls[0].tools == []


async def test_agent_keeps_its_own_tools_next_to_send_message() -> None:
    @function_tool
    def lookup(query: str) -> str:
        """Look something up."""
        return query

    ceo = make_agent("CEO", tools=[lookup])
    await Agency([ceo, [ceo, make_agent("Developer")]]).get_response("hi")
    assert sorted(model_of(ceo).calls[0].tool_names) == ["lookup", "send_message"]


# -- instructions ---------------------------------------------------------------------------------


async def test_shared_instructions_are_prepended_to_every_agent() -> None:
    ceo = make_agent("CEO", send_message("Developer", "build"), "done", instructions="You lead.")
    dev = make_agent("Developer", instructions="You code.")
    agency = Agency([ceo, [ceo, dev]], shared_instructions="Company policy: be kind.")
    await agency.get_response("go")

    for agent, own in ((ceo, "You lead."), (dev, "You code.")):
        system = model_of(agent).calls[0].system_instructions
        assert system is not None
        assert system.startswith("Company policy: be kind.")
        assert system.endswith(own)
        assert system.count("Company policy: be kind.") == 1


async def test_shared_instructions_alone_when_agent_has_none() -> None:
    ceo = make_agent("CEO")
    await Agency(ceo, shared_instructions="Shared only.").get_response("go")
    assert model_of(ceo).calls[0].system_instructions == "Shared only."


async def test_no_instructions_at_all() -> None:
    ceo = make_agent("CEO")
    await Agency(ceo).get_response("go")
    assert model_of(ceo).calls[0].system_instructions in (None, "")


async def test_callable_instructions_get_context_and_agent() -> None:
    seen: list[tuple[Any, str]] = []

    def instructions(ctx: Any, agent: Any) -> str:
        seen.append((ctx.context, agent.name))
        return f"You are {agent.name}, helping {ctx.context['user']}."

    async def async_instructions(ctx: Any, agent: Any) -> str:
        return f"Async {agent.name}."

    ceo = make_agent("CEO", send_message("Developer", "build"), "done", instructions=instructions)
    dev = make_agent("Developer", instructions=async_instructions)
    agency = Agency([ceo, [ceo, dev]], shared_instructions="Shared.")
    await agency.get_response("go", context={"user": "Ada"})

    ceo_system = model_of(ceo).calls[0].system_instructions
    assert ceo_system is not None
    assert ceo_system.startswith("Shared.")
    assert ceo_system.endswith("You are CEO, helping Ada.")
    dev_system = model_of(dev).calls[0].system_instructions
    assert dev_system is not None
    assert dev_system.startswith("Shared.")
    assert dev_system.endswith("Async Developer.")
    assert seen[0] == ({"user": "Ada"}, "CEO")


async def test_additional_instructions_follow_the_agents_own() -> None:
    ceo = make_agent("CEO", send_message("Developer", "build", "Use Rust."), "done", instructions="You lead.")
    dev = make_agent("Developer", "built", "built again", instructions="You code.")
    agency = Agency([ceo, dev, [ceo, dev]], shared_instructions="Shared.")
    await agency.get_response("go")
    system = model_of(dev).calls[0].system_instructions
    assert system is not None
    assert system.startswith("Shared.")
    assert system.index("You code.") < system.index("Use Rust.")
    await agency.get_response("direct", "Developer", additional_instructions="Be brief.")
    system = model_of(dev).calls[1].system_instructions
    assert system is not None
    assert system.endswith("Be brief.")
    assert "Use Rust." not in system


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_agent_name_is_rejected(name: str) -> None:
    with pytest.raises(ChartError, match="empty name"):
        Agency([make_agent("CEO"), Agent(name=name, model=ScriptedModel(["x"]))])


async def test_handoff_description_is_used_when_description_is_missing() -> None:
    ceo = make_agent("CEO")
    dev = Agent(name="Developer", handoff_description="Ships features", model=ScriptedModel(["x"]))
    await Agency([ceo, [ceo, dev]]).get_response("hi")
    assert "- Developer: Ships features" in send_tool(ceo).description.splitlines()


# -- whom the user may address: the chart's entry points, everywhere ---------------------------------------------


async def test_only_the_charts_entry_points_may_be_addressed_by_name_or_agent() -> None:
    ceo, dev = make_agent("CEO", "ceo reply"), make_agent("Developer", "dev reply")
    agency = Agency([ceo, [ceo, dev]])  # the user talks to CEO; Developer answers CEO
    for recipient in ("Developer", dev):
        with pytest.raises(ConfigError) as refused:
            await agency.get_response("hi", recipient)
        assert str(refused.value).startswith("'Developer' is not an entry point of this agency; the user may "
                                             "address: CEO.")
        assert "put it standalone in the chart" in str(refused.value)
    with pytest.raises(ConfigError, match="'Developer' is not an entry point"):
        agency.get_response_stream("hi", "Developer")
    with pytest.raises(ConfigError, match="'Developer' is not an entry point"):
        agency.get_response_sync("hi", "Developer")
    with pytest.raises(ConfigError, match=r"^No such agent: 'Nobody' is not in this agency \(its agents: CEO, "
                       r"Developer\); the user may address: CEO\.$"):
        await agency.get_response("hi", "Nobody")
    assert model_of(dev).calls == []
    assert agency.thread_manager.get_threads("default") == {}
    assert agency.entry_point().name == agency.entry_point("CEO").name == "CEO"
