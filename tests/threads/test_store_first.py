"""Store first, then memory: an append the store refuses leaves the process's threads as the store has them, and a
tool output too large for the store reaches the model (and the store) as an error output instead."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import Agency, Agent, ConversationThread, FileThreadStore, function_tool
from agency_swarm._base._errors import ItemTooLarge, StoreError
from agency_swarm._threads._store import MemoryThreadStore, Threads
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from agency_swarm.testing import ScriptedModel, ToolCall

TOO_LARGE = re.compile(r"Error: output too large: (\d+) bytes, limit 2000")


def non_empty(threads: Threads) -> Threads:
    return {key: items for key, items in threads.items() if items}


@function_tool
def big() -> str:
    """Returns a lot."""
    return "x" * 5000


@function_tool
def small() -> str:
    """Returns a little."""
    return "a little"


async def test_a_message_the_store_refuses_is_not_kept_in_memory(tmp_path: Path) -> None:
    store = FileThreadStore(tmp_path / "threads", max_item_bytes=300)
    model = ScriptedModel(["hello"])
    async with Agency(Agent(name="CEO", model=model), thread_store=store) as agency:
        with pytest.raises(ItemTooLarge):
            await agency.get_response("y" * 1000, chat_id="c")
        assert non_empty(agency.thread_manager.get_threads("c")) == await store.load("c") == {}
        result = await agency.get_response("hi", chat_id="c")
    assert result.final_output == "hello"
    assert model.calls[0].input == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_tool_output_too_large_for_the_store_reaches_the_model_as_an_error(
    tmp_path: Path, streaming: bool
) -> None:
    model = ScriptedModel([ToolCall("big"), "done"])
    store = FileThreadStore(tmp_path / "threads", max_item_bytes=2000)
    async with Agency(Agent(name="CEO", model=model, tools=[big]), thread_store=store) as agency:
        if streaming:
            stream = agency.get_response_stream("go", chat_id="c")
            events = [event async for event in stream]
            final = stream.result.final_output
            [shown] = [event.output for event in events if event.type == "tool_output"]
            assert TOO_LARGE.fullmatch(shown)
        else:
            final = (await agency.get_response("go", chat_id="c")).final_output
        in_memory = agency.thread_manager.get_threads("c")
        assert in_memory == await store.load("c")
    assert final == "done"
    [seen] = model.calls[1].tool_outputs
    match = TOO_LARGE.fullmatch(seen)
    assert match is not None
    assert int(match.group(1)) > 5000  # the size the store measured: the whole JSON line

    restarted = FileThreadStore(tmp_path / "threads", max_item_bytes=2000)
    assert await restarted.load("c") == in_memory  # nothing "interrupted" after a restart
    assert INTERRUPTED_OUTPUT not in str(in_memory)
    await restarted.aclose()


async def test_only_the_output_that_is_too_large_is_replaced(tmp_path: Path) -> None:
    model = ScriptedModel([[ToolCall("small"), ToolCall("big"), ToolCall("small")], "done"])
    store = FileThreadStore(tmp_path / "threads", max_item_bytes=2000)
    async with Agency(Agent(name="CEO", model=model, tools=[big, small]), thread_store=store) as agency:
        await agency.get_response("go", chat_id="c")
        assert agency.thread_manager.get_threads("c") == await store.load("c")
    first, second, third = model.calls[1].tool_outputs
    assert (first, third) == ("a little", "a little")
    assert TOO_LARGE.fullmatch(second)


class RefusesOutputs(MemoryThreadStore):
    """Takes no function_call_output at all while `refusing`, not even the short error output."""

    refusing = True

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        for index, item in enumerate(items):
            if self.refusing and item.get("type") == "function_call_output":
                raise ItemTooLarge("no outputs here", index=index, size=len(str(item)), limit=10)
        await super().append(chat_id, thread_key, items)


async def test_an_error_output_that_is_still_too_large_fails_the_turn_and_keeps_memory_as_the_store() -> None:
    store = RefusesOutputs()
    model = ScriptedModel([ToolCall("big"), "fine"])
    agency = Agency(Agent(name="CEO", model=model, tools=[big]), thread_store=store)
    with pytest.raises(ItemTooLarge, match="no outputs here"):
        await agency.get_response("go", chat_id="c")
    assert non_empty(agency.thread_manager.get_threads("c")) == await store.load("c")
    assert [item.get("type") for item in (await store.load("c"))["user->CEO"]] == [None, "function_call"]

    store.refusing = False  # the next turn gives the call its "interrupted" output first, as after a restart
    await agency.get_response("more", chat_id="c")
    sent = model.calls[1].input
    assert [item.get("type") or item["content"] for item in sent] == ["go", "function_call", "function_call_output",
                                                                     "more"]
    assert sent[2]["output"] == INTERRUPTED_OUTPUT


class FailsOnOutputs(MemoryThreadStore):
    """Refuses the first append of a function_call_output (a store that is briefly unwritable)."""

    def __init__(self, *, stores_anyway: bool = False) -> None:
        super().__init__()
        self.failed = False
        self.stores_anyway = stores_anyway  # the write landed, but the answer was lost (a dropped connection)

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        if not self.failed and any(item.get("type") == "function_call_output" for item in items):
            self.failed = True
            if self.stores_anyway:
                await super().append(chat_id, thread_key, items)
            raise StoreError("the store is briefly unwritable")
        await super().append(chat_id, thread_key, items)


async def test_a_failed_output_append_leaves_memory_as_the_store_and_the_next_turn_repairs_the_call() -> None:
    store = FailsOnOutputs()
    model = ScriptedModel([ToolCall("small"), "again"])
    agency = Agency(Agent(name="CEO", model=model, tools=[small]), thread_store=store)
    with pytest.raises(StoreError, match="briefly unwritable"):
        await agency.get_response("go", chat_id="c")
    assert non_empty(agency.thread_manager.get_threads("c")) == await store.load("c")

    await agency.get_response("more", chat_id="c")
    sent = model.calls[1].input
    assert [item.get("type") or item["content"] for item in sent] == ["go", "function_call", "function_call_output",
                                                                     "more"]
    assert sent[2]["output"] == INTERRUPTED_OUTPUT  # as a restarted process would send it
    assert (await store.load("c"))["user->CEO"][:3] == sent[:3]


async def test_an_append_whose_outcome_is_unknown_makes_the_next_turn_read_the_store() -> None:
    store = FailsOnOutputs(stores_anyway=True)
    model = ScriptedModel([ToolCall("small"), "again"])
    agency = Agency(Agent(name="CEO", model=model, tools=[small]), thread_store=store)
    with pytest.raises(StoreError):
        await agency.get_response("go", chat_id="c")

    await agency.get_response("more", chat_id="c")
    sent = model.calls[1].input
    assert [item.get("type") or item["content"] for item in sent] == ["go", "function_call", "function_call_output",
                                                                     "more"]
    assert sent[2]["output"] == "a little"  # the store had it: what it holds is the truth


async def test_a_thread_adds_items_only_after_the_store_took_them() -> None:
    class Refuses(MemoryThreadStore):
        async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
            raise StoreError("no")

    seen: list[dict[str, Any]] = []
    thread = ConversationThread("c", "user", "CEO", store=Refuses(), listeners=[lambda _, item: seen.append(item)])
    with pytest.raises(StoreError):
        await thread.extend([{"role": "user", "content": "hi"}])
    assert thread.items == []
    assert seen == []


async def test_memory_stores_add_without_an_await() -> None:
    store = MemoryThreadStore()
    thread = ConversationThread("c", "user", "CEO", store=store)
    assert thread.add([{"role": "user", "content": "hi"}]) is None  # nothing to await: stored and added at once
    assert thread.items == [{"role": "user", "content": "hi"}]
    assert await store.load("c") == {"user->CEO": thread.items}
