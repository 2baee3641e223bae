"""A lost PostgreSQL lock session: the server is told to drop it soon, the worker stops the turns it held, and
the database refuses their writes once another worker took the chat (the fencing token).

tests/serving/test_partition.py does the same through a real network cut; these cut the session from the server side
(`pg_terminate_backend`), which needs no privileges.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from agency_swarm import Agency, Agent, ConfigError, SQLThreadStore, TurnLockLost, function_tool
from agency_swarm._threads._pg_turn_locks import TurnLocks, keepalive, turn_lock_key
from agency_swarm._threads._thread_items import unanswered_calls
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall
from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats

BOUND = 60  # seconds: a safety net for the awaits below, never a pause


@pytest.fixture(scope="module")
def postgres() -> str:
    return require_postgres()


@pytest.fixture
def prefix(postgres: str) -> Iterator[str]:
    value = chat_prefix("fence")
    yield value
    delete_chats(value)


@pytest.fixture
async def stores(postgres: str) -> AsyncIterator[list[SQLThreadStore]]:
    opened: list[SQLThreadStore] = []
    yield opened
    for store in opened:
        await store.aclose()


@pytest.fixture
async def probe(postgres: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(postgres)
    yield conn
    await conn.close()


async def lock_holder(probe: asyncpg.Connection, chat_id: str) -> int:
    """The backend pid holding the chat's turn lock."""
    rows = await probe.fetch(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
        "AND classid = (hashtext('agency_swarm_turn')::bigint & 4294967295)::oid "
        "AND objid = ($1::bigint & 4294967295)::oid",
        turn_lock_key(chat_id),
    )
    (row,) = rows
    return int(row["pid"])


def lock_session(store: SQLThreadStore) -> Any:
    """The store's turn lock session on this loop (private: what the settings went to)."""
    locks: TurnLocks = store._backend._turn_locks[asyncio.get_running_loop()]
    return locks._conn


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_the_bound_is_checked() -> None:
    for wrong in (0, 0.5, True, "10", 7200):
        with pytest.raises(ConfigError, match="lock_session_timeout"):
            SQLThreadStore("postgresql://nobody@127.0.0.1:1/none", lock_session_timeout=wrong)


@pytest.mark.parametrize("seconds", [1, 2, 4, 10, 60, 600])
def test_keepalive_gives_up_after_about_the_bound(seconds: float) -> None:
    idle, interval, count, user_timeout = keepalive(seconds)
    assert user_timeout == seconds * 1000
    assert 1 <= idle <= max(1, seconds / 2)
    assert seconds <= idle + interval * count <= seconds + interval  # probes cover the bound, the user timeout ends it


async def test_the_lock_session_asks_the_server_and_its_own_kernel_to_drop_it_when_silent(
    stores: list[SQLThreadStore], prefix: str
) -> None:
    store = SQLThreadStore(require_postgres(), lock_session_timeout=6)
    stores.append(store)
    async with store.turn_lock(f"{prefix}settings"):
        session = lock_session(store)
        shown = [await session.fetchval(f"SHOW {name}") for name in
                 ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout")]
        sock = session._transport.get_extra_info("socket")
        seen = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))
    assert shown == ["3", "1", "3", "6000"]  # the server ends it after 6 s of silence (ms)
    assert seen == (1, 3000)  # and this side after 3: the worker stops its turns before others may take over


async def test_without_a_bound_tcp_is_left_as_it_is(stores: list[SQLThreadStore], prefix: str) -> None:
    store = SQLThreadStore(require_postgres(), lock_session_timeout=None)
    stores.append(store)
    async with store.turn_lock(f"{prefix}unbounded"):
        assert await lock_session(store).fetchval("SHOW tcp_user_timeout") == "0"


async def test_writes_of_a_turn_whose_chat_was_taken_over_are_refused(
    stores: list[SQLThreadStore], probe: asyncpg.Connection, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TurnLocks, "_session_ended", lambda self, session: None)  # a worker that does not notice
    stale, fresh, unlocked = (SQLThreadStore(require_postgres()) for _ in range(3))
    stores.extend((stale, fresh, unlocked))
    chat_id, key = f"{prefix}taken", "user->Helper"
    async with stale.turn_lock(chat_id):
        await stale.append(chat_id, key, [message("before the cut")])
        assert await probe.fetchval("SELECT pg_terminate_backend($1)", await lock_holder(probe, chat_id))
        async with asyncio.timeout(BOUND), fresh.turn_lock(chat_id):
            await fresh.append(chat_id, key, [message("the new holder")])
            with pytest.raises(TurnLockLost, match="nothing of this append was stored") as refused:
                await stale.append(chat_id, key, [message("too late"), message("also too late")])
            assert refused.value.chat_id == chat_id
            with pytest.raises(TurnLockLost, match="not deleted"):
                await stale.delete(chat_id)
            await unlocked.append(chat_id, key, [message("outside any turn")])  # no token: not checked
            await fresh.append(chat_id, key, [message("the new holder again")])
    threads = await unlocked.load(chat_id)
    assert [item["content"] for item in threads[key]] == [
        "before the cut", "the new holder", "outside any turn", "the new holder again"
    ]
    async with asyncio.timeout(BOUND), stale.turn_lock(chat_id):
        await stale.append(chat_id, key, [message("a new turn of the old holder")])  # a new lock, a new token
    assert len((await unlocked.load(chat_id))[key]) == 5


async def test_a_delete_under_a_turn_lock_still_deletes(stores: list[SQLThreadStore], prefix: str) -> None:
    store = SQLThreadStore(require_postgres())
    stores.append(store)
    chat_id = f"{prefix}deleted"
    await store.append(chat_id, "user->Helper", [message("gone soon")])
    agency = Agency(Agent(name="Helper", model=ScriptedModel(["unused"])), thread_store=store)
    await agency.thread_manager.delete_chat(chat_id)  # holds the chat's turn lock: a fenced delete
    assert await store.load(chat_id) == {}
    assert (await store.version(chat_id)).cleared > 0


class Gate:
    """A tool that tells when it started and then waits until the test opens the gate (or it is cancelled)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.opened = asyncio.Event()
        self.cancelled = False

        @function_tool
        async def wait_for_go() -> str:
            """Waits for the go."""
            self.started.set()
            try:
                await self.opened.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return "go received"

        self.tool = wait_for_go


def worker_model(name: str) -> ScriptedModel:
    def reply(call: ModelCall) -> Step:
        if call.tool_outputs:
            return f"{name}: finished after {call.tool_outputs[-1]}"
        if call.last_user_message == "start":
            return ToolCall("wait_for_go")
        return f"{name}: saw {len(call.input)} items"

    return ScriptedModel(reply, name=name)


async def test_a_turn_whose_lock_session_ends_stops_and_another_worker_finishes_the_chat(
    stores: list[SQLThreadStore], probe: asyncpg.Connection, prefix: str
) -> None:
    a_store, b_store = SQLThreadStore(require_postgres()), SQLThreadStore(require_postgres())
    stores.extend((a_store, b_store))
    gate = Gate()
    a = Agency(Agent(name="Helper", model=worker_model("A"), tools=[gate.tool]), thread_store=a_store)
    b = Agency(Agent(name="Helper", model=worker_model("B"), tools=[Gate().tool]), thread_store=b_store)
    chat_id = f"{prefix}stopped"
    turn = asyncio.create_task(a.get_response("start", chat_id=chat_id))
    async with asyncio.timeout(BOUND):
        await gate.started.wait()
    assert await probe.fetchval("SELECT pg_terminate_backend($1)", await lock_holder(probe, chat_id))
    with pytest.raises(TurnLockLost) as lost:
        async with asyncio.timeout(BOUND):
            await turn
    assert lost.value.chat_id == chat_id
    assert gate.cancelled  # the tool did not run on unlocked

    async with asyncio.timeout(BOUND):
        result = await b.resume(chat_id)  # the call cut short has its "interrupted" output: B's model decides
    assert str(result.final_output).startswith("B: finished after")
    async with asyncio.timeout(BOUND):
        again = await a.get_response("after", chat_id=chat_id)  # A reads what B did, and goes on
    (items,) = (await b_store.load(chat_id)).values()
    assert again.final_output == f"A: saw {len(items) - 1} items"
    assert unanswered_calls(items) == []
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
    assert calls == outputs  # each call exactly one output
    assert not any("go received" in str(item) for item in items)


async def test_an_existing_chats_table_gains_the_token_column(postgres: str, prefix: str) -> None:
    schema = f"fence_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(postgres)
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        await admin.execute(  # the tables as the previous version left them
            f"CREATE TABLE {schema}.agency_swarm_items (chat_id TEXT NOT NULL, thread_key TEXT NOT NULL, "
            f"seq BIGINT NOT NULL, item TEXT NOT NULL, version BIGINT, PRIMARY KEY (chat_id, thread_key, seq)); "
            f"CREATE TABLE {schema}.agency_swarm_chats (chat_id TEXT PRIMARY KEY, version BIGINT NOT NULL, "
            f"cleared BIGINT NOT NULL); "
            f"INSERT INTO {schema}.agency_swarm_items VALUES ('{prefix}old', 'user->Helper', 0, "
            f"'{{\"role\":\"user\",\"content\":\"old\"}}', 1); "
            f"INSERT INTO {schema}.agency_swarm_chats VALUES ('{prefix}old', 1, 0)"
        )
        parts = urlsplit(postgres)
        url = urlunsplit(parts._replace(query=f"search_path={schema}"))
        store = SQLThreadStore(url)
        try:
            agency = Agency(Agent(name="Helper", model=worker_model("A")), thread_store=store)
            result = await agency.get_response("new", chat_id=f"{prefix}old")
            assert result.final_output == "A: saw 2 items"
        finally:
            await store.aclose()
        token = await admin.fetchval(
            f"SELECT lock_token FROM {schema}.agency_swarm_chats WHERE chat_id = $1", f"{prefix}old"
        )
        assert token != 0  # the turn drew one
    finally:
        await admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await admin.close()
