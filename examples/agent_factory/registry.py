"""SubAgentRegistry: reads the sub-agent configs, describes them for prompts, and builds the agents."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from agents import Model, Tool, function_tool

from agency_swarm import Agent

from .config import SubAgentConfig

ModelFor = Callable[[str], "Model | str"]
"""Gives the model for an agent name: a model name such as "gpt-4.1-mini", or an agents.Model."""

SUB_AGENT_TEMPLATE = """You are {name}, part of {domain_name}. {description}

Your capabilities:
{capabilities}

Use your tools for every fact; never guess numbers or dates. Answer in one or two sentences."""


class SubAgentRegistry:
    """The registered sub-agents of one domain; everything downstream (prompts, plan schema, chart) reads from it."""

    def __init__(
        self,
        *,
        domain_name: str,
        domain_description: str,
        sub_agents: Sequence[SubAgentConfig],
        tool_functions: Mapping[str, Callable[..., Coroutine[Any, Any, str]]],
    ) -> None:
        self.domain_name = domain_name
        self.domain_description = domain_description
        self._configs: dict[str, SubAgentConfig] = {}
        for config in sub_agents:
            if config.key in self._configs:
                raise ValueError(f"Two sub-agents have the key {config.key!r}; keys must be unique.")
            for tool in config.tools:
                if tool.name not in tool_functions:
                    known = ", ".join(sorted(tool_functions))
                    raise ValueError(
                        f"Sub-agent {config.key!r} lists tool {tool.name!r}, which has no function; known: {known}."
                    )
            self._configs[config.key] = config
        self._tool_functions = dict(tool_functions)

    @property
    def agent_keys(self) -> list[str]:
        return list(self._configs)

    def config(self, key: str) -> SubAgentConfig:
        return self._configs[key]

    def describe(self, *, with_tools: bool = False) -> str:
        """One bullet per agent, its capabilities (and tools) indented under it: the prompts' agent list."""
        lines: list[str] = []
        for config in self._configs.values():
            lines.append(f"- **{config.key}** ({config.name}): {config.description}")
            lines += [f"  - {capability}" for capability in config.capabilities]
            if with_tools:
                lines += [f"  - tool `{tool.name}`: {tool.description}" for tool in config.tools]
        return "\n".join(lines)

    def build_agents(self, model_for: ModelFor) -> dict[str, Agent]:
        """One Agent per config, keyed by config key, with the config's tools and a prompt listing its capabilities."""
        agents: dict[str, Agent] = {}
        for key, config in self._configs.items():
            tools: list[Tool] = [
                function_tool(self._tool_functions[tool.name], name_override=tool.name,
                              description_override=tool.description)
                for tool in config.tools
            ]
            instructions = SUB_AGENT_TEMPLATE.format(
                name=config.name, domain_name=self.domain_name, description=config.description,
                capabilities="\n".join(f"- {capability}" for capability in config.capabilities),
            )
            agents[key] = Agent(
                name=config.name, description=config.description, instructions=instructions, tools=tools,
                model=model_for(config.name),
            )
        return agents
