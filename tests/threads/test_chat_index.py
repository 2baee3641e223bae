"""The chat index (owner, title, last activity of each chat) on every built-in store: memory, file, SQLite and
PostgreSQL — claims, deletes, each owner's list page by page, restarts, and two workers claiming one chat."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agency_swarm import FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm._threads._chat_index import MAX_TITLE_CHARS, ChatIndex, title_of
from agency_swarm._threads._chat_indexes import chat_index_for
from agency_swarm._threads._file_chat_index import LOG_NAME
from postgres_support import require_postgres

Opener = Callable[[], Awaitable[ThreadStore]]
STORES = ["memory", "file", "sqlite", "postgres"]


def opener(kind: str, tmp_path: Path) -> Opener:
    """Opens a store on the kind's medium; each call stands for a restart (memory: the same instance)."""
    shared = MemoryThreadStore()

    async def open_store() -> ThreadStore:
        if kind == "memory":
            return shared
        if kind == "file":
            return FileThreadStore(tmp_path / "threads")
        if kind == "sqlite":
            return SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
        return SQLThreadStore(require_postgres())

    return open_store


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(kind: str, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    opened = await opener(kind, tmp_path)()
    yield opened
    await opened.aclose()


def index_of(store: ThreadStore) -> ChatIndex:
    index = chat_index_for(store)
    assert index is not None
    assert chat_index_for(store) is index  # one per store instance
    return index


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"  # PostgreSQL is shared by every run: owners and chats of our own


async def test_a_chat_belongs_to_its_first_claimant_for_good(store: ThreadStore) -> None:
    index, chat, alice, bob = index_of(store), unique("chat"), unique("alice"), unique("bob")
    assert await index.chat_owner(chat) is None
    assert await index.claim_chat(chat, alice, "first words", 1_000)
    assert not await index.claim_chat(chat, bob, "mine now", 2_000)
    assert await index.chat_owner(chat) == alice
    assert await index.claim_chat(chat, alice, "second words", 3_000)  # the owner's next message: activity only
    [entry] = await index.owned_chats(alice, None, 10)
    assert (entry.chat_id, entry.title, entry.created_us, entry.active_us) == (chat, "first words", 1_000, 3_000)
    assert await index.owned_chats(bob, None, 10) == []
    await index.forget_chat(chat)
    assert await index.owned_chats(alice, None, 10) == []
    assert await index.chat_owner(chat) == alice  # deleted, still alice's: nobody else may take the id
    assert not await index.claim_chat(chat, bob, "now?", 4_000)
    assert await index.claim_chat(chat, alice, "a new start", 5_000)
    [again] = await index.owned_chats(alice, None, 10)
    assert (again.title, again.created_us, again.active_us) == ("a new start", 5_000, 5_000)


async def test_a_chat_without_a_title_takes_the_next_one_and_activity_never_goes_back(store: ThreadStore) -> None:
    index, chat, owner = index_of(store), unique("chat"), unique("owner")
    assert await index.claim_chat(chat, owner, None, 5_000)
    assert await index.claim_chat(chat, owner, "later", 4_000)  # a clock behind another worker's
    [entry] = await index.owned_chats(owner, None, 10)
    assert (entry.title, entry.active_us) == ("later", 5_000)


async def test_stored_says_whether_the_store_holds_the_chat(store: ThreadStore) -> None:
    index, chat = index_of(store), unique("chat")
    assert not await index.chat_stored(chat)
    await store.append(chat, "user->A", [{"role": "user", "content": "hi"}])
    assert await index.chat_stored(chat)
    await store.delete(chat)
    assert not await index.chat_stored(chat)


async def test_the_index_survives_a_restart(kind: str, tmp_path: Path) -> None:
    open_store = opener(kind, tmp_path)
    chat, owner = unique("chat"), unique("owner")
    first = await open_store()
    assert await index_of(first).claim_chat(chat, owner, "kept", 7)
    await index_of(first).forget_chat(unique("unknown"))  # nothing to forget: no error
    await first.aclose()
    second = await open_store()
    try:
        assert await index_of(second).chat_owner(chat) == owner
        assert [entry.title for entry in await index_of(second).owned_chats(owner, None, 5)] == ["kept"]
    finally:
        await second.aclose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_two_workers_claiming_one_chat_at_once_give_it_one_owner(kind: str, tmp_path: Path) -> None:
    open_store = opener(kind, tmp_path)
    workers = [await open_store() for _ in range(2)]  # two store instances: two workers' connections
    try:
        for _ in range(10):
            chat = unique("race")
            claimants = [unique("p") for _ in range(6)]
            won = await asyncio.gather(*(
                index_of(workers[number % 2]).claim_chat(chat, name, None, 1) for number, name in enumerate(claimants)
            ))
            assert won.count(True) == 1
            assert await index_of(workers[1]).chat_owner(chat) == claimants[won.index(True)]
    finally:
        for worker in workers:
            await worker.aclose()


def test_a_title_is_the_first_message_collapsed_and_cut() -> None:
    assert title_of("  Plan the\n\n launch   please ") == "Plan the launch please"
    assert title_of("   ") is None
    assert title_of(42) is None
    long = title_of("word " * 100)
    assert long is not None
    assert len(long) == MAX_TITLE_CHARS
    assert long.endswith("…")


def test_a_torn_last_line_of_the_file_index_is_cut_and_the_rest_kept(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = FileThreadStore(tmp_path / "threads")
        assert await index_of(store).claim_chat("kept", "alice", "t", 1)
        await store.aclose()
        log = tmp_path / "threads" / LOG_NAME
        log.write_bytes(log.read_bytes() + b'{"c":"torn","o":"bob"')  # a crash in the middle of a write
        again = FileThreadStore(tmp_path / "threads")
        assert await index_of(again).chat_owner("kept") == "alice"
        assert await index_of(again).chat_owner("torn") is None
        assert await index_of(again).claim_chat("next", "alice", None, 2)
        await again.aclose()
        assert (tmp_path / "threads" / LOG_NAME).read_bytes().count(b"\n") == 2  # whole lines only

    asyncio.run(scenario())


Claim = tuple[int, int, int]  # (chat number, owner number, time)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    claims=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 2), st.integers(0, 6)), max_size=30),
    deletes=st.sets(st.integers(0, 11), max_size=4),
    page=st.integers(1, 5),
)
def test_each_owner_lists_its_chats_newest_first_page_by_page(
    kind: str, tmp_path: Path, claims: list[Claim], deletes: set[int], page: int
) -> None:
    run = uuid.uuid4().hex[:10]
    directory = tmp_path / run
    os.makedirs(directory)
    expected: dict[int, tuple[int, int]] = {}  # chat -> (owner, activity), as the contract says
    for chat, owner, at in claims:
        if chat not in expected:
            expected[chat] = (owner, at)
        elif expected[chat][0] == owner:
            expected[chat] = (owner, max(expected[chat][1], at))

    async def scenario() -> None:
        store = await opener(kind, directory)()
        index = index_of(store)
        try:
            for chat, owner, at in claims:
                await index.claim_chat(f"{run}-{chat:02d}", f"{run}-o{owner}", None, at)
            for chat in deletes:
                await index.forget_chat(f"{run}-{chat:02d}")
            for owner in range(3):
                want = sorted(
                    ((at, f"{run}-{chat:02d}") for chat, (who, at) in expected.items()
                     if who == owner and chat not in deletes),
                    reverse=True,
                )
                got: list[tuple[int, str]] = []
                after = None
                while True:
                    entries = await index.owned_chats(f"{run}-o{owner}", after, page)
                    got += [entry.position for entry in entries]
                    if len(entries) < page:
                        break
                    after = entries[-1].position
                assert got == want
        finally:
            await store.aclose()

    asyncio.run(scenario())
