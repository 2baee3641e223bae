"""Per-chat, per-pair conversation threads, and the callbacks that load and save them."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeAlias

from ._errors import ConfigError

Item: TypeAlias = dict[str, Any]
ThreadsSnapshot: TypeAlias = dict[str, list[Item]]
LoadThreadsCallback: TypeAlias = Callable[[str], "Awaitable[ThreadsSnapshot] | ThreadsSnapshot"]
SaveThreadsCallback: TypeAlias = Callable[[str, ThreadsSnapshot], "Awaitable[None] | None"]

MAX_CHAT_ID_LENGTH = 256
INTERRUPTED_OUTPUT = "Error: this call was interrupted before it finished; its result is unknown."


class ItemListener(Protocol):
    """Told about every item the moment a thread gets it (what durable stores build on)."""

    def __call__(self, thread: ConversationThread, item: Item) -> None: ...


def thread_key(sender: str, recipient: str) -> str:
    return f"{sender}->{recipient}"


def check_chat_id(chat_id: object) -> str:
    """Chat ids come from users: accept only short, printable strings."""
    if not isinstance(chat_id, str):
        raise ConfigError(f"chat_id must be a str, got {type(chat_id).__name__}.")
    if not chat_id or len(chat_id) > MAX_CHAT_ID_LENGTH:
        raise ConfigError(f"chat_id must be 1 to {MAX_CHAT_ID_LENGTH} characters long, got {len(chat_id)}.")
    if not chat_id.isprintable():
        raise ConfigError(f"chat_id {chat_id!r} contains control characters; use printable text only.")
    return chat_id


class ConversationThread:
    """The items one recipient's model sees on one sender->recipient pair of one chat, in order."""

    __slots__ = ("_listeners", "chat_id", "items", "key", "recipient", "sender")

    def __init__(
        self, chat_id: str, sender: str, recipient: str, items: list[Item] | None = None,
        listeners: list[ItemListener] | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.sender = sender
        self.recipient = recipient
        self.key = thread_key(sender, recipient)
        self.items: list[Item] = items if items is not None else []
        self._listeners = listeners if listeners is not None else []  # shared with the manager

    def append(self, item: Item) -> None:
        self.items.append(item)
        for listener in self._listeners:
            listener(self, item)

    def __repr__(self) -> str:
        return f"ConversationThread({self.chat_id!r}, {self.key!r}, {len(self.items)} items)"


class ThreadManager:
    """One ConversationThread per (chat_id, sender, recipient); loads a chat once, saves it after each turn."""

    def __init__(
        self,
        *,
        load_threads_callback: LoadThreadsCallback | None = None,
        save_threads_callback: SaveThreadsCallback | None = None,
    ) -> None:
        for name, callback in (("load_threads_callback", load_threads_callback),
                               ("save_threads_callback", save_threads_callback)):
            if callback is not None and not callable(callback):
                raise ConfigError(f"{name} must be a function, got {type(callback).__name__}.")
        self._load = load_threads_callback
        self._save = save_threads_callback
        self._listeners: list[ItemListener] = []
        self._chats: dict[str, dict[str, ConversationThread]] = {}
        self._loaded: set[str] = set()
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
            thread = threads[key] = ConversationThread(chat_id, sender, recipient, listeners=self._listeners)
        return thread

    def get_threads(self, chat_id: str) -> ThreadsSnapshot:
        """All of a chat's threads as {thread key: items} (lists are copies; items are shared)."""
        return {key: list(t.items) for key, t in self._chats.get(chat_id, {}).items()}

    def chat_ids(self) -> list[str]:
        return list(self._chats)

    # -- turn lifecycle ----------------------------------------------------------------------
    def lock(self, chat_id: str) -> asyncio.Lock:
        """Top-level turns of one chat run one after another."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    async def ensure_loaded(self, chat_id: str) -> None:
        """Ask the load callback for a chat the first time a turn uses it in this process."""
        if chat_id in self._loaded:
            return
        if self._load is not None:
            loaded = self._load(chat_id)
            if inspect.isawaitable(loaded):
                loaded = await loaded
            threads = self._chats.setdefault(chat_id, {})
            for key, items in _validated(loaded, chat_id).items():
                sender, recipient = key.split("->", 1)
                existing = threads.get(key)
                if existing is None:
                    threads[key] = ConversationThread(
                        chat_id, sender, recipient, repair(items), listeners=self._listeners
                    )
                else:  # read (and so created) before the first turn: the stored history goes first
                    existing.items[:0] = repair(items)
        self._loaded.add(chat_id)

    async def save(self, chat_id: str) -> None:
        if self._save is None:
            return
        result = self._save(chat_id, self.get_threads(chat_id))
        if inspect.isawaitable(result):
            await result


def _validated(loaded: object, chat_id: str) -> Mapping[str, list[Item]]:
    expected = "a dict {thread key like 'user->CEO': [item dicts]} ({} for a new chat)"
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(
            f"load_threads_callback returned {type(loaded).__name__} for chat {chat_id!r}; expected {expected}."
        )
    for key, items in loaded.items():
        if not isinstance(key, str) or key.count("->") != 1 or key.startswith("->") or key.endswith("->"):
            raise ConfigError(
                f"load_threads_callback returned thread key {key!r} for chat {chat_id!r}; expected {expected}."
            )
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ConfigError(
                f"load_threads_callback returned thread {key!r} of chat {chat_id!r} that is not a list of dicts; "
                f"expected {expected}."
            )
    return loaded


def interrupted_output(call_id: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": INTERRUPTED_OUTPUT}


def repair(items: list[Item]) -> list[Item]:
    """Give every function_call without an output a synthetic one, so the model API accepts the thread."""
    answered = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
    orphans = [
        index for index, item in enumerate(items)
        if item.get("type") == "function_call" and item.get("call_id") not in answered
    ]
    if not orphans:
        return list(items)
    repaired = list(items)
    for offset, index in enumerate(orphans):
        call_id = str(items[index].get("call_id"))
        position = index + 1 + offset
        while position < len(repaired) and repaired[position].get("type") == "function_call":
            position += 1  # keep one response's parallel calls together; their outputs follow them
        repaired.insert(position, interrupted_output(call_id))
    return repaired
