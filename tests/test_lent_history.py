"""The model's input is the thread's own list, lent without a copy: whoever keeps it never sees it change."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import AgentHooks, function_tool

from agency_swarm import Agency, Agent, MemoryThreadStore
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


async def turns(agency: Agency, stream: bool, count: int = 3) -> None:
    for number in range(count):
        if stream:
            async for _ in agency.get_response_stream(f"question {number}", chat_id="c"):
                pass
        else:
            await agency.get_response(f"question {number}", chat_id="c")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("store", [None, "memory"])
async def test_a_model_that_keeps_its_inputs_sees_each_as_it_was_at_its_call(stream: bool, store: str | None) -> None:
    model = KeepingModel()
    agency = Agency(Agent(name="A", model=model, tools=[lookup]),
                    thread_store=MemoryThreadStore() if store else None)
    await turns(agency, stream)
    assert len(model.kept) == 6  # two calls a turn: the tool call, then the answer
    for kept, at_the_call in model.kept:
        assert kept == at_the_call
    assert [len(snapshot) for _, snapshot in model.kept] == [1, 3, 5, 7, 9, 11]
    assert len(agency.thread_manager.get_threads("c")["user->A"]) == 12


async def test_a_hook_that_keeps_the_history_sees_it_as_it_was_at_the_call() -> None:
    kept: list[tuple[Any, Any]] = []

    class Keeping(AgentHooks[Any]):
        async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
            kept.append((input_items, copy.deepcopy(input_items)))

    agency = Agency(Agent(name="A", model=ScriptedModel.each_turn(SCRIPT), tools=[lookup], hooks=Keeping()))
    await turns(agency, stream=False)
    assert [len(snapshot) for _, snapshot in kept] == [1, 3, 5, 7, 9, 11]
    assert all(held == at_the_call for held, at_the_call in kept)


async def test_a_model_that_keeps_nothing_is_lent_the_same_list_every_call() -> None:
    """No copy per call: the cost of a call no longer grows with the chat (benchmarks/long_chat.py)."""
    model = IdModel()
    agency = Agency(Agent(name="A", model=model, tools=[lookup]), thread_store=MemoryThreadStore())
    await turns(agency, stream=False)
    assert len(model.ids) == 6
    assert len(set(model.ids)) == 1
    thread = agency.thread_manager.get_threads("c")["user->A"]
    assert [item.get("role") for item in thread if "role" in item].count("user") == 3
