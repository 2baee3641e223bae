"""agency_swarm: teams of openai-agents agents that message each other through a chart."""

from agents import ModelSettings, function_tool

from ._agency import Agency
from ._agent import Agent
from ._errors import (
    AgencySwarmError,
    ChartError,
    ConfigError,
    MaxStepsExceeded,
    ModelError,
    OutputValidationError,
    RunError,
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
from ._results import ResponseStream, RunResult
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
    "MaxStepsExceeded",
    "MessageSent",
    "ModelError",
    "ModelSettings",
    "OutputValidationError",
    "RawModelEvent",
    "ResponseStream",
    "RunError",
    "RunResult",
    "StreamEvent",
    "TextDelta",
    "ThreadManager",
    "ToolCalled",
    "ToolOutput",
    "function_tool",
]
