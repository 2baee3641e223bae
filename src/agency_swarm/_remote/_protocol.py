"""What our A2A client and server agree on: the metadata they carry, ids, message text, events as progress."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .._base._errors import ConfigError
from .._base._events import AgentFinished, Event, RawModelEvent, TextDelta
from .._base._extras import install_hint

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import Message

META = "agency_swarm"
"""The key under which our messages and status updates carry what A2A has no field for: the sender's depth, the
event a progress update stands for, the calls an INPUT_REQUIRED task waits for."""
DEPTH = "depth"
EVENT = "event"
INTERRUPTIONS = "interruptions"
A2A_EXTRA = install_hint("a2a")
MAX_PROGRESS_CHARS = 2000
"""A progress update's text is cut to this many characters (its event, in the metadata, keeps everything)."""


class Remote(Protocol):
    """What a remote turn reads of its member (`RemoteAgent`)."""

    name: str
    url: str
    headers: Mapping[str, str]
    reply_timeout: float
    retries: int
    card: Any


def require_a2a() -> None:
    """ConfigError naming the extra to install when a2a-sdk is missing."""
    try:
        import a2a.types  # noqa: F401
    except ImportError as missing:
        raise ConfigError(f"A2A needs the a2a-sdk package: {A2A_EXTRA}.") from missing


def derived_id(*parts: str) -> str:
    """A fixed-length id for what `parts` name (a message id retried stays the same message)."""
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=16)
    return digest.hexdigest()


def message_text(message: Message) -> str:
    """The text parts of a message, joined by newlines."""
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def message_data(message: Message) -> list[Any]:
    """The data parts of a message, as JSON values."""
    from google.protobuf.json_format import MessageToDict

    return [MessageToDict(part.data) for part in message.parts if part.HasField("data")]


def meta_of(metadata: Any) -> dict[str, Any]:
    """Our entry of a proto `metadata` Struct (empty when absent or not an object)."""
    from google.protobuf.json_format import MessageToDict

    if metadata is None or not metadata.fields:
        return {}
    found = MessageToDict(metadata).get(META)
    return found if isinstance(found, dict) else {}


def is_progress(event: Event) -> bool:
    """Events a remote caller is told of as progress: all but text deltas and the model's raw events."""
    return not isinstance(event, TextDelta | RawModelEvent)


def progress_text(event: Event) -> str:
    """One line telling a person what `event` means."""
    data = event.to_dict()
    kind = data["type"]
    if kind == "agent_started":
        text = f"{event.agent} started: {data.get('message', '')}"
    elif kind == "message_sent":
        text = f"{event.agent} -> {data.get('recipient')}: {data.get('message', '')}"
    elif kind == "tool_called":
        text = f"{event.agent} called {data.get('tool')}({data.get('arguments', '')})"
    elif kind == "tool_output":
        text = f"{event.agent} got from {data.get('tool')}: {data.get('output', '')}"
    elif kind == "approval_requested":
        text = f"{event.agent} waits for approval of {data.get('tool')} ({data.get('call_id')})"
    elif isinstance(event, AgentFinished):
        text = f"{event.agent} finished: {as_text(event.output)}"
    else:
        text = f"{event.agent}: {kind}"
    return text if len(text) <= MAX_PROGRESS_CHARS else text[: MAX_PROGRESS_CHARS - 3] + "..."


def as_text(output: Any) -> str:
    """A final output as the text a remote caller reads."""
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    return json.dumps(output, default=str)
