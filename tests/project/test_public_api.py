"""The public surface: exported names, the exception tree, and what errors carry."""

from __future__ import annotations

import importlib

import pytest

import agency_swarm
import agency_swarm.testing
from agency_swarm import (
    Agency,
    AgencySwarmError,
    Agent,
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
from agency_swarm.testing import ScriptedModel, ToolCall

EXPECTED_ALL = [
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

EXPECTED_TESTING_ALL = [
    "Fail",
    "ModelCall",
    "ScriptExhausted",
    "ScriptedModel",
    "Step",
    "Text",
    "ToolCall",
    "send_message",
]

EXCEPTIONS = [
    AgencySwarmError, AttachmentError, ChartError, ChatNotLoaded, ChatPaused, ConfigError, ConfigFileError,
    InvalidChatId, ItemTooLarge, MaxStepsExceeded, ModelAuthenticationError, ModelError, ModelRequestError,
    ModelTimeout, ModelUnavailable, NothingToResume, OutputValidationError, ReentrantTurn, RunError, StoreError,
    TurnLockLost, RemoteAgentError, TurnCancelled, TurnNotRunning, UnknownTurn,
]


@pytest.mark.parametrize(
    ("module_name", "expected"),
    [("agency_swarm", EXPECTED_ALL), ("agency_swarm.testing", EXPECTED_TESTING_ALL)],
)
def test_all_is_pinned_sorted_and_importable(module_name: str, expected: list[str]) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == expected
    assert module.__all__ == sorted(module.__all__)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from agency_swarm import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == EXPECTED_ALL


def test_every_exported_exception_is_an_agency_swarm_error() -> None:
    exported = [
        obj
        for name in agency_swarm.__all__
        if isinstance(obj := getattr(agency_swarm, name), type) and issubclass(obj, BaseException)
    ]
    assert set(exported) == set(EXCEPTIONS)
    for cls in exported:
        assert issubclass(cls, AgencySwarmError), cls


def test_exception_hierarchy() -> None:
    assert issubclass(ConfigError, ValueError)
    assert issubclass(ChartError, ConfigError)
    assert issubclass(ChartError, ValueError)
    assert issubclass(ChatPaused, ConfigError)
    assert issubclass(NothingToResume, ConfigError)
    assert issubclass(ReentrantTurn, ConfigError)
    assert issubclass(AttachmentError, ConfigError)
    for cls in (MaxStepsExceeded, ModelError, OutputValidationError, RemoteAgentError):
        assert issubclass(cls, RunError)
    for cls in (ModelAuthenticationError, ModelRequestError, ModelUnavailable):
        assert issubclass(cls, ModelError)
    assert issubclass(ModelTimeout, ModelUnavailable)
    assert not issubclass(RunError, ConfigError)
    assert issubclass(TurnLockLost, StoreError)
    assert issubclass(ChatNotLoaded, LookupError)
    assert not issubclass(ChatNotLoaded, ConfigError)  # nothing is wrong with the set-up: the chat is elsewhere


def test_run_error_carries_where_it_happened() -> None:
    error = ModelError("stream died", agent="CEO", chat_id="c1", depth=2)
    assert (error.agent, error.chat_id, error.depth) == ("CEO", "c1", 2)
    assert str(error) == "stream died"


def test_max_steps_exceeded_carries_agent_chat_depth_and_max_steps() -> None:
    error = MaxStepsExceeded(agent="CEO", chat_id="c1", depth=0, max_steps=3)
    assert (error.agent, error.chat_id, error.depth, error.max_steps) == ("CEO", "c1", 0, 3)
    assert "CEO" in str(error)
    assert "max_steps=3" in str(error)


async def test_max_steps_exceeded_raised_by_a_run() -> None:
    looping = ScriptedModel(lambda call: ToolCall("nope"))
    ceo = Agent(name="CEO", model=looping, max_steps=2)
    with pytest.raises(MaxStepsExceeded) as caught:
        await Agency(ceo).get_response("go", chat_id="loop")
    assert (caught.value.agent, caught.value.chat_id, caught.value.depth, caught.value.max_steps) == (
        "CEO",
        "loop",
        0,
        2,
    )
    assert len(looping.calls) == 2


def test_testing_helpers_are_the_documented_ones() -> None:
    assert issubclass(agency_swarm.testing.ScriptExhausted, AssertionError)
    call = agency_swarm.testing.send_message("Developer", "build", None)
    assert call == ToolCall(
        "send_message", {"recipient_agent": "Developer", "message": "build", "additional_instructions": None}
    )


def test_stores_and_cost_types_load_on_first_use() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agency_swarm\n"
        "heavy = ('sqlite3', 'aiofiles', 'agency_swarm._threads._sql_store', 'agency_swarm._threads._file_store',\n"
        "         'agency_swarm._model._cost')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
        "from agency_swarm import FileThreadStore, ModelPrice, SQLThreadStore\n"
        "print(FileThreadStore.__module__, ModelPrice.__module__, SQLThreadStore.__module__)\n"
        "print('FileThreadStore' in dir(agency_swarm))\n"
    )
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert lines[0] == "[]"  # `import agency_swarm` stays cheap
    assert lines[1] == "agency_swarm._threads._file_store agency_swarm._model._cost agency_swarm._threads._sql_store"
    assert lines[2] == "True"
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        agency_swarm.Nope  # noqa: B018
