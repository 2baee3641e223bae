"""Per-chat, per-pair conversation threads, persisted item by item through a ThreadStore."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Protocol

from ._errors import ConfigError, InvalidChatId
from ._store import (
    CallbackThreadStore,
    Item,
    LoadThreadsCallback,
    SaveThreadsCallback,
    Threads,
    ThreadStore,
    validated_threads,
)

ThreadsSnapshot = Threads
MAX_CHAT_ID_CHARS = 200
MAX_CHAT_ID_BYTES = 255
INTERRUPTED_OUTPUT = "Error: this call was interrupted before it finished; its result is unknown."

__all__ = [
    "ConversationThread",
    "ItemListener",
    "LoadThreadsCallback",
    "SaveThreadsCallback",
    "ThreadManager",
    "check_chat_id",
    "interrupted_output",
    "repair",
]


class ItemListener(Protocol):
    """Told about every item the moment a thread gets it."""

    def __call__(self, thread: ConversationThread, item: Item) -> None: ...


def thread_key(sender: str, recipient: str) -> str:
    return f"{sender}->{recipient}"


def check_chat_id(chat_id: object) -> str:
    """Chat ids come from users and name files: only short, printable, path-free strings pass."""
    if not isinstance(chat_id, str):
        raise InvalidChatId(f"chat_id must be a str, got {type(chat_id).__name__}.")
    if not chat_id:
        raise InvalidChatId("chat_id is empty; leave it out to use the default chat, or pass a name.")
    if not chat_id.isprintable():  # first: lone surrogates are not printable and cannot be encoded
        raise InvalidChatId(f"chat_id {chat_id!r} contains control characters; use printable text only.")
    if len(chat_id) > MAX_CHAT_ID_CHARS or len(chat_id.encode("utf-8")) > MAX_CHAT_ID_BYTES:
        raise InvalidChatId(
            f"chat_id is too long ({len(chat_id)} characters); use at most {MAX_CHAT_ID_CHARS} characters "
            f"and {MAX_CHAT_ID_BYTES} UTF-8 bytes."
        )
    if "/" in chat_id or "\\" in chat_id or chat_id in (".", ".."):
        raise InvalidChatId(f"chat_id {chat_id!r} looks like a path; do not use '/', '\\\\', '.' or '..'.")
    return chat_id


class ConversationThread:
    """The items one recipient's model sees on one sender->recipient pair of one chat, in order."""

    __slots__ = ("_listeners", "_store", "chat_id", "items", "key", "recipient", "sender")

    def __init__(
        self,
        chat_id: str,
        sender: str,
        recipient: str,
        items: list[Item] | None = None,
        *,
        store: ThreadStore | None = None,
        listeners: list[ItemListener] | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.sender = sender
        self.recipient = recipient
        self.key = thread_key(sender, recipient)
        self.items: list[Item] = items if items is not None else []
        self._store = store
        self._listeners = listeners if listeners is not None else []  # shared with the manager

    async def append(self, item: Item) -> None:
        """Add one item and persist it before returning."""
        await self.extend([item])

    async def extend(self, items: list[Item]) -> None:
        """Add items in order; the store gets them in one append."""
        if not items:
            return
        self.items.extend(items)
        for item in items:
            for listener in self._listeners:
                listener(self, item)
        if self._store is not None:
            await self._store.append(self.chat_id, self.key, items)

    def __repr__(self) -> str:
        return f"ConversationThread({self.chat_id!r}, {self.key!r}, {len(self.items)} items)"


class ThreadManager:
    """One ConversationThread per (chat_id, sender, recipient), loaded once from the store and saved item by item."""

    def __init__(
        self,
        *,
        store: ThreadStore | None = None,
        load_threads_callback: LoadThreadsCallback | None = None,
        save_threads_callback: SaveThreadsCallback | None = None,
        max_chats_in_memory: int = 10_000,
    ) -> None:
        if isinstance(max_chats_in_memory, bool) or not isinstance(max_chats_in_memory, int) or max_chats_in_memory < 1:
            raise ConfigError(f"max_chats_in_memory must be an int >= 1, got {max_chats_in_memory!r}.")
        self.max_chats_in_memory = max_chats_in_memory
        """With a store, chats beyond this many leave memory (least recently used first) and reload when used."""
        for name, callback in (("load_threads_callback", load_threads_callback),
                               ("save_threads_callback", save_threads_callback)):
            if callback is not None and not callable(callback):
                raise ConfigError(f"{name} must be a function, got {type(callback).__name__}.")
        uses_callbacks = load_threads_callback is not None or save_threads_callback is not None
        if store is not None and uses_callbacks:
            raise ConfigError("Pass either a thread store or load/save callbacks, not both.")
        if store is not None and not isinstance(store, ThreadStore):
            raise ConfigError(
                f"thread_store must implement the ThreadStore protocol (load, append, list_chats, delete, aclose); "
                f"got {type(store).__name__}."
            )
        if uses_callbacks:
            store = CallbackThreadStore(load_threads_callback, save_threads_callback)
        self.store: ThreadStore | None = store
        """None: this process's memory only (the threads here are the store; nothing is copied)."""
        self._listeners: list[ItemListener] = []
        self._chats: dict[str, dict[str, ConversationThread]] = {}
        self._loaded: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._locks: dict[str, asyncio.Lock] = {}

    def subscribe(self, listener: ItemListener) -> None:
        """Call `listener(thread, item)` for every item any thread gets from now on, the moment it gets it."""
        if not callable(listener):
            raise ConfigError(f"a thread listener must be callable, got {type(listener).__name__}.")
        self._listeners.append(listener)

    # -- reading -----------------------------------------------------------------------------
    def get_thread(self, chat_id: str, sender: str, recipient: str) -> ConversationThread:
        """The thread sender->recipient of a chat, created empty if it does not exist yet."""
        threads = self._chats.get(chat_id)
        if threads is None:
            threads = self._chats[chat_id] = {}
        key = thread_key(sender, recipient)
        thread = threads.get(key)
        if thread is None:
            thread = threads[key] = ConversationThread(
                chat_id, sender, recipient, store=self.store, listeners=self._listeners
            )
        return thread

    def get_threads(self, chat_id: str) -> Threads:
        """All of a chat's threads as {thread key: items} (lists are copies; items are shared)."""
        return {key: list(t.items) for key, t in self._chats.get(chat_id, {}).items()}

    def chat_ids(self) -> list[str]:
        """Chats used in this process (the store may hold more: `await store.list_chats()`)."""
        return list(self._chats)

    # -- turn lifecycle ----------------------------------------------------------------------
    def lock(self, chat_id: str) -> asyncio.Lock:
        """Top-level turns of one chat run one after another, in arrival order (asyncio.Lock is fair)."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    async def ensure_loaded(self, chat_id: str) -> None:
        """Load a chat from the store the first time a turn uses it in this process; repair what a crash left."""
        if chat_id in self._loaded:
            self._loaded.move_to_end(chat_id)
            return
        if self.store is None:
            self._loaded[chat_id] = None
            return
        stored = validated_threads(await self.store.load(chat_id), chat_id, source=type(self.store).__name__)
        threads = self._chats.setdefault(chat_id, {})
        for key, items in stored.items():
            sender, recipient = key.split("->", 1)
            repaired, added = repair_with_outputs(items)
            thread = threads.get(key)
            if thread is None:
                thread = threads[key] = ConversationThread(
                    chat_id, sender, recipient, store=self.store, listeners=self._listeners
                )
            thread.items[:0] = repaired  # read (and so created) before the first turn: stored history first
            if added:  # a crash cut a call short: the repair is stored too (orphans are a thread's last items)
                await self.store.append(chat_id, key, added)
        self._loaded[chat_id] = None
        self._evict_idle_chats()

    def _evict_idle_chats(self) -> None:
        """Everything is in the store: idle chats beyond the limit can leave memory and be loaded again."""
        excess = len(self._loaded) - self.max_chats_in_memory
        for chat_id in list(self._loaded)[:max(0, excess)]:
            lock = self._locks.get(chat_id)
            if lock is not None and lock.locked():
                continue  # a turn is running on it (the current one included)
            del self._loaded[chat_id]
            self._chats.pop(chat_id, None)
            self._locks.pop(chat_id, None)

    async def save(self, chat_id: str) -> None:
        """End of a top-level turn: stores that want a whole snapshot (the callback adapter) get it now."""
        end_turn = getattr(self.store, "end_turn", None)  # None for a None store too
        if end_turn is not None:
            await end_turn(chat_id)

    async def delete_chat(self, chat_id: str) -> None:
        """Forget a chat here and in the store."""
        check_chat_id(chat_id)
        async with self.lock(chat_id):
            self._chats.pop(chat_id, None)
            self._loaded.pop(chat_id, None)
            if self.store is not None:
                await self.store.delete(chat_id)

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()


def interrupted_output(call_id: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_OUTPUT}


def repair(items: list[Item]) -> list[Item]:
    """Give every function_call without an output a synthetic one, so the model API accepts the thread."""
    return repair_with_outputs(items)[0]


def repair_with_outputs(items: list[Item]) -> tuple[list[Item], list[Item]]:
    """The repaired thread, and the synthetic outputs it gained.

    A reasoning item left last by a crash has lost its follower; it is not sent again.
    """
    if items and items[-1].get("type") == "reasoning":
        items = items[:-1]
    answered = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
    orphans = [
        index for index, item in enumerate(items)
        if item.get("type") == "function_call" and item.get("call_id") not in answered
    ]
    if not orphans:
        return list(items), []
    repaired = list(items)
    added: list[Item] = []
    for offset, index in enumerate(orphans):
        output = interrupted_output(str(items[index].get("call_id")))
        position = index + 1 + offset
        while position < len(repaired) and repaired[position].get("type") == "function_call":
            position += 1  # keep one response's parallel calls together; their outputs follow them
        repaired.insert(position, output)
        added.append(output)
    return repaired, added
