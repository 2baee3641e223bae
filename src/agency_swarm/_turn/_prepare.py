"""Preparing an agent turn's `Setup` (enabled tools, system prompt, output schema, wrapped model), or reusing it."""

from __future__ import annotations

from agents import AgentOutputSchema, AgentOutputSchemaBase, Tool

from ._definition import AgentBase, Wiring
from ._outputs import refused_tool
from ._setup import Setup, SetupSources
from ._state import Turn
from ._tool_keys import function_tool_map


def reused_setup(turn: Turn, additional_instructions: str | None) -> Setup | None:
    """The agent's last setup when nothing it was built from has changed and every tool is still plainly enabled."""
    agent, wiring = turn.agent, turn.wiring
    setup = wiring.setups.get(agent)
    if setup is None or additional_instructions is not None or agent.mcp_servers:
        return None
    was = setup.sources
    assert was is not None  # only setups with sources are kept
    if not (  # by identity, attribute by attribute: this runs once per agent turn
        was.name is agent.name and was.instructions is agent.instructions and was.output_type is agent.output_type
        and was.model is agent.model and was.retry is agent.retry and was.timeout is agent.timeout
        and was.send_tool is wiring.send_tool and was.shared_instructions is wiring.shared_instructions
        and was.agency_retry is wiring.retry and was.tools == agent.tools
    ):
        return None
    for tool in agent.tools:
        if getattr(tool, "is_enabled", True) is not True:  # switched off (or made conditional) since
            return None
    return setup


async def prepare(turn: Turn, additional_instructions: str | None) -> Setup:
    """A new setup for the agent's next model call; kept for its next turns when nothing in it is per call."""
    agent, wiring = turn.agent, turn.wiring
    instructions = agent.instructions
    if not isinstance(instructions, str) and instructions is not None:
        instructions = await agent.get_system_prompt(turn.run.context())
    tools = await _tools(turn)
    function_tools, shadowed = function_tool_map(tools) if tools else ({}, set())
    if shadowed:
        tools = [tool for position, tool in enumerate(tools) if position not in shadowed]
    if wiring.send_tool is not None:
        tools.append(wiring.send_tool)
    model = wiring.resolve_model(agent)
    system_prompt = _system_prompt(agent, wiring, instructions, additional_instructions)
    setup = Setup(
        model=model,
        instructions=system_prompt,
        tools=tools,
        function_tools=function_tools,
        schema=_output_schema(agent),
        can_send=wiring.send_tool is not None,
        usage_key=(agent.name, getattr(model, "model_name", None) or type(model).__name__),
    )
    reusable = (
        additional_instructions is None and not agent.mcp_servers and len(tools) == len(agent.tools) + setup.can_send
        and (system_prompt is None or "{{" not in (wiring.shared_instructions or "") + (instructions or ""))
        and (agent.instructions is None or isinstance(agent.instructions, str))
    )
    if reusable:
        setup.sources = SetupSources(
            name=agent.name, instructions=agent.instructions, output_type=agent.output_type, model=agent.model,
            retry=agent.retry, timeout=agent.timeout, send_tool=wiring.send_tool,
            shared_instructions=wiring.shared_instructions, agency_retry=wiring.retry, tools=list(agent.tools),
        )
        wiring.setups[agent] = setup
    return setup


async def _tools(turn: Turn) -> list[Tool]:
    """The agent's tools that are enabled for this call, its MCP servers' tools first."""
    agent = turn.agent
    tools: list[Tool] = []
    if agent.tools:
        tools = [tool for tool in agent.tools if getattr(tool, "is_enabled", True) is True]
        if len(tools) != len(agent.tools):  # some are disabled or decided per run
            tools = [tool for tool in agent.tools if await _enabled(tool, turn)]
    if agent.mcp_servers:
        tools = [*await agent.get_mcp_tools(turn.run.context()), *tools]
    refused_tool(agent.name, tools)  # tools assigned after the agent was built are checked here
    return tools


def _system_prompt(agent: AgentBase, wiring: Wiring, own: str | None, additional: str | None) -> str | None:
    """Shared, own and additional instructions, in that order; placeholders ({{date}}...) expand per turn."""
    parts = [part for part in (wiring.shared_instructions, own, additional) if part]
    if not parts:
        return None
    if any("{{" in part for part in parts):
        from .._base._placeholders import render

        parts = [render(part, agent_name=agent.name, recipients=wiring.recipients) for part in parts]
    return "\n\n".join(parts)


async def _enabled(tool: Tool, turn: Turn) -> bool:
    flag = getattr(tool, "is_enabled", True)
    if isinstance(flag, bool):
        return flag
    result = flag(turn.run.context(), turn.agent)
    if not isinstance(result, bool):
        result = await result
    return bool(result)


def _output_schema(agent: AgentBase) -> AgentOutputSchemaBase | None:
    output_type = agent.output_type
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, AgentOutputSchemaBase):
        return output_type
    return AgentOutputSchema(output_type)
