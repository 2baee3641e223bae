"""The stream's event types; every event names its agent, caller, depth and chat id."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(kw_only=True, slots=True)
class Event:
    """Base of every streamed event. `caller` is "user" for the entry agent."""

    type: ClassVar[str] = "event"
    agent: str
    caller: str
    depth: int
    chat_id: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the event, `type` included (raw SDK events are dumped with pydantic)."""
        data = asdict(self)
        data["type"] = self.type
        return data


@dataclass(kw_only=True, slots=True)
class AgentStarted(Event):
    """An agent began its turn on the thread caller->agent. `send_call_id` is the call id of the caller's
    `send_message` that started it (the `call_id` of that send's `tool_called`, `message_sent` and `tool_output`):
    None for the entry agent. Each invocation of an agent by a send has its own."""

    type: ClassVar[str] = "agent_started"
    message: str
    """The message's text (input items: their text parts, one per line)."""
    attachments: list[dict[str, Any]] = field(default_factory=list)
    """The message's images and files as stored: by reference to their bytes (or by URL or file id), never the
    bytes themselves."""
    send_call_id: str | None = None


@dataclass(kw_only=True, slots=True)
class TextDelta(Event):
    """A piece of the agent's text as the model streams it (streaming only)."""

    type: ClassVar[str] = "text_delta"
    delta: str


@dataclass(kw_only=True, slots=True)
class ToolCalled(Event):
    """The model called a function tool or send_message (a send's `message_sent` follows); `tool_output` with the
    same `call_id` comes when the call is done."""

    type: ClassVar[str] = "tool_called"
    tool: str
    call_id: str
    arguments: str


@dataclass(kw_only=True, slots=True)
class MessageSent(Event):
    """The agent sent a message to `recipient`; the recipient's events follow, then `tool_output`."""

    type: ClassVar[str] = "message_sent"
    recipient: str
    message: str
    call_id: str
    attachments: list[str] = field(default_factory=list)
    """The ids of the attachments the sender passed on with the message."""


@dataclass(kw_only=True, slots=True)
class HostedItem(Event):
    """A hosted tool's item: a call the model's API ran itself (`web_search_call`, `file_search_call`,
    `code_interpreter_call`, `image_generation_call`, `mcp_call`, `mcp_list_tools`, a hosted `shell_call`...), or a
    hosted MCP approval request and the answer its `on_approval_request` gave. Nothing runs here; `item` is the
    stored item."""

    type: ClassVar[str] = "hosted_item"
    kind: str
    """The item's type, e.g. "web_search_call"."""
    item: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class ApprovalRequested(Event):
    """A tool that needs approval was called: the turn pauses; `resume(approve=/reject=)` decides."""

    type: ClassVar[str] = "approval_requested"
    tool: str
    call_id: str
    arguments: str


@dataclass(kw_only=True, slots=True)
class ToolOutput(Event):
    """The output a tool call (or a send_message) gave back to the model."""

    type: ClassVar[str] = "tool_output"
    tool: str
    call_id: str
    output: str


@dataclass(kw_only=True, slots=True)
class AgentFinished(Event):
    """The agent produced its final output for this turn; `send_call_id` as in its `agent_started`."""

    type: ClassVar[str] = "agent_finished"
    output: Any
    send_call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = Event.to_dict(self)
        dump = getattr(self.output, "model_dump", None)
        if callable(dump):
            data["output"] = dump(mode="json")
        return data


@dataclass(kw_only=True, slots=True)
class RawModelEvent(Event):
    """One raw Responses-API stream event from the SDK's model (streaming only)."""

    type: ClassVar[str] = "raw"
    data: Any

    def to_dict(self) -> dict[str, Any]:
        dump = getattr(self.data, "model_dump", None)
        raw = dump(mode="json") if callable(dump) else self.data
        return {
            "type": self.type,
            "agent": self.agent,
            "caller": self.caller,
            "depth": self.depth,
            "chat_id": self.chat_id,
            "data": raw,
        }


@dataclass(kw_only=True, slots=True)
class RemoteProgress(Event):
    """Progress a remote chart member (`RemoteAgent`) reported while it worked: `remote` names the member; `agent`,
    `caller` and `depth` say who reported it there (depth counted in this chart), `kind` what happened
    (`agent_started`, `message_sent`, `tool_called`, ... as our own events; `status` from an agent that does not say),
    `text` one line for people, `data` the event as the remote sent it."""

    type: ClassVar[str] = "remote_progress"
    remote: str
    kind: str
    text: str
    data: dict[str, Any]


@dataclass(kw_only=True, slots=True)
class TurnCancelledEvent(Event):
    """The last event of a cancelled turn's stream (`agent` is the entry agent): the turn stopped where it stood."""

    type: ClassVar[str] = "cancelled"
    turn_id: str | None = None


# The two events of every streamed model event, built without keywords: calling a class with keywords packs them
# into a dict for its __init__ (~0.2 µs), which a stream pays once or twice for each of the model's events.
_new = object.__new__


def raw_model_event(agent: str, caller: str, depth: int, chat_id: str, data: Any) -> RawModelEvent:
    """The same as `RawModelEvent(agent=..., caller=..., depth=..., chat_id=..., data=...)`."""
    event: RawModelEvent = _new(RawModelEvent)
    event.agent = agent
    event.caller = caller
    event.depth = depth
    event.chat_id = chat_id
    event.data = data
    return event


def text_delta(agent: str, caller: str, depth: int, chat_id: str, delta: str) -> TextDelta:
    """The same as `TextDelta(agent=..., caller=..., depth=..., chat_id=..., delta=...)`."""
    event: TextDelta = _new(TextDelta)
    event.agent = agent
    event.caller = caller
    event.depth = depth
    event.chat_id = chat_id
    event.delta = delta
    return event


StreamEvent = (
    AgentStarted | TextDelta | ToolCalled | ApprovalRequested | MessageSent | ToolOutput | AgentFinished | RawModelEvent
    | HostedItem | RemoteProgress | TurnCancelledEvent
)
