"""AgencyHooks: callbacks for agent, tool and message events of every agent in a turn, for logging and metrics."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._base._errors import ConfigError
from .._base._events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    Event,
    MessageSent,
    ToolCalled,
    ToolOutput,
)
from .._base._names import SEND_MESSAGE

HookTable = dict[str, Callable[[Any], Awaitable[None] | None]]


class AgencyHooks:
    """Subclass and override what you need; each method gets the event, which names agent, caller, depth, chat.

    Methods may be async or plain functions. They run in the order of the turn's events, for nested agents too,
    whether the turn is streamed or not. An exception in a hook ends the turn (as in openai-agents' hooks).
    Per-agent hooks of openai-agents (`Agent(hooks=AgentHooks)`) keep working next to these.
    """

    async def on_agent_start(self, event: AgentStarted) -> None:
        """An agent began a turn (the user's message, or another agent's)."""

    async def on_agent_end(self, event: AgentFinished) -> None:
        """An agent produced its final output."""

    async def on_tool_start(self, event: ToolCalled) -> None:
        """The model called a function tool."""

    async def on_tool_end(self, event: ToolOutput) -> None:
        """A function tool's output went back to the model."""

    async def on_message_sent(self, event: MessageSent) -> None:
        """An agent sent a message to `event.recipient`; the recipient's turn starts next."""

    async def on_message_received(self, event: ToolOutput) -> None:
        """A recipient's reply (or the refusal or failure of the send) reached the sender (`event.agent`)."""

    async def on_approval_requested(self, event: ApprovalRequested) -> None:
        """A tool that needs approval was called; the turn pauses."""


_METHODS = {
    AgentStarted.type: "on_agent_start",
    AgentFinished.type: "on_agent_end",
    ToolCalled.type: "on_tool_start",
    ToolOutput.type: "on_tool_end",
    MessageSent.type: "on_message_sent",
    "message_received": "on_message_received",
    ApprovalRequested.type: "on_approval_requested",
}


def hook_table(hooks: AgencyHooks | None) -> HookTable | None:
    """Only the methods a subclass overrides: events nobody listens to cost nothing."""
    if hooks is None:
        return None
    if not isinstance(hooks, AgencyHooks):
        raise ConfigError(f"hooks must be an agency_swarm.AgencyHooks (subclass it), got {type(hooks).__name__}.")
    table: HookTable = {}
    for kind, name in _METHODS.items():
        if getattr(type(hooks), name) is not getattr(AgencyHooks, name):
            table[kind] = getattr(hooks, name)
    return table or None


async def dispatch(table: HookTable, event: Event) -> None:
    kind = event.type
    if kind == ToolOutput.type and isinstance(event, ToolOutput) and event.tool == SEND_MESSAGE:
        kind = "message_received"
    elif kind == ToolCalled.type and isinstance(event, ToolCalled) and event.tool == SEND_MESSAGE:
        return  # on_message_sent tells of a send (a refused one reaches on_message_received only)
    handler = table.get(kind)
    if handler is not None:
        result = handler(event)
        if inspect.isawaitable(result):
            await result
