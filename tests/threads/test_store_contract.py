"""One contract, every thread store: the same tests run against each implementation."""

from __future__ import annotations

import asyncio
import importlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agents import function_tool

from agency_swarm import Agency, Agent, InvalidChatId
from agency_swarm._threads._store import CallbackThreadStore, MemoryThreadStore, ThreadStore
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

POSTGRES_URL = os.environ.get("AGENCY_SWARM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Backend:
    """Opens stores on one backing medium: each `open()` is a new store instance on the same data (a restart)."""

    open: Callable[[], Awaitable[ThreadStore]]
    can_delete: bool = True


def _memory(_: Path) -> Backend:
    shared = MemoryThreadStore()

    async def open_store() -> ThreadStore:
        return shared

    return Backend(open_store)


def _callbacks(_: Path) -> Backend:
    saved: dict[str, dict[str, list[dict[str, Any]]]] = {}

    class Flushing(CallbackThreadStore):
        async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
            await super().append(chat_id, thread_key, items)
            await self.end_turn(chat_id)  # the adapter saves per turn; the contract reads after every append

    async def open_store() -> ThreadStore:
        return Flushing(lambda chat: saved.get(chat, {}), lambda chat, threads: saved.__setitem__(chat, threads))

    return Backend(open_store, can_delete=False)  # callbacks have no way to delete what the user saved


def _file(tmp_path: Path) -> Backend:
    module = importlib.import_module("agency_swarm._threads._file_store")

    async def open_store() -> ThreadStore:
        store: ThreadStore = module.FileThreadStore(tmp_path / "threads")
        return store

    return Backend(open_store)


def _sqlite(tmp_path: Path) -> Backend:
    module = importlib.import_module("agency_swarm._threads._sql_store")

    async def open_store() -> ThreadStore:
        store: ThreadStore = module.SQLThreadStore(f"sqlite:///{tmp_path / 'threads.db'}")
        return store

    return Backend(open_store)


def _postgres(_: Path) -> Backend:
    module = importlib.import_module("agency_swarm._threads._sql_store")

    async def open_store() -> ThreadStore:
        store: ThreadStore = module.SQLThreadStore(POSTGRES_URL)
        return store

    return Backend(open_store)


BACKENDS: dict[str, Callable[[Path], Backend]] = {
    "memory": _memory,
    "callbacks": _callbacks,
    "file": _file,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


def _available(name: str) -> bool:
    module = {"file": "agency_swarm._threads._file_store", "sqlite": "agency_swarm._threads._sql_store",
              "postgres": "agency_swarm._threads._sql_store"}.get(name)
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


async def _postgres_reachable() -> bool:
    import asyncpg  # type: ignore[import-untyped]

    try:
        connection = await asyncpg.connect(POSTGRES_URL, timeout=3)
    except (OSError, asyncpg.PostgresError):
        return False
    await connection.close()
    return True


_CREATED: list[str] = []


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    if not _available(name):
        pytest.skip(f"the {name} store is not built yet")
    if name == "postgres" and not await _postgres_reachable():
        how = "start one: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {POSTGRES_URL} is unreachable in CI; {how}")
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable; {how}")
    opened = BACKENDS[name](tmp_path)
    yield opened
    if _CREATED and opened.can_delete:  # the postgres database outlives the test: leave it as it was
        store = await opened.open()
        for chat_id in _CREATED:
            await store.delete(chat_id)
        await store.aclose()
    _CREATED.clear()


def chat() -> str:
    chat_id = f"contract-{uuid.uuid4().hex[:12]}"
    _CREATED.append(chat_id)
    return chat_id


def item(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n}"}


async def test_an_unknown_chat_loads_empty(backend: Backend) -> None:
    store = await backend.open()
    assert await store.load(chat()) == {}
    await store.aclose()


async def test_appends_load_back_in_order_per_thread(backend: Backend) -> None:
    store, chat_id = await backend.open(), chat()
    await store.append(chat_id, "user->CEO", [item(1), item(2)])
    await store.append(chat_id, "CEO->Developer", [item(3)])
    await store.append(chat_id, "user->CEO", [item(4)])
    assert await store.load(chat_id) == {"user->CEO": [item(1), item(2), item(4)], "CEO->Developer": [item(3)]}
    await store.aclose()


async def test_a_new_store_on_the_same_data_sees_everything(backend: Backend) -> None:
    store, chat_id = await backend.open(), chat()
    await store.append(chat_id, "user->CEO", [item(1)])
    await store.aclose()
    reopened = await backend.open()
    assert await reopened.load(chat_id) == {"user->CEO": [item(1)]}
    await reopened.aclose()


async def test_concurrent_appends_to_two_threads_and_many_chats_all_land_in_order(backend: Backend) -> None:
    store = await backend.open()
    chats = [chat() for _ in range(10)]

    async def write(chat_id: str, key: str) -> None:
        for n in range(20):
            await store.append(chat_id, key, [{"role": "user", "content": key, "n": n}])

    await asyncio.gather(*(write(c, key) for c in chats for key in ("user->CEO", "CEO->Developer")))
    for chat_id in chats:
        loaded = await store.load(chat_id)
        for key in ("user->CEO", "CEO->Developer"):
            assert loaded[key] == [{"role": "user", "content": key, "n": n} for n in range(20)]
    await store.aclose()


async def test_list_chats_and_delete(backend: Backend) -> None:
    if not backend.can_delete:
        pytest.skip("load/save callbacks cannot list or delete what the user stored")
    store, first, second = await backend.open(), chat(), chat()
    await store.append(first, "user->CEO", [item(1)])
    await store.append(second, "user->CEO", [item(2)])
    assert {first, second} <= set(await store.list_chats())
    await store.delete(first)
    await store.delete(chat())  # unknown: fine
    assert first not in await store.list_chats()
    assert await store.load(first) == {}
    assert await store.load(second) == {"user->CEO": [item(2)]}
    await store.aclose()


async def test_non_ascii_and_nested_items_round_trip(backend: Backend) -> None:
    store, chat_id = await backend.open(), chat()
    text = {"type": "output_text", "text": "héllo ✓ \n \"quoted\"", "annotations": []}
    nested = {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [text], "n": 1.5}
    await store.append(chat_id, "user->CEO", [nested])
    assert await store.load(chat_id) == {"user->CEO": [nested]}
    await store.aclose()


async def test_an_agency_on_the_store_persists_every_item_as_it_happens_and_restarts(backend: Backend) -> None:
    store, chat_id = await backend.open(), chat()
    seen_mid_turn: list[dict[str, list[dict[str, Any]]]] = []

    @function_tool
    async def peek() -> str:
        """Reads the store in the middle of the turn."""
        seen_mid_turn.append(await store.load(chat_id))
        return "peeked"

    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "shipped"]))
    dev = Agent(name="Developer", tools=[peek], model=ScriptedModel([ToolCall("peek"), "built"]))
    await Agency([ceo, [ceo, dev]], thread_store=store).get_response("go", chat_id=chat_id)

    during = seen_mid_turn[0]  # the CEO's call and the Developer's call were stored before the tool ran
    assert [i.get("type") for i in during["user->CEO"]] == [None, "function_call"]
    assert [i.get("type") for i in during["CEO->Developer"]] == [None, "function_call"]

    await store.aclose()  # the process ends (a file store's directory takes one store at a time)
    reopened = await backend.open()
    ceo2 = Agent(name="CEO", model=ScriptedModel(["again"]))
    dev2 = Agent(name="Developer", model=ScriptedModel([]))
    result = await Agency([ceo2, [ceo2, dev2]], thread_store=reopened).get_response("more", chat_id=chat_id)
    assert result.final_output == "again"
    seen = ceo2.model.calls[0].input  # type: ignore[union-attr]
    assert seen[0] == {"role": "user", "content": "go"}
    assert seen[-1] == {"role": "user", "content": "more"}
    assert len(seen) == 5  # go, call, output, shipped, more
    await reopened.aclose()


async def test_a_crash_mid_tool_is_repaired_on_load_and_the_repair_is_stored(backend: Backend) -> None:
    store, chat_id = await backend.open(), chat()
    call = {"type": "function_call", "call_id": "c1", "name": "slow", "arguments": "{}"}
    await store.append(chat_id, "user->CEO", [{"role": "user", "content": "go"}, call])

    model = ScriptedModel(["recovered"])
    await Agency(Agent(name="CEO", model=model), thread_store=store).get_response("again", chat_id=chat_id)
    sent = model.calls[0].input
    assert sent[1] == call
    assert sent[2]["type"] == "function_call_output"
    assert sent[2]["call_id"] == "c1"
    assert "interrupted" in sent[2]["output"]
    stored = (await store.load(chat_id))["user->CEO"]
    assert stored[2] == sent[2]
    await store.aclose()


async def test_bad_chat_ids_are_refused_through_the_agency(backend: Backend) -> None:
    store = await backend.open()
    agency = Agency(Agent(name="CEO", model=ScriptedModel([])), thread_store=store)
    for bad in ["", "../etc", "a/b", "a\\b", "..", "nul\x00", "x" * 201, "é" * 128]:
        with pytest.raises(InvalidChatId):
            await agency.get_response("hi", chat_id=bad)
    await agency.aclose()
