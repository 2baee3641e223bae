"""What stays fixed across one agent turn's model calls (`Setup`), and what it was built from (`SetupSources`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents import AgentOutputSchemaBase, FunctionTool, Tool

from .._model._retry import RetryingModel
from ._tool_keys import ToolKey


@dataclass(slots=True, eq=False)
class Setup:
    """What one agent turn's model calls share: the wrapped model, the system prompt, the tools, the output schema.

    It holds nothing that changes during the turn (that is `Turn`'s) and nothing of the run (`Run`'s). Built by
    `_prepare.prepare`; when `sources` is set, the agent's next turns reuse it while those sources are unchanged.
    """

    model: RetryingModel
    instructions: str | None
    tools: list[Tool]
    function_tools: dict[ToolKey, FunctionTool]
    """The function tools by what a call names (`_tools.ToolKey`: its name, or its namespace and name)."""
    schema: AgentOutputSchemaBase | None
    can_send: bool
    usage_key: tuple[str, str]
    """(agent, model name): where this turn's usage is counted, and what cost estimates price."""
    sources: SetupSources | None = None
    """What the setup was built from, when it may serve the agent's next turns too; None: built per model call."""


@dataclass(frozen=True, slots=True)
class SetupSources:
    """The objects a reusable setup was built from. A later turn reuses the setup while each is the same object
    (`_prepare.reused_setup`): an equal new value only costs a rebuild."""

    name: str
    instructions: Any
    """The agent's `instructions`: a str or None (a function's setup is never kept)."""
    output_type: Any
    model: Any
    retry: Any
    timeout: Any
    send_tool: Any
    shared_instructions: str | None
    agency_retry: Any
    tools: list[Tool]
    """A copy of the agent's tool list: tools added, removed or replaced in place are noticed."""

