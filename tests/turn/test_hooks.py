"""AgencyHooks: one object told about every agent, tool and message of a turn, nested agents included."""

from __future__ import annotations

from typing import Any

import pytest
from agents import AgentHooks, RunContextWrapper

from agency_swarm import (
    Agency,
    AgencyHooks,
    Agent,
    AgentFinished,
    AgentStarted,
    ConfigError,
    MessageSent,
    ToolCalled,
    ToolOutput,
    function_tool,
)
from agency_swarm.testing import ScriptedModel, ToolCall, send_message


@function_tool
def build(page: str) -> str:
    """Build a page."""
    return f"built {page}"


@function_tool(needs_approval=True)
def deploy() -> str:
    """Deploy."""
    return "deployed"


class Log(AgencyHooks):
    def __init__(self) -> None:
        self.lines: list[str] = []

    async def on_agent_start(self, event: AgentStarted) -> None:
        self.lines.append(f"start {event.agent} from {event.caller} at {event.depth}")

    async def on_agent_end(self, event: AgentFinished) -> None:
        self.lines.append(f"end {event.agent}: {event.output}")

    def on_tool_start(self, event: ToolCalled) -> None:  # a plain function works too
        self.lines.append(f"tool {event.agent}.{event.tool}")

    async def on_tool_end(self, event: ToolOutput) -> None:
        self.lines.append(f"tool done {event.tool}: {event.output}")

    async def on_message_sent(self, event: MessageSent) -> None:
        self.lines.append(f"sent {event.agent} -> {event.recipient}: {event.message}")

    async def on_message_received(self, event: ToolOutput) -> None:
        self.lines.append(f"reply to {event.agent}: {event.output}")

    async def on_approval_requested(self, event: Any) -> None:
        self.lines.append(f"approval {event.tool}")


def team(hooks: AgencyHooks) -> Agency:
    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "build home"), "shipped"]))
    dev = Agent(
        name="Developer", tools=[build], model=ScriptedModel.each_turn([ToolCall("build", {"page": "home"}), "done"])
    )
    return Agency([ceo, [ceo, dev]], hooks=hooks)


EXPECTED = [
    "start CEO from user at 0",
    "sent CEO -> Developer: build home",
    "start Developer from CEO at 1",
    "tool Developer.build",
    "tool done build: built home",
    "end Developer: done",
    "reply to CEO: done",
    "end CEO: shipped",
]


async def test_hooks_hear_every_agent_tool_and_message_in_order() -> None:
    log = Log()
    await team(log).get_response("ship it")
    assert log.lines == EXPECTED


async def test_hooks_hear_the_same_when_streaming() -> None:
    log = Log()
    async for _ in team(log).get_response_stream("ship it"):
        pass
    assert log.lines == EXPECTED


async def test_only_overridden_hooks_run_and_a_pause_is_reported() -> None:
    class Approvals(AgencyHooks):
        def __init__(self) -> None:
            self.seen: list[str] = []

        async def on_approval_requested(self, event: Any) -> None:
            self.seen.append(event.call_id)

    hooks = Approvals()
    ops = Agent(name="Ops", tools=[deploy], model=ScriptedModel.each_turn([ToolCall("deploy"), "ok"]))
    result = await Agency(ops, hooks=hooks).get_response("deploy")
    assert hooks.seen == [result.interruptions[0].call_id]


async def test_a_failing_hook_ends_the_turn_loudly() -> None:
    class Broken(AgencyHooks):
        async def on_tool_start(self, event: ToolCalled) -> None:
            raise RuntimeError("metrics backend down")

    with pytest.raises(RuntimeError, match="metrics backend down"):
        await team(Broken()).get_response("ship it")


def test_hooks_must_be_agency_hooks() -> None:
    with pytest.raises(ConfigError, match="AgencyHooks"):
        Agency(Agent(name="A", model=ScriptedModel(["x"])), hooks=object())  # type: ignore[arg-type]


class _TurnInputs(AgentHooks[Any]):
    """Per-agent SDK hooks that keep the `turn_input` each on_start is given."""

    def __init__(self, seen: list[tuple[str, Any]]) -> None:
        self.seen = seen

    async def on_start(self, context: RunContextWrapper[Any], agent: Any) -> None:
        self.seen.append((agent.name, list(context.turn_input)))


@pytest.mark.parametrize("streamed", [False, True])
async def test_on_start_gets_the_message_that_started_each_agent(streamed: bool) -> None:
    seen: list[tuple[str, Any]] = []
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Dev", "Build the page"), "Done."]),
                hooks=_TurnInputs(seen))
    dev = Agent(name="Dev", model=ScriptedModel(["Built."]), hooks=_TurnInputs(seen))
    agency = Agency([ceo, [ceo, dev]])
    if streamed:
        stream = agency.get_response_stream("Ship it")
        async for _ in stream:
            pass
        result = stream.result
    else:
        result = await agency.get_response("Ship it")
    assert seen == [
        ("CEO", [{"content": "Ship it", "role": "user"}]),
        ("Dev", [{"content": "Build the page", "role": "user"}]),
    ]
    assert result.context_wrapper.turn_input == [{"content": "Ship it", "role": "user"}]  # the run's, as Runner's
