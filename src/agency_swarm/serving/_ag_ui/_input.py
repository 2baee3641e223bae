"""What an AG-UI `RunAgentInput` asks for: a new user message for the chat, or decisions on its interrupts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ag_ui.core import AssistantMessage, ResumeEntry, RunAgentInput, TextPart, ToolMessage, UserMessage

from ..._base._errors import ConfigError, InvalidChatId
from ..._threads._manager import check_chat_id
from .._health import HEALTH_PROBE_CHAT

MAX_RUN_ID_CHARS = 200
RECIPIENT_PROP = "recipient_agent"
"""The `forwardedProps` key naming the entry point a new message goes to (default: the first)."""
CONTEXT_PROP = "context"
"""The `forwardedProps` key holding the request's `context` as a JSON object (as a /chats request's `context`)."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One AG-UI run on a chat: `message` for a new turn, or (None) a resume with `approve` / `reject`."""

    chat_id: str
    run_id: str
    message: str | None
    recipient_agent: str | None
    approve: tuple[str, ...]
    reject: Mapping[str, str | None]
    known_calls: frozenset[str]
    """Tool call ids the client's messages already hold: not announced to it again."""
    known_results: frozenset[str]
    """Tool call ids whose result the client's messages already hold."""

    @property
    def key(self) -> str:
        """The run's idempotency key: a client's retry of a run (the same runId on the same thread) is the same
        turn, whatever came between."""
        return f"ag-ui:{self.run_id}"


def run_request(run: RunAgentInput) -> RunRequest:
    """The request `run` makes, or ConfigError (InvalidChatId) naming what is wrong with it. Only the last message is
    read, and only without `resume`: the chat's stored threads are its record, not what the client sends back."""
    chat_id = check_chat_id(run.thread_id)
    if chat_id == HEALTH_PROBE_CHAT:
        raise InvalidChatId(f"threadId {HEALTH_PROBE_CHAT!r} is reserved for the server's health check; use another.")
    if not run.run_id.strip() or len(run.run_id) > MAX_RUN_ID_CHARS:
        raise ConfigError(f"runId must be 1 to {MAX_RUN_ID_CHARS} characters, not only whitespace.")
    known_calls, known_results = _known_ids(run)
    if run.resume:
        approve, reject = decisions(run.resume)
        return RunRequest(chat_id, run.run_id, None, None, approve, reject, known_calls, known_results)
    return RunRequest(
        chat_id, run.run_id, _new_message(run), _recipient(run.forwarded_props), (), {}, known_calls, known_results
    )


def decisions(entries: list[ResumeEntry]) -> tuple[tuple[str, ...], dict[str, str | None]]:
    """Resume entries as (approved call ids, {rejected call id: the message the model reads, or None}).

    `resolved` with `{"approved": true}` approves; `{"approved": false, "message"?: str}` rejects (with that
    message); `cancelled` rejects with the default message."""
    approve: list[str] = []
    reject: dict[str, str | None] = {}
    for entry in entries:
        call_id = entry.interrupt_id
        if call_id in reject or call_id in approve:
            raise ConfigError(f"resume answers interrupt {call_id!r} twice; answer each once.")
        if entry.status == "cancelled":
            reject[call_id] = None
            continue
        payload = entry.payload
        approved = payload.get("approved") if isinstance(payload, dict) else None
        if not isinstance(approved, bool):
            raise ConfigError(
                f'resume entry for interrupt {call_id!r}: payload must be {{"approved": true}} or '
                '{"approved": false, "message": "what the model reads"}.'
            )
        message = payload.get("message") if isinstance(payload, dict) else None
        if approved:
            approve.append(call_id)
        elif message is None or isinstance(message, str):
            reject[call_id] = message
        else:
            raise ConfigError(f"resume entry for interrupt {call_id!r}: message must be a string.")
    return tuple(approve), reject


def _new_message(run: RunAgentInput) -> str:
    """The user's last message. Messages after it (a retry's input holds the answers the first attempt streamed)
    are the client's record, not input: under the same runId the run is the same turn anyway."""
    last = next((message for message in reversed(run.messages) if isinstance(message, UserMessage)), None)
    if last is None:
        raise ConfigError(
            "messages hold no user message: add the user's new message (role user), or send resume entries for "
            "the run's interrupts."
        )
    if isinstance(last.content, str):
        return last.content
    if not all(isinstance(part, TextPart) for part in last.content):
        raise ConfigError("The user's message may hold text parts only.")
    return "\n".join(part.text for part in last.content if isinstance(part, TextPart))


def _recipient(props: Any) -> str | None:
    if not isinstance(props, dict) or props.get(RECIPIENT_PROP) is None:
        return None
    name = props[RECIPIENT_PROP]
    if not isinstance(name, str):
        raise ConfigError(f"forwardedProps.{RECIPIENT_PROP} must be the name of an entry point (a string).")
    return name


def _known_ids(run: RunAgentInput) -> tuple[frozenset[str], frozenset[str]]:
    calls: set[str] = set()
    results: set[str] = set()
    for message in run.messages:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls or ())
        elif isinstance(message, ToolMessage):
            results.add(message.tool_call_id)
    return frozenset(calls), frozenset(results)


def request_context(run: RunAgentInput, schema_declared: bool) -> Any:
    """The run's `context` as a /chats request carries it, for the server's `context_schema`: `forwardedProps.context`
    (any JSON value), else, when the server declares a schema, AG-UI's `context` entries as an object
    {description: value} (the values are strings). None when the run carries neither; without a schema AG-UI's
    entries are not read (clients send them for their own tools), while `forwardedProps.context` is refused."""
    props = run.forwarded_props
    given = props.get(CONTEXT_PROP) if isinstance(props, dict) else None
    if given is not None and run.context and schema_declared:
        raise ConfigError(
            f"The run carries both `context` entries and forwardedProps.{CONTEXT_PROP}; send the context one way."
        )
    if given is not None or not schema_declared or not run.context:
        return given
    entries: dict[str, str] = {}
    for entry in run.context:
        if entry.description in entries:
            raise ConfigError(f"`context` has two entries described {entry.description!r}; each field once.")
        entries[entry.description] = entry.value
    return entries
