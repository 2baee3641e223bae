"""How a function call names its tool (`ToolKey`: namespace and name), and an agent's function tools by that key."""

from __future__ import annotations

import logging
from typing import Any

from agents import FunctionTool, UserError
from openai.types.responses import ResponseFunctionToolCall

logger = logging.getLogger("agency_swarm")

ToolKey = str | tuple[str, str]
"""How a function tool is found from a call, as `Runner` finds it: a call without a namespace names a top-level tool
by its name; a call with one names `(namespace, name)`. A deferred-loading top-level tool is called with its own
name as namespace, so its key is `(name, name)`: `tool_namespace` refuses that pair, and a call without a namespace
never reaches it."""


def call_key(name: str, namespace: str | None) -> ToolKey:
    return (namespace, name) if namespace else name


def tool_namespace_of(tool: FunctionTool, qualified: str | None = None) -> str | None:
    """The namespace `agents.tool_namespace` gave the tool (read from its public `qualified_name`), or None."""
    name = tool.name
    if qualified is None:
        qualified = tool.qualified_name
    if qualified == name or not qualified.endswith("." + name):
        return None
    return qualified[: -len(name) - 1]


def tool_key(tool: FunctionTool, qualified: str | None = None) -> ToolKey:
    namespace = tool_namespace_of(tool, qualified)
    if namespace is not None:
        return (namespace, tool.name)
    return (tool.name, tool.name) if getattr(tool, "defer_loading", False) else tool.name


def qualified_call_name(call: ResponseFunctionToolCall) -> str:
    """`namespace.name` for a call with a namespace (how `Runner` names the tool it did not find), else `name`."""
    namespace = getattr(call, "namespace", None)
    return f"{namespace}.{call.name}" if namespace else call.name


def trace_name(call: ResponseFunctionToolCall) -> str:
    """A call's function span name, as `Runner` names it: `namespace.name`, or the bare name for a call without a
    namespace or a deferred-loading tool's call (its namespace is its own name)."""
    namespace = call.namespace
    return f"{namespace}.{call.name}" if namespace and namespace != call.name else call.name


def function_tool_map(tools: list[Any]) -> tuple[dict[ToolKey, FunctionTool], set[int]]:
    """The function tools by `ToolKey`, and the positions in `tools` of the top-level tools whose name a later
    top-level tool takes again: as under `Runner`, the last one wins and the model is not shown the others (a
    warning says so).

    Raises UserError, as `Runner` does before its model call, when two tools share a qualified name and either has
    a namespace (the same namespace twice, or a namespaced tool beside a top-level tool named `namespace.name`), or
    two deferred-loading top-level tools share a name: which one a call means would be a guess.
    """
    found: dict[ToolKey, FunctionTool] = {}
    positions: dict[ToolKey, int] = {}
    named: dict[str, FunctionTool] = {}
    shadowed: set[int] = set()
    for position, tool in enumerate(tools):
        if not isinstance(tool, FunctionTool):
            continue
        qualified = tool.qualified_name
        key = tool_key(tool, qualified)
        prior, earlier = found.get(key), named.get(qualified)
        if prior is not None and isinstance(key, tuple) and key[0] == key[1]:
            _ambiguous(f"two deferred-loading tools are named {tool.name!r}")
        if earlier is not None and (qualified != tool.name or tool_namespace_of(earlier)):
            _ambiguous(f"two tools are named {qualified!r} (namespace and name)")
        if prior is not None and isinstance(key, str):
            shadowed.add(positions[key])
        named[qualified] = found[key] = tool
        positions[key] = position
    if shadowed:
        logger.warning("Tools %s are each shadowed by a later tool of the same name; the model is shown the last.",
                       sorted({tools[position].name for position in shadowed}))
    return found, shadowed


def _ambiguous(problem: str) -> None:
    raise UserError(f"Ambiguous function tools: {problem}, so a call could not say which one it means. Rename one.")
