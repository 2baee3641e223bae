"""What stays fixed across one agent turn's model calls: model, instructions, tools, output schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents import AgentOutputSchemaBase, FunctionTool, Tool

from .._model._retry import RetryingModel


@dataclass(slots=True, eq=False)
class Setup:
    """What stays fixed across one agent turn's model calls."""

    model: RetryingModel
    instructions: str | None
    tools: list[Tool]
    function_tools: dict[str, FunctionTool]
    schema: AgentOutputSchemaBase | None
    can_send: bool
    usage_key: tuple[str, str]
    """(agent, model name): where this turn's usage is counted, and what cost estimates price."""
    sources: tuple[Any, ...] | None = None
    """What the setup was built from, when it may serve the agent's next turns too (see `_reused_setup`)."""
    tool_list: list[Tool] | None = None
