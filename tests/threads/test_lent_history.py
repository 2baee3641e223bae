"""The model's input is the thread's own list, lent without a copy: whoever keeps it never sees it change."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import AgentHooks, function_tool

from agency_swarm import Agency, Agent, MemoryThreadStore
from agency_swarm._threads._manager import ConversationThread
from agency_swarm.testing import ScriptedModel, ToolCall


@function_tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


SCRIPT = [ToolCall("lookup", {"key": "k"}), "done"]


class KeepingModel(ScriptedModel):
    """Keeps every input list it is handed, with a copy of what it held at the call."""

    def __init__(self) -> None:
        super().__init__(SCRIPT)
        self._per_turn = True
        self.kept: list[tuple[Any, Any]] = []
        self.ids: list[int] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.kept.append((input, copy.deepcopy(input)))
        return await super().get_response(system_instructions, input, *args, **kwargs)

    def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.kept.append((input, copy.deepcopy(input)))
        return super().stream_response(system_instructions, input, *args, **kwargs)


class IdModel(ScriptedModel):
    """Notes which list object it was handed, keeping nothing."""

    def __init__(self) -> None:
        super().__init__(SCRIPT)
        self._per_turn = True
        self.ids: list[int] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.ids.append(id(input))
        return await super().get_response(system_instructions, input, *args, **kwargs)


async def turns(agency: Agency, stream: bool, count: int = 3, ids: bool = False) -> None:
    for number in range(count):
        turn_id = f"turn-{number}" if ids else None  # each turn stores a mark the model must never see
        if stream:
            async for _ in agency.get_response_stream(f"question {number}", chat_id="c", turn_id=turn_id):
                pass
        else:
            await agency.get_response(f"question {number}", chat_id="c", turn_id=turn_id)


@pytest.mark.parametrize("ids", [False, True])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("store", [None, "memory"])
async def test_a_model_that_keeps_its_inputs_sees_each_as_it_was_at_its_call(
    stream: bool, store: str | None, ids: bool
) -> None:
    model = KeepingModel()
    agency = Agency(Agent(name="A", model=model, tools=[lookup]),
                    thread_store=MemoryThreadStore() if store else None)
    await turns(agency, stream, ids=ids)
    assert len(model.kept) == 6  # two calls a turn: the tool call, then the answer
    for kept, at_the_call in model.kept:
        assert kept == at_the_call
    assert [len(snapshot) for _, snapshot in model.kept] == [1, 3, 5, 7, 9, 11]
    assert not any(item.get("type") == "agency_swarm.turn_started" for _, snapshot in model.kept for item in snapshot)
    assert len(agency.thread_manager.get_threads("c", include_marks=True)["user->A"]) == (15 if ids else 12)


async def test_a_hook_that_keeps_the_history_sees_it_as_it_was_at_the_call() -> None:
    kept: list[tuple[Any, Any]] = []

    class Keeping(AgentHooks[Any]):
        async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
            kept.append((input_items, copy.deepcopy(input_items)))

    agency = Agency(Agent(name="A", model=ScriptedModel.each_turn(SCRIPT), tools=[lookup], hooks=Keeping()))
    await turns(agency, stream=False)
    assert [len(snapshot) for _, snapshot in kept] == [1, 3, 5, 7, 9, 11]
    assert all(held == at_the_call for held, at_the_call in kept)


@pytest.mark.parametrize("ids", [False, True])
async def test_a_model_that_keeps_nothing_is_lent_the_same_list_every_call(ids: bool) -> None:
    """No copy per call, with bookkeeping marks too: the cost of a call does not grow with the chat
    (benchmarks/long_chat.py)."""
    model = IdModel()
    agency = Agency(Agent(name="A", model=model, tools=[lookup]), thread_store=MemoryThreadStore())
    await turns(agency, stream=False, ids=ids)
    assert len(model.ids) == 6
    assert len(set(model.ids)) == 1
    thread = agency.thread_manager.get_threads("c")["user->A"]
    assert [item.get("role") for item in thread if "role" in item].count("user") == 3


def test_a_marked_threads_model_view_follows_appends_and_in_place_changes() -> None:
    mark = {"type": "agency_swarm.turn_started", "turn_id": "t"}
    thread = ConversationThread("c", "user", "A", items=[mark, {"role": "user", "content": "one"}])
    kept = thread.model_view()  # a model keeps what it was handed
    assert kept == [{"role": "user", "content": "one"}]
    thread.add([{"role": "assistant", "content": "two"}, dict(mark)])
    assert kept == [{"role": "user", "content": "one"}]  # copied before it grew: the holder's list stays
    assert [item["content"] for item in thread.model_view()] == ["one", "two"]  # the mark left out
    thread.add([{"role": "user", "content": "three"}])
    assert [item["content"] for item in thread.model_view()] == ["one", "two", "three"]
    thread.writable()[1] = {"role": "user", "content": "changed"}  # an in-place change (a repair, a reload)
    assert [item["content"] for item in thread.model_view()] == ["changed", "two", "three"]
    assert len(thread.items) == 5
