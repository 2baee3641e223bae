"""agency_swarm: teams of openai-agents agents that message each other through a chart."""

from agents import ModelSettings, function_tool

from ._agency import Agency
from ._agent import Agent
from ._errors import (
    AgencySwarmError,
    ChartError,
    ConfigError,
    InvalidChatId,
    ItemTooLarge,
    MaxStepsExceeded,
    ModelError,
    OutputValidationError,
    RunError,
    StoreError,
)
from ._events import (
    AgentFinished,
    AgentStarted,
    Event,
    MessageSent,
    RawModelEvent,
    StreamEvent,
    TextDelta,
    ToolCalled,
    ToolOutput,
)
from ._file_store import FileThreadStore
from ._results import ResponseStream, RunResult
from ._sql_store import SQLiteThreadStore, SQLThreadStore
from ._store import MemoryThreadStore, ThreadStore
from ._threads import ConversationThread, ThreadManager

__all__ = [
    "Agency",
    "AgencySwarmError",
    "Agent",
    "AgentFinished",
    "AgentStarted",
    "ChartError",
    "ConfigError",
    "ConversationThread",
    "Event",
    "FileThreadStore",
    "InvalidChatId",
    "ItemTooLarge",
    "MaxStepsExceeded",
    "MemoryThreadStore",
    "MessageSent",
    "ModelError",
    "ModelSettings",
    "OutputValidationError",
    "RawModelEvent",
    "ResponseStream",
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
    "function_tool",
]
