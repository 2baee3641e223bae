"""The send_message tool (built once per agent and chart) and the checks a send must pass."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from .._base._names import SEND_MESSAGE

if TYPE_CHECKING:
    from ._definition import AgentBase


@dataclass(kw_only=True, slots=True)
class SendRequest:
    recipient: str
    message: str
    additional_instructions: str | None
    attachments: list[str] = field(default_factory=list)


def build_send_message_tool(recipients: Sequence[AgentBase]) -> FunctionTool:
    """One strict FunctionTool whose `recipient_agent` enum lists exactly the allowed recipients."""
    names = [agent.name for agent in recipients]
    listing = "\n".join(f"- {agent.name}: {agent.description or 'no description'}" for agent in recipients)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "recipient_agent": {
                "type": "string",
                "enum": names,
                "description": "The agent to send the message to.",
            },
            "message": {
                "type": "string",
                "description": "The task or question for the recipient, with all the context it needs.",
            },
            "additional_instructions": {
                "type": ["string", "null"],
                "description": "Extra instructions added to the recipient's instructions for this reply only.",
            },
            "attachments": {
                "type": ["array", "null"],
                "items": {"type": "string"},
                "description": "Ids of images or files from your conversation to pass on with the message, as shown "
                "next to each one ([attachment att_...]); null for none.",
            },
        },
        "required": ["recipient_agent", "message", "additional_instructions", "attachments"],
        "additionalProperties": False,
    }
    return FunctionTool(
        name=SEND_MESSAGE,
        description=(
            "Send a message to another agent and wait for its reply, which you get back as this tool's output. "
            "Agents you can message:\n" + listing
        ),
        params_json_schema=schema,
        on_invoke_tool=_outside_the_loop,
        strict_json_schema=True,
    )


async def _outside_the_loop(_context: ToolContext[Any], _arguments: str) -> str:
    return (
        "Error: send_message only works inside agency_swarm's own loop (Agent.get_response / Agency.get_response), "
        "not through openai-agents' Runner."
    )


def parse_send_request(arguments: str, allowed: Collection[str]) -> SendRequest | str:
    """The request, or the text that tells the model what was wrong with it."""
    try:
        data = json.loads(arguments or "{}")
    except json.JSONDecodeError as error:
        return f"Error: send_message arguments are not valid JSON ({error.msg}). {_hint(allowed)}"
    if type(data) is not dict:
        return f"Error: send_message arguments must be a JSON object. {_hint(allowed)}"
    recipient, message = data.get("recipient_agent"), data.get("message")
    extra = data.get("additional_instructions")
    if type(recipient) is not str or recipient not in allowed:
        return f"Error: you cannot message {recipient!r}. {_hint(allowed)}"
    if type(message) is not str or not message.strip():
        return "Error: send_message needs a non-empty `message` string."
    if extra is not None and type(extra) is not str:
        return "Error: `additional_instructions` must be a string or null."
    attachments = data.get("attachments")
    if attachments is not None and (type(attachments) is not list or not all(type(a) is str for a in attachments)):
        return "Error: `attachments` must be a list of attachment ids (strings) or null."
    return SendRequest(recipient=recipient, message=message, additional_instructions=extra or None,
                       attachments=list(dict.fromkeys(attachments or ())))


def unknown_attachments(unknown: Collection[str], known: Collection[str]) -> str:
    return (
        f"Error: no attachment {', '.join(unknown)} in your conversation; the attachments you can pass on are: "
        f"{', '.join(sorted(known)) or 'none'}."
    )



def _hint(allowed: Collection[str]) -> str:
    return f"Agents you can message: {', '.join(allowed)}." if allowed else "You cannot message any agent."


def depth_refusal(recipient: str, max_depth: int) -> str:
    return (
        f"Error: cannot message {recipient}: the depth limit (max_recursion_depth={max_depth}) is reached. "
        "Answer with what you have or do the work yourself."
    )


def reentry_refusal(sender: str, recipient: str) -> str:
    return (
        f"Error: cannot message {recipient} now: it is still working on an earlier message from {sender} "
        "in this chat. Wait for that reply instead of sending another message."
    )


def failure_output(recipient: str, error: BaseException) -> str:
    return f"Error: {recipient} failed to answer: {type(error).__name__}: {error}"
