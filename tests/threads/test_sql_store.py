"""SQLThreadStore / SQLiteThreadStore: the store contract on SQLite and PostgreSQL, files, URLs, errors, secrets."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import threading
import traceback
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agency_swarm._base._errors import ConfigError, ItemTooLarge, StoreError
from agency_swarm._threads._sql_store import SQLiteThreadStore, SQLThreadStore, redact_url
from agency_swarm._threads._store import ThreadStore
from postgres_support import require_postgres

RUN = uuid.uuid4().hex[:10]  # every chat id of this run starts with it: parallel runs share the table, not chats


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return require_postgres()


@dataclass
class Target:
    """One database under test: opens stores on it, hands out chat ids unique to this test, cleans up."""

    url: str
    prefix: str
    stores: list[SQLThreadStore] = field(default_factory=list)
    chats: set[str] = field(default_factory=set)

    def chat(self, name: str) -> str:
        chat_id = self.prefix + name
        self.chats.add(chat_id)
        return chat_id

    def open(self, **kwargs: Any) -> SQLThreadStore:
        store = SQLThreadStore(self.url, **kwargs)
        self.stores.append(store)
        return store

    async def own_chats(self, store: SQLThreadStore) -> list[str]:
        return [chat for chat in await store.list_chats() if chat.startswith(self.prefix)]


@pytest.fixture(params=["sqlite", "postgres"])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Target]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else f"sqlite:///{tmp_path}/t.db"
    db = Target(url, prefix=f"t{RUN}-{uuid.uuid4().hex[:8]}-")
    yield db
    for store in db.stores:
        await store.aclose()
    cleaner = SQLThreadStore(url)
    try:
        for chat_id in db.chats | set(await db.own_chats(cleaner)):
            await cleaner.delete(chat_id)
        assert await db.own_chats(cleaner) == []
    finally:
        await cleaner.aclose()


def items(*numbers: int, thread: str = "") -> list[dict[str, Any]]:
    return [{"type": "message", "role": "user", "content": f"{thread}#{n}", "n": n} for n in numbers]


# --- the contract, on both databases ------------------------------------------------------------------------------


async def test_round_trip_of_several_threads_and_chats(target: Target) -> None:
    store = target.open()
    assert isinstance(store, ThreadStore)
    alice, bob = target.chat("alice"), target.chat("bob")
    odd = {"type": "function_call_output", "output": "ünïcødé ✓ \u0000 \"q\" \\ \n", "nested": {"a": [1, 2.5, None]}}
    await store.append(alice, "user->CEO", items(0, 1, thread="uc"))
    await store.append(alice, "CEO->Developer", [odd])
    await store.append(bob, "user->CEO", items(7, thread="b"))
    await store.append(alice, "user->CEO", items(2, thread="uc"))
    await store.append(alice, "user->CEO", [])  # nothing to do

    assert await store.load(alice) == {"user->CEO": items(0, 1, 2, thread="uc"), "CEO->Developer": [odd]}
    assert await store.load(bob) == {"user->CEO": items(7, thread="b")}
    assert await store.load(target.chat("nobody")) == {}
    assert sorted(await target.own_chats(store)) == sorted([alice, bob])


async def test_order_is_kept_per_thread_across_many_appends(target: Target) -> None:
    store = target.open()
    chat = target.chat("long")
    keys = ["user->CEO", "CEO->Developer", "Developer->QA"]
    expected: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
    for n in range(150):
        key = keys[n % 3]
        batch = items(n, n + 1000, thread=key) if n % 10 == 0 else items(n, thread=key)
        await store.append(chat, key, batch)
        expected[key] += batch
    assert await store.load(chat) == expected


async def test_concurrent_appends_to_two_threads_of_one_chat_land_in_call_order(target: Target) -> None:
    store = target.open()
    chat = target.chat("busy")
    keys = ["user->CEO", "CEO->Developer"]
    await asyncio.gather(*(store.append(chat, keys[n % 2], items(n, thread=keys[n % 2])) for n in range(50)))
    assert await store.load(chat) == {
        "user->CEO": items(*range(0, 50, 2), thread="user->CEO"),
        "CEO->Developer": items(*range(1, 50, 2), thread="CEO->Developer"),
    }


async def test_concurrent_appends_to_twenty_chats_land_in_call_order(target: Target) -> None:
    store = target.open()
    chats = [target.chat(f"c{i}") for i in range(20)]
    await asyncio.gather(*(store.append(chat, "user->CEO", items(n, 100 + n)) for n in range(5) for chat in chats))
    loaded = await asyncio.gather(*(store.load(chat) for chat in chats))
    expected = [item for n in range(5) for item in items(n, 100 + n)]
    assert loaded == [{"user->CEO": expected}] * 20
    assert sorted(await target.own_chats(store)) == sorted(chats)


async def test_two_store_instances_appending_to_one_thread_lose_nothing(target: Target) -> None:
    first, second = target.open(), target.open()
    chat = target.chat("shared")
    await asyncio.gather(
        *(store.append(chat, "user->CEO", items(n, thread=name)) for n in range(20) for name, store in
          (("first", first), ("second", second)))
    )
    loaded = (await first.load(chat))["user->CEO"]
    assert len(loaded) == 40
    for name in ("first", "second"):  # each instance's own appends stay in its call order
        assert [item for item in loaded if item["content"].startswith(name)] == items(*range(20), thread=name)
    assert await second.load(chat) == {"user->CEO": loaded}


async def test_a_new_store_on_the_same_database_loads_everything(target: Target) -> None:
    before = target.open()
    one, two = target.chat("one"), target.chat("two")
    await before.append(one, "user->CEO", items(0, 1))
    await before.append(one, "CEO->Developer", items(2))
    await before.append(two, "user->CEO", items(3))
    await before.aclose()

    after = target.open()
    assert await after.load(one) == {"user->CEO": items(0, 1), "CEO->Developer": items(2)}
    assert await after.load(two) == {"user->CEO": items(3)}
    await after.append(one, "user->CEO", items(4))  # numbering continues where the old process stopped
    assert (await after.load(one))["user->CEO"] == items(0, 1, 4)
    assert sorted(await target.own_chats(after)) == sorted([one, two])


async def test_delete_and_list_chats(target: Target) -> None:
    store = target.open()
    assert await target.own_chats(store) == []
    keep, drop = target.chat("keep"), target.chat("drop")
    await store.append(keep, "user->CEO", items(0))
    await store.append(drop, "user->CEO", items(1))
    await store.append(drop, "CEO->Developer", items(2))
    assert sorted(await target.own_chats(store)) == sorted([keep, drop])

    await store.delete(drop)
    await store.delete(target.chat("never-existed"))
    assert await target.own_chats(store) == [keep]
    assert await store.load(drop) == {}
    assert await store.load(keep) == {"user->CEO": items(0)}
    await store.append(drop, "user->CEO", items(9))  # a deleted chat starts again from scratch
    assert await store.load(drop) == {"user->CEO": items(9)}


async def test_item_too_large_writes_nothing_of_that_append(target: Target) -> None:
    store = target.open(max_item_bytes=200)
    chat = target.chat("big")
    await store.append(chat, "user->CEO", items(0))
    big = {"type": "message", "content": "x" * 300}
    with pytest.raises(ItemTooLarge) as caught:
        await store.append(chat, "user->CEO", [*items(1, 2), big])
    message = str(caught.value)
    size = len(json.dumps(big, separators=(",", ":")))
    for part in (repr(chat), "'user->CEO'", f"{size} bytes", "max_item_bytes=200"):
        assert part in message
    assert isinstance(caught.value, StoreError)
    assert await store.load(chat) == {"user->CEO": items(0)}

    exactly = {"c": "y" * 192}  # {"c":"..."} is 200 bytes: the limit itself is allowed
    await store.append(chat, "user->CEO", [exactly])
    assert await store.load(chat) == {"user->CEO": [*items(0), exactly]}


async def test_unserializable_item_is_a_store_error_and_writes_nothing(target: Target) -> None:
    store = target.open()
    chat = target.chat("odd")
    with pytest.raises(StoreError, match="not JSON-serializable"):
        await store.append(chat, "user->CEO", [*items(0), {"when": object()}])
    assert await store.load(chat) == {}


async def test_aclose_is_idempotent_and_use_after_close_raises(target: Target) -> None:
    store = target.open()
    chat = target.chat("closing")
    await store.append(chat, "user->CEO", items(0))
    await store.aclose()
    await store.aclose()
    for call in (
        store.load(chat),
        store.append(chat, "user->CEO", items(1)),
        store.list_chats(),
        store.delete(chat),
    ):
        with pytest.raises(StoreError, match="closed"):
            await call
    never_used = target.open()
    await never_used.aclose()
    await never_used.aclose()


async def test_chat_ids_are_checked_on_every_method(target: Target) -> None:
    store = target.open()
    for bad in ("", "a\nb", "x" * 1000):
        with pytest.raises(ConfigError):
            await store.load(bad)
        with pytest.raises(ConfigError):
            await store.append(bad, "user->CEO", items(0))
        with pytest.raises(ConfigError):
            await store.delete(bad)
    with pytest.raises(ConfigError, match="thread_key"):
        await store.append(target.chat("ok"), "", items(0))
    with pytest.raises(ConfigError, match="dicts"):
        await store.append(target.chat("ok"), "user->CEO", ["not a dict"])  # type: ignore[list-item]
    assert await target.own_chats(store) == []


# --- SQLite ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def open_stores() -> Iterator[list[SQLThreadStore]]:
    stores: list[SQLThreadStore] = []
    yield stores
    assert all(store._closed for store in stores), "a test left a store open"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_sqlite_file_is_owner_only_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        store = SQLiteThreadStore(path)
        await store.append("c", "user->CEO", items(0))
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert (mode(path), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
        synchronous = await store._backend._run(  # type: ignore[attr-defined]
            lambda: store._backend._sync_connection().execute("PRAGMA synchronous").fetchone()[0]  # type: ignore[attr-defined]
        )
        assert synchronous == 1  # NORMAL
        await store.aclose()
    finally:
        os.umask(old_umask)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # WAL is a property of the file
        rows = conn.execute("SELECT chat_id, thread_key, seq FROM agency_swarm_items").fetchall()
        assert rows == [("c", "user->CEO", 0)]
    conn.close()


async def test_sqlite_runs_on_one_worker_thread_that_aclose_ends(tmp_path: Path) -> None:
    def workers() -> list[threading.Thread]:
        return [thread for thread in threading.enumerate() if thread.name.startswith("agency-swarm-sqlite")]

    before = len(workers())
    store = SQLiteThreadStore(tmp_path / "t.db")
    await asyncio.gather(*(store.append(f"c{n % 5}", "user->CEO", items(n)) for n in range(40)), store.list_chats())
    assert len(workers()) == before + 1
    await store.aclose()
    assert len(workers()) == before


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("sqlite:///rel/threads.db", "rel/threads.db"),
        ("sqlite:///threads.db", "threads.db"),
        ("sqlite:////ABS/abs.db", "abs.db"),
        ("sqlite+aiosqlite:////ABS/alias.db", "alias.db"),
        ("sqlite+aiosqlite:///rel/alias.db", "rel/alias.db"),
        ("SQLite:///upper.db", "upper.db"),
    ],
)
async def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, where: str) -> None:
    (tmp_path / "rel").mkdir()
    monkeypatch.chdir(tmp_path)
    store = SQLThreadStore(url.replace("/ABS", str(tmp_path)))
    monkeypatch.chdir("/")  # a relative path is resolved when the store is made, not when it is first used
    await store.append("c", "user->CEO", items(1))
    await store.aclose()
    assert (tmp_path / where).is_file()
    reopened = SQLiteThreadStore(tmp_path / where)
    assert await reopened.load("c") == {"user->CEO": items(1)}
    await reopened.aclose()


async def test_sqlite_shorthand_takes_any_file_name_and_memory_urls_work(tmp_path: Path) -> None:
    odd = tmp_path / "what?#.db"
    store = SQLiteThreadStore(str(odd))
    await store.append("c", "user->CEO", items(1))
    assert repr(store) == f"SQLiteThreadStore('sqlite:///{odd}')"
    await store.aclose()
    assert odd.is_file()
    for url in ("sqlite://", "sqlite:///:memory:"):
        memory = SQLThreadStore(url)
        await memory.append("c", "user->CEO", items(2))
        assert await memory.load("c") == {"user->CEO": items(2)}
        await memory.aclose()


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sqlite://somehost/threads.db", "names a host"),
        ("sqlite:///threads.db?mode=ro", "query parameters"),
        ("sqlite:///", "names no file"),
    ],
)
def test_bad_sqlite_urls_are_config_errors(url: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        SQLThreadStore(url)


async def test_sqlite_path_in_a_missing_directory_is_a_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "threads.db"
    for store in (SQLThreadStore(f"sqlite:///{path}"), SQLiteThreadStore(path)):
        with pytest.raises(StoreError) as caught:
            await store.append("c", "user->CEO", items(0))
        assert str(path) in str(caught.value)
        assert "could not append" in str(caught.value)
        with pytest.raises(StoreError, match="load chat 'c'"):  # still failing cleanly, not half-open
            await store.load("c")
        await store.aclose()
    assert not (tmp_path / "no").exists()


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


async def test_postgres_url_spellings_reach_the_same_table(postgres_url: str) -> None:
    chat = f"t{RUN}-spellings"
    rest = postgres_url.partition("://")[2]
    stores = [SQLThreadStore(f"{scheme}://{rest}") for scheme in ("postgresql", "postgresql+asyncpg", "postgres")]
    try:
        for n, store in enumerate(stores):
            await store.append(chat, "user->CEO", items(n))
        for store in stores:
            assert await store.load(chat) == {"user->CEO": items(0, 1, 2)}
    finally:
        await stores[0].delete(chat)
        for store in stores:
            await store.aclose()


async def test_postgres_opens_one_pool_per_event_loop_and_aclose_closes_all(postgres_url: str) -> None:
    store = SQLThreadStore(postgres_url)
    chat = f"t{RUN}-loops"
    other = asyncio.new_event_loop()
    runner = threading.Thread(target=other.run_forever)
    runner.start()
    try:
        in_other = asyncio.run_coroutine_threadsafe(store.append(chat, "user->CEO", items(0)), other)
        await asyncio.wrap_future(in_other)
        await store.append(chat, "user->CEO", items(1))  # this test's loop: a second pool, not the other's
        pools = dict(store._backend._pools)  # type: ignore[attr-defined]
        assert set(pools) == {other, asyncio.get_running_loop()}
        assert pools[other].result() is not pools[asyncio.get_running_loop()].result()
        assert await store.load(chat) == {"user->CEO": items(0, 1)}
        await store.delete(chat)
        await store.aclose()  # closes the other loop's pool on that loop
        assert all(task.result()._closed for task in pools.values())
    finally:
        other.call_soon_threadsafe(other.stop)
        runner.join()
        other.close()


# --- errors and secrets -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("mysql://u:secret@db.example/app", "mysql"), ("threads.db", "(none)"), ("http://host/x", "http")],
)
def test_unknown_scheme_is_a_config_error_naming_scheme_and_supported_ones(url: str, scheme: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SQLThreadStore(url)
    message = str(caught.value)
    for part in (repr(scheme), "sqlite://", "postgresql://", "postgres://"):
        assert part in message
    assert "secret" not in message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:secret@127.0.0.1:1/x",
        "postgresql+asyncpg://u:secret@127.0.0.1:1/x?sslmode=disable",
        "postgres://u@127.0.0.1:1/x?password=secret",
    ],
)
async def test_a_password_in_the_url_never_appears_in_errors(url: str) -> None:
    store = SQLThreadStore(url)
    assert "secret" not in repr(store)
    for call in (store.load("c"), store.append("c", "user->CEO", items(0)), store.list_chats(), store.delete("c")):
        with pytest.raises(StoreError) as caught:
            await call
        assert "127.0.0.1:1" in str(caught.value)
        assert "***" in str(caught.value)
        assert "secret" not in "".join(traceback.format_exception(caught.value))
    await store.aclose()


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u:p%40ss@h/db?sslmode=require&password=x", "postgresql://u:***@h/db?sslmode=require&password=***"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("sqlite:////tmp/a.db", "sqlite:////tmp/a.db"),
        ("postgresql://u:secret@[::1/db", "postgresql://***"),
    ],
)
def test_redact_url(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted
