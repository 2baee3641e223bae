"""agency_swarm: teams of openai-agents agents that message each other through a chart."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents import ModelSettings, function_tool

    from ._agency._agency import Agency
    from ._attachments._media import AttachmentLimits
    from ._attachments._parts import file_part, image_part
    from ._base._errors import (
        AgencySwarmError,
        AttachmentError,
        ChartError,
        ChatNotLoaded,
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
        TurnCancelled,
        TurnLockLost,
        TurnNotRunning,
        UnknownTurn,
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
        TurnCancelledEvent,
    )
    from ._model._cost import CostEstimate, ModelPrice
    from ._model._prices import model_price, set_model_price
    from ._model._retry import RetryPolicy
    from ._remote._agent import RemoteAgent
    from ._threads._file_store import FileThreadStore
    from ._threads._manager import ConversationThread, ThreadManager
    from ._threads._sql_store import SQLiteThreadStore, SQLThreadStore
    from ._threads._store import MemoryThreadStore, ThreadStore, TurnLockingStore
    from ._threads._thread_items import model_input
    from ._turn._agent import Agent
    from ._turn._hooks import AgencyHooks
    from ._turn._results import Interruption, ResponseStream, RunResult

_LAZY = {
    "ModelSettings": "agents",
    "function_tool": "agents",
    "Agency": "._agency._agency",
    "AttachmentLimits": "._attachments._media",
    "file_part": "._attachments._parts",
    "image_part": "._attachments._parts",
    "AgencySwarmError": "._base._errors",
    "AttachmentError": "._base._errors",
    "ChartError": "._base._errors",
    "ChatNotLoaded": "._base._errors",
    "ChatPaused": "._base._errors",
    "ConfigError": "._base._errors",
    "ConfigFileError": "._base._errors",
    "InvalidChatId": "._base._errors",
    "ItemTooLarge": "._base._errors",
    "MaxStepsExceeded": "._base._errors",
    "ModelAuthenticationError": "._base._errors",
    "ModelError": "._base._errors",
    "ModelRequestError": "._base._errors",
    "ModelTimeout": "._base._errors",
    "ModelUnavailable": "._base._errors",
    "NothingToResume": "._base._errors",
    "OutputValidationError": "._base._errors",
    "ReentrantTurn": "._base._errors",
    "RemoteAgentError": "._base._errors",
    "RunError": "._base._errors",
    "StoreError": "._base._errors",
    "TurnCancelled": "._base._errors",
    "TurnLockLost": "._base._errors",
    "TurnNotRunning": "._base._errors",
    "UnknownTurn": "._base._errors",
    "AgentFinished": "._base._events",
    "AgentStarted": "._base._events",
    "ApprovalRequested": "._base._events",
    "Event": "._base._events",
    "HostedItem": "._base._events",
    "MessageSent": "._base._events",
    "RawModelEvent": "._base._events",
    "RemoteProgress": "._base._events",
    "StreamEvent": "._base._events",
    "TextDelta": "._base._events",
    "ToolCalled": "._base._events",
    "ToolOutput": "._base._events",
    "TurnCancelledEvent": "._base._events",
    "CostEstimate": "._model._cost",
    "ModelPrice": "._model._cost",
    "model_price": "._model._prices",
    "set_model_price": "._model._prices",
    "RetryPolicy": "._model._retry",
    "RemoteAgent": "._remote._agent",
    "FileThreadStore": "._threads._file_store",
    "ConversationThread": "._threads._manager",
    "ThreadManager": "._threads._manager",
    "SQLThreadStore": "._threads._sql_store",
    "SQLiteThreadStore": "._threads._sql_store",
    "MemoryThreadStore": "._threads._store",
    "ThreadStore": "._threads._store",
    "TurnLockingStore": "._threads._store",
    "model_input": "._threads._thread_items",
    "Agent": "._turn._agent",
    "AgencyHooks": "._turn._hooks",
    "Interruption": "._turn._results",
    "ResponseStream": "._turn._results",
    "RunResult": "._turn._results",
}
"""Every exported name, loaded on first use: `import agency_swarm` loads nothing (openai-agents included) until a
name is asked for, so the command line starts at once and a Ctrl-C while it loads is its own to report."""


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
    "ChatNotLoaded",
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
    "TurnCancelled",
    "TurnCancelledEvent",
    "TurnLockLost",
    "TurnLockingStore",
    "TurnNotRunning",
    "UnknownTurn",
    "file_part",
    "function_tool",
    "image_part",
    "model_input",
    "model_price",
    "set_model_price",
]
