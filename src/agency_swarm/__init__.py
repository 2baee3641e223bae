"""agency_swarm: teams of openai-agents agents that message each other through a chart."""

from agents import ModelSettings, function_tool

from ._agency import Agency
from ._agent import Agent
from ._cost import CostEstimate, ModelPrice
from ._errors import (
    AgencySwarmError,
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
    RunError,
    StoreError,
)
from ._events import (
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    Event,
    MessageSent,
    RawModelEvent,
    StreamEvent,
    TextDelta,
    ToolCalled,
    ToolOutput,
)
from ._file_store import FileThreadStore
from ._hooks import AgencyHooks
from ._results import Interruption, ResponseStream, RunResult
from ._retry import RetryPolicy
from ._sql_store import SQLiteThreadStore, SQLThreadStore
from ._store import MemoryThreadStore, ThreadStore, TurnLockingStore
from ._threads import ConversationThread, ThreadManager

__all__ = [
    "Agency",
    "AgencyHooks",
    "AgencySwarmError",
    "Agent",
    "AgentFinished",
    "AgentStarted",
    "ApprovalRequested",
    "ChartError",
    "ChatPaused",
    "ConfigError",
    "ConfigFileError",
    "ConversationThread",
    "CostEstimate",
    "Event",
    "FileThreadStore",
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
    "TurnLockingStore",
    "function_tool",
]
