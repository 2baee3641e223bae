"""Instruction placeholders: {{date}}, {{agent_name}}, {{AVAILABLE_AGENTS}}; checked at load, expanded per turn."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from ._errors import ConfigError

DATE = "date"
AGENT_NAME = "agent_name"
AVAILABLE_AGENTS = "AVAILABLE_AGENTS"
KNOWN_PLACEHOLDERS = (AVAILABLE_AGENTS, AGENT_NAME, DATE)

NO_RECIPIENTS = "(none: you cannot message other agents)"
NO_DESCRIPTION = "(no description)"

# A placeholder is an identifier (dots allowed, as in template languages) in double braces, spaces allowed
# inside. Other text in double braces, such as JSON in an example, is left alone.
_PATTERN = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")


def has_placeholders(text: str) -> bool:
    """The cheap test the loop runs before anything else: most instructions have no "{{" at all."""
    return "{{" in text


def unknown_placeholders(text: str) -> list[str]:
    """Names in `text` that look like placeholders but are not known ones, in order of first appearance."""
    if "{{" not in text:
        return []
    unknown: list[str] = []
    for match in _PATTERN.finditer(text):
        name = match.group(1)
        if name not in KNOWN_PLACEHOLDERS and name not in unknown:
            unknown.append(name)
    return unknown


def placeholder_problem(text: str, where: str) -> str | None:
    """A message naming `where` and the first unknown placeholder, or None when every placeholder is known."""
    unknown = unknown_placeholders(text)
    if not unknown:
        return None
    import difflib  # only on the error path

    name = unknown[0]
    known = ", ".join("{{" + known + "}}" for known in KNOWN_PLACEHOLDERS)
    close = difflib.get_close_matches(name, KNOWN_PLACEHOLDERS, n=1) or [
        known for known in KNOWN_PLACEHOLDERS if known.lower() == name.lower()
    ]
    hint = f" Did you mean {{{{{close[0]}}}}}?" if close else ""
    more = f" (also unknown: {', '.join('{{' + other + '}}' for other in unknown[1:])})" if len(unknown) > 1 else ""
    return (
        f"{where} use the unknown placeholder {{{{{name}}}}}{more}. Known placeholders: {known}.{hint} "
        "Remove it or spell it as one of the known ones."
    )


def check_placeholders(text: str, where: str) -> None:
    """Raise ConfigError when `text` has a placeholder this agency cannot expand."""
    problem = placeholder_problem(text, where)
    if problem is not None:
        raise ConfigError(problem)


def available_agents(recipients: Mapping[str, Any]) -> str:
    """`- Name: description`, one line per agent this agent may message (chart order)."""
    if not recipients:
        return NO_RECIPIENTS
    lines = []
    for name, agent in recipients.items():
        description = getattr(agent, "description", None)
        description = " ".join(description.split()) if isinstance(description, str) else ""
        lines.append(f"- {name}: {description or NO_DESCRIPTION}")
    return "\n".join(lines)


def render(text: str, *, agent_name: str, recipients: Mapping[str, Any]) -> str:
    """Expand the known placeholders; unknown ones (only possible in text produced at run time) stay as written."""
    if "{{" not in text:
        return text
    values: dict[str, str] = {}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            if name == DATE:
                values[name] = datetime.date.today().isoformat()
            elif name == AGENT_NAME:
                values[name] = agent_name
            elif name == AVAILABLE_AGENTS:
                values[name] = available_agents(recipients)
            else:
                return match.group(0)
        return values[name]

    return _PATTERN.sub(value, text)
