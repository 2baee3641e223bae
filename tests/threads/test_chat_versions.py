"""Chat versions: each store numbers a chat's items, so a process holding a chat reads only what others added.

Every store that several agencies (or processes) can share: memory, SQLite, PostgreSQL. Two agencies on one store
stand for two processes; each keeps what it read in memory, so a stale copy would show in what its model sees.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agency_swarm import Agency, Agent, MemoryThreadStore, SQLiteThreadStore, SQLThreadStore, ThreadStore
from agency_swarm._threads._store import ChatVersion
from agency_swarm.testing import ModelCall, ScriptedModel
from postgres_support import require_postgres


def user_messages(call: ModelCall) -> list[str]:
    return [item["content"] for item in call.input if item.get("role") == "user"]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], ThreadStore]]:
    opened: list[ThreadStore] = []
    memory = MemoryThreadStore()

    def make() -> ThreadStore:
        if request.param == "memory":
            return memory  # shared by both agencies, as a database is
        store = SQLThreadStore(f"sqlite:///{tmp_path / 'v.db'}" if request.param == "sqlite" else require_postgres())
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


async def test_two_agencies_on_one_store_see_each_others_turns(open_store: Callable[[], ThreadStore]) -> None:
    models = [ScriptedModel(lambda call: "ok") for _ in range(2)]
    agencies = [Agency(Agent(name="Helper", model=model), thread_store=open_store()) for model in models]
    chat = f"v-{uuid.uuid4().hex[:12]}"
    for turn, who in enumerate([0, 1, 1, 0, 1, 0, 0]):
        await agencies[who].get_response(f"m{turn}", chat_id=chat)
        assert user_messages(models[who].calls[-1]) == [f"m{number}" for number in range(turn + 1)]
    await agencies[1].thread_manager.delete_chat(chat)
    await agencies[0].get_response("after", chat_id=chat)
    assert user_messages(models[0].calls[-1]) == ["after"]  # agency 0 held the chat: the delete makes it read anew


async def test_versions_count_items_and_a_delete_clears(open_store: Callable[[], ThreadStore]) -> None:
    store = open_store()
    chat = f"v-{uuid.uuid4().hex[:12]}"
    version = getattr(store, "_version", None) or getattr(store, "version", None)
    assert version is not None

    async def now() -> ChatVersion:
        found = version(chat)
        return found if isinstance(found, ChatVersion) else await found

    assert await now() == ChatVersion(0, 0)
    await store.append(chat, "user->A", [{"role": "user", "content": "1"}, {"role": "user", "content": "2"}])
    await store.append(chat, "A->B", [{"role": "user", "content": "3"}])
    assert await now() == ChatVersion(3, 0)
    after = await store.load_after(chat, 1)  # type: ignore[attr-defined]
    assert after == {"user->A": [{"role": "user", "content": "2"}], "A->B": [{"role": "user", "content": "3"}]}
    assert await store.load_after(chat, 3) == {}  # type: ignore[attr-defined]
    await store.delete(chat)
    assert await now() == ChatVersion(4, 4)
    assert ChatVersion(4, 4).changes_after(3) == "all"
    await store.append(chat, "user->A", [{"role": "user", "content": "new"}])
    assert await store.load_after(chat, 4) == {"user->A": [{"role": "user", "content": "new"}]}  # type: ignore[attr-defined]
    assert await store.load(chat) == {"user->A": [{"role": "user", "content": "new"}]}


def test_what_a_holder_must_read() -> None:
    version = ChatVersion(version=10, cleared=4)
    assert version.changes_after(10) == "none"
    assert version.changes_after(6) == "since"
    assert version.changes_after(4) == "since"
    assert version.changes_after(3) == "all"  # it held items the delete removed
    assert version.changes_after(None) == "all"
    assert version.changes_after(11) == "all"  # cannot happen with one store; never trusted


async def test_a_file_from_before_versions_keeps_its_order(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the schema and numbering of earlier releases: seq counted per thread
        conn.execute(
            "CREATE TABLE agency_swarm_items (chat_id TEXT NOT NULL, thread_key TEXT NOT NULL, seq INTEGER NOT NULL, "
            "item TEXT NOT NULL, PRIMARY KEY (chat_id, thread_key, seq))"
        )
        rows = [("c", "user->Helper", 0, '{"role": "user", "content": "old 0"}'),
                ("c", "user->Helper", 1, '{"role": "user", "content": "old 1"}'),
                ("c", "Helper->Dev", 0, '{"role": "user", "content": "side"}')]
        conn.executemany("INSERT INTO agency_swarm_items VALUES (?, ?, ?, ?)", rows)
    conn.close()
    model = ScriptedModel(lambda call: "ok")
    async with Agency(Agent(name="Helper", model=model), thread_store=SQLiteThreadStore(path)) as agency:
        await agency.get_response("new", chat_id="c")
        await agency.get_response("newer", chat_id="c")
    assert user_messages(model.calls[-1]) == ["old 0", "old 1", "new", "newer"]
    store = SQLiteThreadStore(path)
    loaded = await store.load("c")
    await store.aclose()
    kinds = [item.get("content") if item.get("role") == "user" else item["role"] for item in loaded["user->Helper"]]
    assert kinds == ["old 0", "old 1", "new", "assistant", "newer", "assistant"]
    assert loaded["Helper->Dev"] == [{"role": "user", "content": "side"}]
