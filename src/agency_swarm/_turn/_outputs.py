"""Model output items beyond messages and function calls: hosted tool calls and local-execution calls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agents import (
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    LocalShellTool,
    ModelBehaviorError,
    ShellTool,
)

from .._base._errors import ConfigError
from .._base._items import stored_item

HOSTED_ACTIVITY = frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call",
    "mcp_list_tools", "shell_call", "shell_call_output", "tool_search_call", "tool_search_output",
})
"""Calls the API ran itself (and what it listed): stored and replayed, nothing runs here; each is a `hosted_item`
event."""

TOOL_ACTIVITY = HOSTED_ACTIVITY - {"mcp_list_tools"}
"""Hosted items `Runner` counts as tool activity: a response of only these (no message) asks for another model call.
An MCP tool listing is not one: a response of only that ends the turn with no text, as under `Runner`."""

USED_TOOLS = (TOOL_ACTIVITY | {"function_call"}) - {"tool_search_call", "tool_search_output"}
"""Items that count as the agent having used a tool, after which `reset_tool_choice` resets `tool_choice` as under
`Runner` (it tracks tool calls and their outputs). Not among them: an MCP approval request, an MCP tool listing,
tool search items, messages and reasoning."""

LOCAL_CALLS: dict[str, str] = {
    "computer_call": "Model produced computer action without a computer tool.",
    "local_shell_call": "Model produced local shell call without a local shell tool.",
    "apply_patch_call": "Model produced apply_patch call without an apply_patch tool.",
    "custom_tool_call": "Model produced a custom tool call, which agency_swarm agents do not run.",
}
"""Calls that need a program on this machine, with the error `Runner` raises when the agent lacks the tool (our
agents never have one: `refused_tool` stops them when the agent is built)."""


def refused_tool(agent_name: str, tools: Iterable[Any]) -> None:
    """Raise ConfigError for a tool the loop does not run: local-execution tools. (A hosted MCP server that asks for
    approval with nobody to answer is not refused: its requests pause the turn, as under `Runner`.)"""
    for tool in tools:
        kind = _local_kind(tool)
        if kind is not None:
            raise ConfigError(
                f"Agent {agent_name!r} has a {kind} ({type(tool).__name__} {getattr(tool, 'name', '')!r}); "
                "agency_swarm's loop does not run local-execution tools. Wrap what it should do in a function_tool "
                "instead, or run this agent with agents.Runner."
            )


def _local_kind(tool: Any) -> str | None:
    if isinstance(tool, ComputerTool):
        return "computer tool"
    if isinstance(tool, LocalShellTool):
        return "local shell tool"
    if isinstance(tool, ApplyPatchTool):
        return "apply_patch tool"
    if isinstance(tool, CustomTool):
        return "custom tool"
    if isinstance(tool, ShellTool):
        environment = tool.environment
        if environment is None or environment.get("type") == "local":
            return "local shell tool"
    return None


def unusual_items(output: Sequence[Any], tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The stored items of a response that holds more than one message or call, or another kind of item.

    A call that needs a local tool raises `Runner`'s `ModelBehaviorError` before anything is stored: a call left
    without its output would make the thread unusable for every later request. Hosted shell items lose the fields
    the Responses API refuses in input (as `Runner` strips them).
    """
    hosted_shell = any(isinstance(tool, ShellTool) and _local_kind(tool) is None for tool in tools)
    for item in output:
        kind = getattr(item, "type", "")
        message = LOCAL_CALLS.get(kind)
        if message is None and kind == "shell_call" and not hosted_shell:
            message = "Model produced shell call without a shell tool."
        if message is not None:
            raise ModelBehaviorError(message)
    items = [stored_item(item) for item in output]
    for item in items:
        if item.get("type") in _SHELL_KINDS:
            _strip_shell_fields(item)
    return items


_SHELL_KINDS = frozenset({"shell_call", "shell_call_output"})


def _strip_shell_fields(item: dict[str, Any]) -> None:
    item.pop("created_by", None)
    if item.get("type") == "shell_call_output":
        for name in ("status", "shell_output", "provider_data"):
            item.pop(name, None)
        for entry in item.get("output") or ():
            if isinstance(entry, dict):
                entry.pop("created_by", None)
