"""The toolkits the caller passes in, checked, and the tools each agent picks from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._base._errors import ConfigError
from ._source import Loc, Source

if TYPE_CHECKING:
    from agents import Tool

    from ._schema import AgentSpec


def _tool_classes() -> tuple[type, ...]:
    import typing

    from agents import Tool

    return tuple(typing.get_origin(kind) or kind for kind in typing.get_args(Tool))


def check_toolkits(toolkits: Mapping[str, Sequence[Tool]] | None) -> dict[str, list[Tool]]:
    if toolkits is None:
        return {}
    if not isinstance(toolkits, Mapping):
        raise ConfigError('toolkits must be a mapping of names to lists of tools, e.g. {"search": [web_search]}.')
    classes = _tool_classes()
    registry: dict[str, list[Tool]] = {}
    for name, tools in toolkits.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"toolkit names must be non-empty text, got {name!r}.")
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise ConfigError(f"toolkits[{name!r}] must be a list of tools, got {type(tools).__name__}.")
        names: set[str] = set()
        for tool in tools:
            if not isinstance(tool, classes):
                raise ConfigError(
                    f"toolkits[{name!r}] holds {type(tool).__name__} {getattr(tool, '__name__', '')}, not a tool; "
                    "decorate functions with @function_tool."
                )
            if tool.name in names:
                raise ConfigError(f"toolkits[{name!r}] has two tools named {tool.name!r}.")
            names.add(tool.name)
        registry[name] = list(tools)
    return registry


def pick_tools(source: Source, loc: Loc, spec: AgentSpec, registry: dict[str, list[Tool]]) -> list[Tool]:
    chosen: list[Tool] = []
    origin: dict[str, str] = {}
    for index, pick in enumerate(spec.toolkits):
        pick_loc: Loc = (*loc, "toolkits", index)
        available = registry.get(pick.toolkit)
        if available is None:
            known = ", ".join(registry) or f"none (pass {source.arguments.toolkits})"
            raise source.error(f"unknown toolkit {pick.toolkit!r}. Known toolkits: {known}.", pick_loc)
        if pick.tools is None:
            tools = available
        else:
            by_name = {tool.name: tool for tool in available}
            for position, tool_name in enumerate(pick.tools):
                if tool_name not in by_name:
                    raise source.error(
                        f"toolkit {pick.toolkit!r} has no tool {tool_name!r}; its tools: {', '.join(by_name)}.",
                        (*pick_loc, "tools", position),
                    )
            tools = [by_name[tool_name] for tool_name in dict.fromkeys(pick.tools)]
        for tool in tools:
            if tool.name in origin:
                if origin[tool.name] == pick.toolkit:
                    continue
                raise source.error(
                    f"toolkits {origin[tool.name]!r} and {pick.toolkit!r} both have a tool named {tool.name!r}.",
                    pick_loc,
                )
            origin[tool.name] = pick.toolkit
            chosen.append(tool)
    return chosen
