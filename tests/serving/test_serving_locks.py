"""Turns serialized across processes: the PostgreSQL turn lock, and ThreadManager.hold (lock, then a fresh view)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from agency_swarm import Agency, Agent, MemoryThreadStore, SQLiteThreadStore, StoreError, ThreadManager, TurnLockLost
from agency_swarm._threads._pg_turn_locks import TurnLocks, turn_lock_key
from agency_swarm._threads._sql_store import SQLThreadStore
from agency_swarm._threads._store import TurnLockingStore
from agency_swarm.serving import _sse, create_app
from agency_swarm.testing import ScriptedModel
from postgres_support import require_postgres
from serving_app import build_agency, build_long_agency, ceo_answer, developer_script
from serving_support import (
    Blocking,
    StalledClient,
    assert_complete_turns,
    blocking_agency,
    chat_prefix,
    delete_chats,
    live,
    user_messages_in_order,
)

BOUND = 60  # seconds: a safety net for the awaits below, never a pause


@pytest.fixture(scope="module")
def postgres() -> str:
    return require_postgres()


@pytest.fixture
def prefix(postgres: str) -> Any:
    value = chat_prefix("locks")
    yield value
    delete_chats(value)


class Stores:
    """Store instances on the same database: each one stands for a worker process (its own sessions)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.opened: list[SQLThreadStore] = []

    def open(self) -> SQLThreadStore:
        store = SQLThreadStore(self.url)
        self.opened.append(store)
        return store


@pytest.fixture
async def stores(postgres: str) -> AsyncIterator[Stores]:
    opened = Stores(postgres)
    yield opened
    for store in opened.opened:
        await store.aclose()


class FailedTries:
    """Tells the test when a turn lock was tried and found busy (the waiter is then waiting for it)."""

    def __init__(self) -> None:
        self.count = 0
        self.event = asyncio.Event()


@pytest.fixture
def failed_tries(monkeypatch: pytest.MonkeyPatch) -> FailedTries:
    seen = FailedTries()
    query = TurnLocks._query

    async def observed(self: TurnLocks, sql: str, key: int, chat_id: str) -> tuple[Any, Any]:
        session, result = await query(self, sql, key, chat_id)
        if "take_fenced_turn" in sql and not result["taken"]:
            seen.count += 1
            seen.event.set()
        return session, result

    monkeypatch.setattr(TurnLocks, "_query", observed)
    return seen


@pytest.fixture
async def probe(postgres: str) -> AsyncIterator[asyncpg.Connection]:
    """A separate session that looks at the server's lock table."""
    conn = await asyncpg.connect(postgres)
    yield conn
    await conn.close()


async def holders(probe: asyncpg.Connection, chat_id: str) -> list[int]:
    """Backend pids that hold the chat's turn lock now."""
    rows = await probe.fetch(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
        "AND classid = (hashtext('agency_swarm_turn')::bigint & 4294967295)::oid "
        "AND objid = ($1::bigint & 4294967295)::oid",
        turn_lock_key(chat_id),
    )
    return [row["pid"] for row in rows]


async def test_the_lock_is_exclusive_across_store_instances_and_released_after(
    stores: Stores, probe: asyncpg.Connection, prefix: str, failed_tries: FailedTries
) -> None:
    first, second = stores.open(), stores.open()
    chat_id = f"{prefix}one"
    order: list[str] = []
    first_lock = first.turn_lock(chat_id)
    assert first_lock is not None
    await first_lock.__aenter__()
    assert len(await holders(probe, chat_id)) == 1

    async def second_turn() -> None:
        second_lock = second.turn_lock(chat_id)
        assert second_lock is not None
        async with second_lock:
            order.append("second in")

    waiting = asyncio.create_task(second_turn())
    async with asyncio.timeout(BOUND):
        await failed_tries.event.wait()  # the second instance tried, found it busy, and waits
    assert not waiting.done()
    order.append("first out")
    await first_lock.__aexit__(None, None, None)
    async with asyncio.timeout(BOUND):
        await waiting
    assert order == ["first out", "second in"]
    assert await holders(probe, chat_id) == []


async def test_other_chats_are_not_held_up(stores: Stores, prefix: str) -> None:
    store = stores.open()
    outer = store.turn_lock(f"{prefix}a")
    async with outer:
        async with asyncio.timeout(BOUND):  # would wait forever if the lock were not per chat
            async with store.turn_lock(f"{prefix}b"):
                pass


async def test_turns_of_one_process_queue_locally_as_session_locks_are_reentrant(stores: Stores, prefix: str) -> None:
    store = stores.open()
    chat_id = f"{prefix}local"
    inside = 0
    most = 0

    async def turn() -> None:
        nonlocal inside, most
        async with store.turn_lock(chat_id):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0)  # let the others run: they must still be outside
            inside -= 1

    await asyncio.gather(*(turn() for _ in range(10)))
    assert most == 1


async def test_a_dead_holder_frees_the_chat_for_the_others(
    stores: Stores, probe: asyncpg.Connection, prefix: str
) -> None:
    doomed, survivor = stores.open(), stores.open()
    chat_id = f"{prefix}dead"
    taken = asyncio.Event()

    async def doomed_turn() -> None:
        async with doomed.turn_lock(chat_id):
            taken.set()
            await asyncio.Event().wait()  # runs until something stops it

    turn = asyncio.create_task(doomed_turn())
    async with asyncio.timeout(BOUND):
        await taken.wait()
    (pid,) = await holders(probe, chat_id)
    assert await probe.fetchval("SELECT pg_terminate_backend($1)", pid)  # the worker's session dies
    with pytest.raises(TurnLockLost) as lost:  # the worker hears it: the turn stops (its release is a no-op)
        async with asyncio.timeout(BOUND):
            await turn
    assert lost.value.chat_id == chat_id
    async with asyncio.timeout(BOUND), survivor.turn_lock(chat_id):  # no NOTIFY came: the periodic try finds it
        assert len(await holders(probe, chat_id)) == 1
    async with asyncio.timeout(BOUND), doomed.turn_lock(chat_id):  # a new session is opened for the next turn
        pass


async def wait_behind(store: Any, chat_id: str, failed_tries: FailedTries) -> asyncio.Task[None]:
    """A task waiting for `chat_id`'s turn lock on `store` (another store holds it), once it has tried and failed."""

    async def wait_for_it() -> None:
        async with store.turn_lock(chat_id):
            pytest.fail("the chat was locked by another store")

    waiting = asyncio.create_task(wait_for_it())
    async with asyncio.timeout(BOUND):
        await failed_tries.event.wait()
    return waiting


async def test_a_cancelled_wait_leaves_nothing_locked(
    stores: Stores, probe: asyncpg.Connection, prefix: str, failed_tries: FailedTries
) -> None:
    first, second = stores.open(), stores.open()
    chat_id = f"{prefix}cancel"
    async with first.turn_lock(chat_id):
        waiting = await wait_behind(second, chat_id, failed_tries)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    assert await holders(probe, chat_id) == []
    async with asyncio.timeout(BOUND), second.turn_lock(chat_id):  # and the second store still works
        assert len(await holders(probe, chat_id)) == 1


async def test_a_turn_still_waiting_when_its_store_closes_fails_clearly(
    stores: Stores, prefix: str, failed_tries: FailedTries
) -> None:
    holder, closing = stores.open(), stores.open()
    chat_id = f"{prefix}closing"
    async with holder.turn_lock(chat_id):
        waiting = await wait_behind(closing, chat_id, failed_tries)
        await closing.aclose()
        with pytest.raises(StoreError, match="closed while a turn waited"):
            async with asyncio.timeout(BOUND):
                await waiting


async def test_one_session_holds_many_chats_at_once(stores: Stores, probe: asyncpg.Connection, prefix: str) -> None:
    store = stores.open()
    chats = [f"{prefix}many-{number}" for number in range(30)]
    locks = [store.turn_lock(chat_id) for chat_id in chats]
    for lock in locks:
        await lock.__aenter__()
    pids = {pid for chat_id in chats for pid in await holders(probe, chat_id)}
    assert len(pids) == 1  # thirty running turns, one connection
    for lock in locks:
        await lock.__aexit__(None, None, None)


async def test_store_errors_name_the_store_and_not_the_password() -> None:
    store = SQLThreadStore("postgresql://someone:hunter2@127.0.0.1:1/nowhere")
    lock = store.turn_lock("c")
    assert lock is not None
    with pytest.raises(StoreError, match=r"could not lock chat 'c' for a turn") as caught:
        await lock.__aenter__()
    assert "hunter2" not in str(caught.value)
    await store.aclose()


async def test_stores_other_processes_can_open_lock_turns(tmp_path: Path) -> None:
    sqlite = SQLiteThreadStore(tmp_path / "t.db")
    assert isinstance(sqlite, TurnLockingStore)
    assert sqlite.turn_lock("c") is not None  # a file lock: other processes may open the same file
    in_memory = SQLThreadStore("sqlite://")
    assert in_memory.turn_lock("c") is None  # nobody else can open it
    assert MemoryThreadStore().turn_lock("c") is not None  # two agencies may share one
    await sqlite.aclose()
    await in_memory.aclose()


async def test_without_a_turn_lock_hold_is_the_in_process_lock() -> None:
    for store in (None, SQLThreadStore("sqlite://")):
        manager = ThreadManager(store=store)
        assert manager.hold("c") is manager.lock("c")  # nothing added per turn
        await manager.aclose()


# -- ThreadManager.hold: agencies in "different processes" (stores) on one chat --------------------------------


async def test_each_turn_sees_what_other_processes_added(stores: Stores, prefix: str) -> None:
    workers = [build_agency(stores.open()) for _ in range(2)]
    chat_id = f"{prefix}fresh"
    messages = [f"message {number}" for number in range(6)]
    for number, message in enumerate(messages):  # alternate: each worker's cached copy is stale every time
        result = await workers[number % 2].get_response(message, chat_id=chat_id)
        assert_regex(ceo_answer(number + 1, message), result.final_output)
    assert_complete_turns(await stores.open().load(chat_id), messages)


async def test_concurrent_turns_on_one_chat_from_two_processes_never_interleave(stores: Stores, prefix: str) -> None:
    workers = [build_agency(stores.open()) for _ in range(3)]
    chat_id = f"{prefix}busy"
    messages = [f"message {number}" for number in range(18)]
    await asyncio.gather(
        *(workers[number % 3].get_response(message, chat_id=chat_id) for number, message in enumerate(messages))
    )
    threads = await stores.open().load(chat_id)
    order = user_messages_in_order(threads)
    assert sorted(order) == sorted(messages)
    assert_complete_turns(threads, order)


async def test_delete_waits_for_a_turn_running_elsewhere(
    stores: Stores, prefix: str, failed_tries: FailedTries
) -> None:
    store_a, store_b = stores.open(), stores.open()
    chat_id = f"{prefix}delete"
    agency = Agency(Agent(name="CEO", model=ScriptedModel(["kept?"])), thread_store=store_a)
    await agency.get_response("hello", chat_id=chat_id)
    elsewhere = store_b.turn_lock(chat_id)
    await elsewhere.__aenter__()  # another worker's turn is running
    deleting = asyncio.create_task(agency.thread_manager.delete_chat(chat_id))
    async with asyncio.timeout(BOUND):
        await failed_tries.event.wait()  # the delete waits for that turn
    await store_b.append(chat_id, "user->CEO", [{"role": "user", "content": "late"}])  # which still writes
    assert not deleting.done()
    await elsewhere.__aexit__(None, None, None)
    async with asyncio.timeout(BOUND):
        await deleting
    assert await store_b.load(chat_id) == {}  # the delete came after the other turn, so nothing is left


def assert_regex(pattern: str, text: str) -> None:
    assert re.fullmatch(pattern, text), text


# -- over HTTP: a lost lock ends a streamed turn with an `error` event ---------------------------------------------


def sse_data(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]


async def test_a_streamed_turn_whose_lock_session_dies_ends_with_an_error_event(
    postgres: str, probe: asyncpg.Connection, prefix: str
) -> None:
    """The lock is taken by the task running the turn, not the response's: the session's end stops the turn, whose
    failure is the stream's last event, and the body ends cleanly (before, the response was cut off mid-chunk)."""
    developer = Blocking(developer_script)
    app = create_app(blocking_agency(developer), store=SQLThreadStore(postgres))
    chat_id = f"{prefix}stream-lost"
    async with live(app) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as client:
        async with client.stream("POST", f"/chats/{chat_id}/messages:stream", json={"message": "hi"}) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            seen = []
            async with asyncio.timeout(BOUND):
                async for line in lines:  # up to the delegation: the Developer's model now waits
                    seen.append(line)
                    if line == "event: message_sent":
                        break
                await developer.reached.wait()
            (pid,) = await holders(probe, chat_id)
            assert await probe.fetchval("SELECT pg_terminate_backend($1)", pid)  # the worker's lock session dies
            async with asyncio.timeout(BOUND):
                rest = [line async for line in lines]  # read to the end: an unfinished chunked body raises here
        events = sse_data(seen + rest)
        assert developer.cancelled.is_set()  # the turn was stopped where it stood
        assert events[-1]["type"] == "error", events[-1]
        assert events[-1]["error"]["type"] == "store_unavailable"
        assert "lost the chat's turn lock" in events[-1]["error"]["message"]
        assert all(event["type"] != "done" for event in events)
        again = await client.post(f"/chats/{chat_id}/messages", json={"message": "again"})  # a new lock session
        assert again.status_code == 200, again.text
    await app.state.agency.aclose()


async def test_a_lock_lost_while_the_turn_waits_for_its_reader_still_stops_the_turn(
    postgres: str, probe: asyncpg.Connection, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store cancels the task running the turn; when that task is waiting for a slow reader rather than inside
    the turn, the cancellation is handed on to the turn: it stops with TurnLockLost, the stream's last event."""
    waiting, ended = asyncio.Event(), asyncio.Event()
    room, session_ended = _sse.Outbox.room, TurnLocks._session_ended

    async def observed_room(self: _sse.Outbox, size: int) -> None:
        waiting.set()
        await room(self, size)

    def observed_end(self: TurnLocks, session: Any) -> None:
        session_ended(self, session)
        ended.set()

    monkeypatch.setattr(_sse.Outbox, "room", observed_room)
    monkeypatch.setattr(TurnLocks, "_session_ended", observed_end)
    app = create_app(build_long_agency, store=SQLThreadStore(postgres), stream_write_timeout=BOUND)
    chat_id = f"{prefix}stalled-lost"
    client = StalledClient(app, chat_id, "long 1024 40")
    running = asyncio.create_task(client.run())
    async with asyncio.timeout(BOUND):
        await waiting.wait()  # the reader takes nothing: the turn waits for room in its buffer
        (pid,) = await holders(probe, chat_id)
        assert await probe.fetchval("SELECT pg_terminate_backend($1)", pid)
        await ended.wait()  # the store has cancelled the task that holds the lock: the pump, waiting
        client.reading.set()  # the reader reads again, to the end
        await running
        await app.state.streams.wait()
    events = client.events()
    assert events[-1]["type"] == "error", events[-1]
    assert "lost the chat's turn lock" in events[-1]["error"]["message"]
    assert all(event["type"] != "done" for event in events)
    await app.state.agency.aclose()
