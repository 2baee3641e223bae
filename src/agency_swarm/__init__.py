"""agency_swarm: teams of openai-agents agents that message each other through a chart."""

import importlib
from typing import TYPE_CHECKING, Any

from agents import ModelSettings, function_tool

from ._agency._agency import Agency
from ._attachments._media import AttachmentLimits
from ._attachments._parts import file_part, image_part
from ._base._errors import (
    AgencySwarmError,
    AttachmentError,
    ChartError,
    ChatPaused,
    ConfigError,
    ConfigFileError,
    InvalidChatId,
    ItemTooLarge,
    MaxStepsExceeded,
    ModelAuthenticationError,
    ModelError,
    ModelRequestError,
    ModelTimeout,
    ModelUnavailable,
    NothingToResume,
    OutputValidationError,
    ReentrantTurn,
    RemoteAgentError,
    RunError,
    StoreError,
    TurnLockLost,
)
from ._base._events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    Event,
    HostedItem,
    MessageSent,
    RawModelEvent,
    RemoteProgress,
    StreamEvent,
    TextDelta,
    ToolCalled,
    ToolOutput,
)
from ._model._retry import RetryPolicy
from ._remote._agent import RemoteAgent
from ._threads._manager import ConversationThread, ThreadManager
from ._threads._store import MemoryThreadStore, ThreadStore, TurnLockingStore
from ._threads._thread_items import model_input
from ._turn._agent import Agent
from ._turn._hooks import AgencyHooks
from ._turn._results import Interruption, ResponseStream, RunResult

if TYPE_CHECKING:
    from ._model._cost import CostEstimate, ModelPrice
    from ._threads._file_store import FileThreadStore
    from ._threads._sql_store import SQLiteThreadStore, SQLThreadStore

_LAZY = {
    "CostEstimate": "._model._cost",
    "FileThreadStore": "._threads._file_store",
    "ModelPrice": "._model._cost",
    "SQLThreadStore": "._threads._sql_store",
    "SQLiteThreadStore": "._threads._sql_store",
}
"""Exported names whose modules (and aiofiles, sqlite3) load on first use, so `import agency_swarm` stays cheap."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agency_swarm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

__all__ = [
    "Agency",
    "AgencyHooks",
    "AgencySwarmError",
    "Agent",
    "AgentFinished",
    "AgentStarted",
    "ApprovalRequested",
    "AttachmentError",
    "AttachmentLimits",
    "ChartError",
    "ChatPaused",
    "ConfigError",
    "ConfigFileError",
    "ConversationThread",
    "CostEstimate",
    "Event",
    "FileThreadStore",
    "HostedItem",
    "Interruption",
    "InvalidChatId",
    "ItemTooLarge",
    "MaxStepsExceeded",
    "MemoryThreadStore",
    "MessageSent",
    "ModelAuthenticationError",
    "ModelError",
    "ModelPrice",
    "ModelRequestError",
    "ModelSettings",
    "ModelTimeout",
    "ModelUnavailable",
    "NothingToResume",
    "OutputValidationError",
    "RawModelEvent",
    "ReentrantTurn",
    "RemoteAgent",
    "RemoteAgentError",
    "RemoteProgress",
    "ResponseStream",
    "RetryPolicy",
    "RunError",
    "RunResult",
    "SQLThreadStore",
    "SQLiteThreadStore",
    "StoreError",
    "StreamEvent",
    "TextDelta",
    "ThreadManager",
    "ThreadStore",
    "ToolCalled",
    "ToolOutput",
    "TurnLockLost",
    "TurnLockingStore",
    "file_part",
    "function_tool",
    "image_part",
    "model_input",
]
