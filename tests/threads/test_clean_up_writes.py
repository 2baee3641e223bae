"""Clean-up writes are shielded: a cancelled turn still stores an output for every call and saves the chat, under
anyio cancel scopes (which cancel again at every await, as FastAPI's and Jupyter's do) and through a second asyncio
cancellation; a store that hangs holds cancellation up for at most CLEAN_UP_SECONDS."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

import anyio
import pytest

from agency_swarm import Agency, Agent, function_tool
from agency_swarm._threads import _writes as threads_module
from agency_swarm._threads._store import MemoryThreadStore, Threads
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from agency_swarm.testing import ScriptedModel, ToolCall


class SlowStore(MemoryThreadStore):
    """Every append awaits a few times before it stores (a network round trip), and can be held at a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None  # set: appends of outputs wait for it
        self.waiting = asyncio.Event()  # an output append is at the gate

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        if self.gate is not None and any(item.get("type") == "function_call_output" for item in items):
            self.waiting.set()
            await self.gate.wait()
        await super().append(chat_id, thread_key, items)


def every_call_has_its_output(threads: Threads) -> None:
    for key, items in threads.items():
        calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
        outputs = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
        assert calls, f"{key}: the test meant to cut a call"
        assert calls == outputs, f"{key}: calls without outputs: {calls - outputs}"


def hanging_tools(count: int) -> tuple[list[Any], asyncio.Event]:
    """`count` tools that tell `started` once all of them run, then wait until cancelled."""
    running: list[int] = []
    started = asyncio.Event()

    def make(n: int) -> Any:
        async def hang() -> str:
            running.append(n)
            if len(running) == count:
                started.set()
            await asyncio.Event().wait()
            return "never"

        return function_tool(hang, name_override=f"slow{n}", description_override="Runs for a long time.")

    return [make(n) for n in range(count)], started


@pytest.mark.parametrize("parallel", [False, True])
async def test_an_anyio_cancel_scope_does_not_cut_the_interrupted_outputs(parallel: bool) -> None:
    tools, started = hanging_tools(2 if parallel else 1)
    store = SlowStore()
    model = ScriptedModel([[ToolCall(tool.name) for tool in tools]])
    agency = Agency(Agent(name="CEO", model=model, tools=tools), thread_store=store)

    async with anyio.create_task_group() as group:
        group.start_soon(partial(agency.get_response, "go", chat_id="c"))
        await started.wait()
        group.cancel_scope.cancel()  # cancels again at every await of the turn's clean-up

    stored = await store.load("c")
    every_call_has_its_output(stored)
    assert {item["output"] for item in stored["user->CEO"] if item.get("type") == "function_call_output"} == {
        INTERRUPTED_OUTPUT
    }


async def test_an_anyio_cancel_scope_does_not_cut_the_save_callback() -> None:
    [tool], started = hanging_tools(1)
    saved: list[Threads] = []

    async def save(chat_id: str, threads: Threads) -> None:
        for _ in range(3):
            await asyncio.sleep(0)  # a slow save (a file, a database)
        saved.append(threads)

    model = ScriptedModel([ToolCall(tool.name)])
    agency = Agency(Agent(name="CEO", model=model, tools=[tool]), save_threads_callback=save)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(agency.get_response, "go", chat_id="c"))
        await started.wait()
        group.cancel_scope.cancel()

    [snapshot] = saved
    every_call_has_its_output(snapshot)


async def test_a_second_cancellation_does_not_cut_the_interrupted_output() -> None:
    [tool], started = hanging_tools(1)
    store = SlowStore()
    store.gate = asyncio.Event()
    agency = Agency(Agent(name="CEO", model=ScriptedModel([ToolCall(tool.name)]), tools=[tool]), thread_store=store)
    turn = asyncio.ensure_future(agency.get_response("go", chat_id="c"))
    await started.wait()
    turn.cancel()  # Ctrl-C
    await store.waiting.wait()  # the clean-up is storing the interrupted output
    turn.cancel()  # Ctrl-C again, while the append waits at the gate
    store.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await turn
    every_call_has_its_output(await store.load("c"))


async def test_a_hung_store_holds_cancellation_up_for_the_bound_only(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(threads_module, "CLEAN_UP_SECONDS", 0.05)
    [tool], started = hanging_tools(1)
    store = SlowStore()
    store.gate = asyncio.Event()  # never set: the store hangs
    agency = Agency(Agent(name="CEO", model=ScriptedModel([ToolCall(tool.name)]), tools=[tool]), thread_store=store)
    with caplog.at_level(logging.ERROR, logger="agency_swarm._threads._manager"):
        async with anyio.create_task_group() as group:
            group.start_soon(partial(agency.get_response, "go", chat_id="c"))
            await started.wait()
            group.cancel_scope.cancel()
    assert "did not finish within 0.05 s" in caplog.text
    assert store.waiting.is_set()
    stored = await store.load("c")
    assert [item.get("type") for item in stored["user->CEO"]] == [None, "function_call"]  # cut, as bounded
