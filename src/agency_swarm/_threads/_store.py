"""The ThreadStore protocol, the in-memory store, and the adapter that turns load/save callbacks into a store."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .._base._errors import ConfigError

Item: TypeAlias = dict[str, Any]
Threads: TypeAlias = dict[str, list[Item]]
"""{thread key like "user->CEO": items in order}."""

DEFAULT_MAX_ITEM_BYTES = 10 * 1024 * 1024


@runtime_checkable
class ThreadStore(Protocol):
    """Where threads live between processes. Every method is async; one store serves many chats at once.

    Contract (tests/threads/test_store_contract.py runs it against every store):
    - `append` keeps the order of items within a thread key; items of different threads of one chat may be
      appended concurrently.
    - `load` returns what was appended, per thread key in order; `{}` for an unknown chat.
    - `delete` forgets a chat; `list_chats` lists the chats that have items.
    - Failures raise `StoreError` (or `ItemTooLarge`); what was stored before stays readable.

    The ThreadManager checks loaded items once per load and leaves out those the model API would refuse; a store
    that does so itself (FileThreadStore quarantines them) says `checks_items = True`.
    """

    async def load(self, chat_id: str) -> Threads: ...

    async def append(self, chat_id: str, thread_key: str, items: list[Item]) -> None: ...

    async def list_chats(self) -> list[str]: ...

    async def delete(self, chat_id: str) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class ChatVersion:
    """Where a chat stands in its store: `version` of its newest item (0: none yet), `cleared` at its last delete.

    A process that holds the chat as of version `k` is current when `k == version`, misses only the items after
    `k` when `cleared <= k < version`, and must read the whole chat again when `k < cleared`.
    """

    version: int = 0
    cleared: int = 0

    def changes_after(self, known: int | None) -> str:
        """"none", "since" (read the items after `known`) or "all" (read the whole chat)."""
        if known is None or known < self.cleared or known > self.version:
            return "all"
        return "none" if known == self.version else "since"


@runtime_checkable
class TurnLockingStore(Protocol):
    """Optional ThreadStore capability, for a store that several processes share (PostgreSQL behind many workers).

    `turn_lock(chat_id)` gives an async context manager that the ThreadManager holds for a whole top-level turn,
    after its in-process lock, so that turns of one chat never interleave across processes. `None` means this
    store instance needs no lock across processes (an in-memory database): the in-process lock alone applies.

    What the context manager yields says what the manager must read inside it, since another process may have
    added to the chat since this one last looked: `None` → the whole chat, every turn. A `ChatVersion` read after
    the lock was taken → only what changed (`load_after(chat_id, known)`, which a store yielding versions must
    have); when the lock is released the store sets that same object to the version the turn left behind.
    """

    def turn_lock(self, chat_id: str) -> AbstractAsyncContextManager[ChatVersion | None] | None: ...


class _MemoryChat:
    """One chat's items in the order they were stored, and the version before the first of them."""

    __slots__ = ("base", "log")

    def __init__(self, base: int) -> None:
        self.base = base
        self.log: list[tuple[str, Item]] = []


class MemoryThreadStore:
    """Keeps threads in this process only; two agencies given the same instance share chats.

    Like the SQL stores it locks turns and numbers each chat's items, so an agency reads what another one added
    to a chat since it last held it (and nothing more). Attachment bytes are kept once per store, by digest.
    """

    stores_attachments = True

    def __init__(self) -> None:
        self._chats: dict[str, Threads] = {}
        self._logs: dict[str, _MemoryChat] = {}
        self._turns: dict[str, asyncio.Lock] = {}
        self._blobs: dict[str, bytes] = {}
        self._blob_chats: dict[str, set[str]] = {}  # chat -> digests it holds
        self._blob_holders: dict[str, int] = {}  # digest -> how many chats hold it

    async def put_attachments(self, chat_id: str, blobs: Mapping[str, bytes]) -> None:
        held = self._blob_chats.setdefault(chat_id, set())
        for digest, data in blobs.items():
            if digest not in held:
                held.add(digest)
                self._blob_holders[digest] = self._blob_holders.get(digest, 0) + 1
                self._blobs.setdefault(digest, bytes(data))

    async def load_attachments(self, chat_id: str, digests: Collection[str]) -> dict[str, bytes]:
        held = self._blob_chats.get(chat_id, set())
        return {digest: self._blobs[digest] for digest in digests if digest in held and digest in self._blobs}

    async def load(self, chat_id: str) -> Threads:
        return {key: list(items) for key, items in self._chats.get(chat_id, {}).items()}

    async def load_after(self, chat_id: str, version: int) -> Threads:
        chat = self._logs.get(chat_id)
        threads: Threads = {}
        if chat is not None:
            for key, item in chat.log[max(0, version - chat.base):]:
                threads.setdefault(key, []).append(item)
        return threads

    async def append(self, chat_id: str, thread_key: str, items: list[Item]) -> None:
        self.append_now(chat_id, thread_key, items)

    def append_now(self, chat_id: str, thread_key: str, items: list[Item]) -> None:
        """`append` without the await: it never waits, so threads on this store call it directly (see
        `immediate_append`)."""
        self._chats.setdefault(chat_id, {}).setdefault(thread_key, []).extend(items)
        chat = self._logs.get(chat_id)
        if chat is None:
            chat = self._logs[chat_id] = _MemoryChat(0)
        chat.log.extend((thread_key, item) for item in items)

    def _version(self, chat_id: str) -> ChatVersion:
        chat = self._logs.get(chat_id)
        return ChatVersion() if chat is None else ChatVersion(chat.base + len(chat.log), chat.base)

    def turn_lock(self, chat_id: str) -> AbstractAsyncContextManager[ChatVersion | None] | None:
        """Turns of one chat by agencies sharing this store run one at a time; yields the chat's version."""
        return self._turn(chat_id)

    @asynccontextmanager
    async def _turn(self, chat_id: str) -> AsyncIterator[ChatVersion]:
        lock = self._turns.get(chat_id)
        if lock is None:
            lock = self._turns[chat_id] = asyncio.Lock()
        try:
            async with lock:
                version = self._version(chat_id)
                yield version
                after = self._version(chat_id)
                version.version, version.cleared = after.version, after.cleared
        finally:
            if not lock.locked() and self._turns.get(chat_id) is lock and not getattr(lock, "_waiters", None):
                del self._turns[chat_id]  # idle: chats that are done leave no lock behind

    async def list_chats(self) -> list[str]:
        return [chat_id for chat_id, threads in self._chats.items() if threads]

    async def delete(self, chat_id: str) -> None:
        self._chats.pop(chat_id, None)
        for digest in self._blob_chats.pop(chat_id, ()):
            self._blob_holders[digest] -= 1
            if not self._blob_holders[digest]:
                del self._blob_holders[digest]
                self._blobs.pop(digest, None)
        old = self._version(chat_id)
        self._logs[chat_id] = _MemoryChat(old.version + 1)  # a delete is a change too: holders read anew

    async def aclose(self) -> None:
        return None


def immediate_append(store: ThreadStore | None) -> Callable[[str, str, list[Item]], None] | None:
    """The synchronous append of a store whose `append` is MemoryThreadStore's own (not overridden), else None.

    Threads call it instead of awaiting `append`: a memory store pays no await per item.
    """
    if isinstance(store, MemoryThreadStore) and type(store).append is MemoryThreadStore.append:
        return store.append_now
    return None


LoadThreadsCallback: TypeAlias = Callable[[str], "Awaitable[Threads | None] | Threads | None"]
SaveThreadsCallback: TypeAlias = Callable[[str, Threads], "Awaitable[None] | None"]


class CallbackThreadStore(MemoryThreadStore):
    """The foundation's `load_threads_callback` / `save_threads_callback` as a store.

    `load` asks the load callback; appends are kept in memory; at the end of every top-level turn
    (`end_turn`, called by the ThreadManager) the save callback gets the chat's whole snapshot. The callbacks see
    images and files inline in the items (this store keeps no bytes of its own).
    """

    stores_attachments = False

    def __init__(self, load: LoadThreadsCallback | None = None, save: SaveThreadsCallback | None = None) -> None:
        super().__init__()
        self._load = load
        self._save = save

    async def load(self, chat_id: str) -> Threads:
        loaded: Any = None
        if self._load is not None:
            loaded = self._load(chat_id)
            if inspect.isawaitable(loaded):
                loaded = await loaded
        threads = validated_threads(loaded, chat_id, source="load_threads_callback")
        self._chats[chat_id] = {key: list(items) for key, items in threads.items()}
        return threads

    def turn_lock(self, chat_id: str) -> None:
        """No versions: the callbacks see whole chats, and `load` replaces what this store holds."""
        return None

    async def end_turn(self, chat_id: str) -> None:
        if self._save is None:
            return
        result = self._save(chat_id, await MemoryThreadStore.load(self, chat_id))
        if inspect.isawaitable(result):
            await result


def validated_threads(loaded: object, chat_id: str, *, source: str) -> Threads:
    """Check the shape a store or a load callback returned; a clear ConfigError otherwise."""
    expected = "a dict {thread key like 'user->CEO': [item dicts]} ({} for a new chat)"
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{source} returned {type(loaded).__name__} for chat {chat_id!r}; expected {expected}.")
    for key, items in loaded.items():
        if not isinstance(key, str) or key.count("->") != 1 or key.startswith("->") or key.endswith("->"):
            raise ConfigError(f"{source} returned thread key {key!r} for chat {chat_id!r}; expected {expected}.")
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ConfigError(
                f"{source} returned thread {key!r} of chat {chat_id!r} that is not a list of dicts; "
                f"expected {expected}."
            )
    return loaded
