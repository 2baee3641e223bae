"""Reading a stored chat without running a turn: `await agency.get_threads(chat_id)`, and the in-memory accessor
`thread_manager.get_threads` saying when a chat is not loaded instead of looking empty."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import (
    Agency,
    Agent,
    ChatNotLoaded,
    ConfigError,
    FileThreadStore,
    MemoryThreadStore,
    ReentrantTurn,
    function_tool,
)
from agency_swarm.testing import ScriptedModel, ToolCall


def team(store: Any) -> tuple[Agency, ScriptedModel]:
    model = ScriptedModel.each_turn(["on it"])
    ceo = Agent(name="CEO", model=model)
    dev = Agent(name="Developer", model=ScriptedModel.each_turn(["built"]))
    return Agency([ceo, [ceo, dev]], thread_store=store), model

async def test_a_stored_chat_reads_without_a_turn_and_the_memory_accessor_says_it_is_not_loaded(
    tmp_path: Path,
) -> None:
    async with team(FileThreadStore(tmp_path))[0] as first:
        await first.get_response("build it", chat_id="c")
        stored = first.thread_manager.get_threads("c")  # loaded here: a turn ran
    async with team(FileThreadStore(tmp_path))[0] as restarted:  # a new process on the same files
        not_loaded = r"Chat 'c' is not loaded .* `await agency.get_threads\('c'\)`"
        with pytest.raises(ChatNotLoaded, match=not_loaded) as not_here:
            restarted.thread_manager.get_threads("c")  # was {}: it looked like data loss
        assert not isinstance(not_here.value, ConfigError)  # not "bad set-up, nothing ran": the chat is in the store
        assert not_here.value.chat_id == "c"
        with pytest.raises(ChatNotLoaded, match="'never-used'"):
            restarted.thread_manager.get_threads("never-used")
        threads = await restarted.get_threads("c")
        assert threads == stored
        assert list(threads) == ["user->CEO"]
        threads["user->CEO"][0]["content"] = "changed"  # copies: the chat is not changed
        threads["user->CEO"].clear()
        assert restarted.thread_manager.get_threads("c") == stored  # loaded now
        assert await restarted.get_threads("nothing-here") == {}  # a chat the store does not have
        assert restarted.thread_manager.get_threads("nothing-here") == {}


async def test_without_a_store_memory_is_the_chat_and_an_unknown_chat_is_empty() -> None:
    agency, _ = team(None)
    assert agency.thread_manager.get_threads("new") == {}
    assert await agency.get_threads("new") == {}
    result = await agency.get_response("hi")
    assert await agency.get_threads() == agency.thread_manager.get_threads(result.chat_id)


async def test_get_threads_waits_for_a_running_turn_and_never_returns_half_of_it() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Waits until the test lets it finish."""
        started.set()
        await release.wait()
        return "finished"

    ceo = Agent(name="CEO", tools=[slow], model=ScriptedModel([ToolCall("slow"), "all done"]))
    agency = Agency(ceo, thread_store=MemoryThreadStore())
    turn = asyncio.create_task(agency.get_response("go", chat_id="c"))
    await started.wait()
    reading = asyncio.create_task(agency.get_threads("c"))
    await asyncio.sleep(0.01)
    assert not reading.done()  # the turn holds the chat
    release.set()
    await turn
    threads = await reading
    assert [item.get("type") for item in threads["user->CEO"]][-1] == "message"  # the whole turn, its answer too


async def test_a_tool_reads_the_threads_of_the_chat_it_runs_in_without_waiting_for_itself() -> None:
    seen: list[dict[str, Any]] = []

    @function_tool
    async def peek() -> str:
        """Reads this chat's threads."""
        seen.append(await agency.get_threads("c"))
        return "peeked"

    ceo = Agent(name="CEO", tools=[peek], model=ScriptedModel([ToolCall("peek"), "done"]))
    agency = Agency(ceo, thread_store=MemoryThreadStore())
    await asyncio.wait_for(agency.get_response("go", chat_id="c"), 5)
    assert [item.get("type") for item in seen[0]["user->CEO"]] == [None, "function_call"]

    other = Agency(Agent(name="CEO", model=ScriptedModel(["x"])), thread_store=agency.thread_manager.store)

    @function_tool
    async def peek_other() -> str:
        """Reads this chat through another agency on the same store: it would wait for this very turn."""
        await other.get_threads("d")
        return "read"

    ceo.tools = [peek_other]
    ceo.model = ScriptedModel([ToolCall("peek_other"), "done"])
    await agency.get_response("go", chat_id="d")
    assert "ReentrantTurn" in agency.thread_manager.get_threads("d")["user->CEO"][2]["output"]
    assert issubclass(ReentrantTurn, ConfigError)


async def test_an_agency_sharing_a_store_reads_what_another_one_added() -> None:
    store = MemoryThreadStore()
    writer, _ = team(store)
    reader, _ = team(store)
    await writer.get_response("one", chat_id="c")
    assert [len(items) for items in (await reader.get_threads("c")).values()] == [2]
    await writer.get_response("two", chat_id="c")
    assert [len(items) for items in (await reader.get_threads("c")).values()] == [4]  # caught up, not stale
