"""Per-chat, per-pair conversation threads, persisted item by item through a ThreadStore."""

from __future__ import annotations

import asyncio
import copy
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .._attachments._media import DEFAULT_LIMITS, AttachmentLimits
from .._attachments._view import any_attachments
from .._base._errors import ChatNotLoaded, ConfigError, InvalidChatId, ReentrantTurn
from .._base._sync import INSIDE
from ._blobs import Attachments
from ._checks import only_known_recipients, without_refused_items
from ._running import RunningTurns
from ._store import (
    CallbackThreadStore,
    ChatVersion,
    Item,
    LoadThreadsCallback,
    SaveThreadsCallback,
    Threads,
    ThreadStore,
    validated_threads,
)
from ._thread import ConversationThread, ItemListener, ThreadHost
from ._thread_items import (
    drop_lost_reasoning,
    ends_with_reasoning,
    has_call_marks,
    has_send_ids,
    interrupted_output,
    started_by_a_closed_send,
    unanswered_calls,
    unanswered_requests,
    without_call_marks,
)
from ._writes import CLEAN_UP_SECONDS as CLEAN_UP_SECONDS
from ._writes import clean_up as clean_up
from ._writes import finish as finish

ThreadsSnapshot = Threads
MAX_CHAT_ID_CHARS = 200
MAX_CHAT_ID_BYTES = 255
_SHORT_ID = min(MAX_CHAT_ID_CHARS, MAX_CHAT_ID_BYTES // 4)  # a char is at most 4 UTF-8 bytes

__all__ = [
    "ConversationThread",
    "ItemListener",
    "LoadThreadsCallback",
    "SaveThreadsCallback",
    "ThreadManager",
    "check_chat_id",
]


def check_chat_id(chat_id: object) -> str:
    """Chat ids come from users and name files: only short, printable, path-free strings pass."""
    if (type(chat_id) is str and 0 < len(chat_id) <= _SHORT_ID and chat_id.isprintable() and not chat_id.isspace()
            and "/" not in chat_id and "\\" not in chat_id and chat_id not in (".", "..")):
        return chat_id  # the usual id: every check below at once (short enough that its UTF-8 bytes fit too)
    if not isinstance(chat_id, str):
        raise InvalidChatId(f"chat_id must be a str, got {type(chat_id).__name__}.")
    if not chat_id:
        raise InvalidChatId("chat_id is empty; leave it out to use the default chat, or pass a name.")
    if not chat_id.isprintable():  # first: lone surrogates are not printable and cannot be encoded
        raise InvalidChatId(f"chat_id {chat_id!r} contains control characters; use printable text only.")
    if chat_id.isspace():  # prints as nothing: in a URL, a file name or a log line it looks like no id at all
        raise InvalidChatId("chat_id is only whitespace; use a name with at least one visible character.")
    size = len(chat_id)  # a char is at most 4 UTF-8 bytes: short ids need no encoding to know they fit
    if size > MAX_CHAT_ID_CHARS:
        raise InvalidChatId(
            f"chat_id is too long ({size} characters); use at most {MAX_CHAT_ID_CHARS} characters "
            f"and {MAX_CHAT_ID_BYTES} UTF-8 bytes."
        )
    if size * 4 > MAX_CHAT_ID_BYTES and (encoded := len(chat_id.encode("utf-8"))) > MAX_CHAT_ID_BYTES:
        raise InvalidChatId(
            f"chat_id is too long ({encoded} UTF-8 bytes, {size} characters); use at most {MAX_CHAT_ID_BYTES} "
            f"UTF-8 bytes (and {MAX_CHAT_ID_CHARS} characters)."
        )
    if "/" in chat_id or "\\" in chat_id or chat_id in (".", ".."):
        raise InvalidChatId(f"chat_id {chat_id!r} looks like a path; do not use '/', '\\\\', '.' or '..'.")
    return chat_id


def _store_of(
    store: ThreadStore | None, load: LoadThreadsCallback | None, save: SaveThreadsCallback | None
) -> ThreadStore | None:
    """The manager's store: the one given, or the load/save callbacks as one (`CallbackThreadStore`)."""
    for name, callback in (("load_threads_callback", load), ("save_threads_callback", save)):
        if callback is not None and not callable(callback):
            raise ConfigError(f"{name} must be a function, got {type(callback).__name__}.")
    uses_callbacks = load is not None or save is not None
    if store is not None and uses_callbacks:
        raise ConfigError("Pass either a thread store or load/save callbacks, not both.")
    if store is not None and not isinstance(store, ThreadStore):
        raise ConfigError(
            f"thread_store must implement the ThreadStore protocol (load, append, list_chats, delete, aclose); "
            f"got {type(store).__name__}."
        )
    return CallbackThreadStore(load, save) if uses_callbacks else store


@dataclass(frozen=True, slots=True)
class PausedTurn:
    """What a paused (or cut short) top-level turn leaves in memory for a resume in the same process, as `Runner`'s
    `RunState` keeps them: the caller's context, the usage records and responses of the model calls made so far,
    and the guardrail results so far."""

    context: Any
    usage_records: list[Any]
    responses: list[Any]
    guardrails: Any

class ThreadManager:
    """One ConversationThread per (chat_id, sender, recipient), loaded once from the store and saved item by item."""

    def __init__(
        self,
        *,
        store: ThreadStore | None = None,
        load_threads_callback: LoadThreadsCallback | None = None,
        save_threads_callback: SaveThreadsCallback | None = None,
        max_chats_in_memory: int = 10_000,
        attachment_limits: AttachmentLimits | None = None,
    ) -> None:
        if attachment_limits is not None and not isinstance(attachment_limits, AttachmentLimits):
            raise ConfigError(f"attachment_limits must be an AttachmentLimits, got {type(attachment_limits).__name__}.")
        if isinstance(max_chats_in_memory, bool) or not isinstance(max_chats_in_memory, int) or max_chats_in_memory < 1:
            raise ConfigError(f"max_chats_in_memory must be an int >= 1, got {max_chats_in_memory!r}.")
        self.max_chats_in_memory = max_chats_in_memory
        """With a store, chats beyond this many leave memory (least recently used first) and reload when used."""
        store = _store_of(store, load_threads_callback, save_threads_callback)
        self.store: ThreadStore | None = store
        """None: this process's memory only (the threads here are the store; nothing is copied)."""
        self.attachments = Attachments(store, attachment_limits or DEFAULT_LIMITS)
        """The limits messages' images and files are checked against, and the bytes loaded chats refer to."""
        self.store_turn_lock: Callable[[str], AbstractAsyncContextManager[ChatVersion | None] | None] | None = (
            getattr(store, "turn_lock", None))
        """The store's own turn lock, shared with other processes (and managers), if it has one."""
        self.saves_turns = getattr(store, "end_turn", None) is not None
        """The store wants the whole chat at the end of each top-level turn (`save`)."""
        self._listeners: list[ItemListener] = []
        self._host = ThreadHost(store, self._listeners, self._reread, self.attachments)  # what every thread shares
        self._chats: dict[str, dict[str, ConversationThread]] = {}
        self._loaded: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)  # made when first asked for
        self._unanswered: set[str] = set()
        self._unknown: set[str] = set()  # chats where an append's outcome is unknown: read again from the store
        self._versions: dict[str, int] = {}
        """Per chat held in memory, the store version it holds (stores whose turn lock yields a ChatVersion)."""
        self.recipients: frozenset[str] | None = None
        """The agents of the chart (set by the Agency): a loaded thread for any other recipient is left out."""
        self.paused_turns: dict[str, PausedTurn] = {}
        self.running = RunningTurns.on(store)  # the top-level turns running here: what a cancel stops
        """What each chat's unfinished turn leaves for a resume in this process: its context (for a resume that passes
        none) and its usage (a resumed turn's usage counts the calls before the pause). Never stored: it leaves with
        the chat when the chat leaves memory."""

    def subscribe(self, listener: ItemListener) -> None:
        """Call `listener(thread, item)` for every item any thread gets from now on, the moment it gets it."""
        if not callable(listener):
            raise ConfigError(f"a thread listener must be callable, got {type(listener).__name__}.")
        self._listeners.append(listener)

    # -- reading -----------------------------------------------------------------------------
    def get_thread(self, chat_id: str, sender: str, recipient: str) -> ConversationThread:
        """The thread sender->recipient of a chat, created empty if it does not exist yet."""
        threads = self._chats.get(chat_id) or self._chats.setdefault(chat_id, {})
        key = f"{sender}->{recipient}"
        thread = threads.get(key)
        if thread is None:
            thread = threads[key] = ConversationThread(chat_id, sender, recipient, host=self._host, key=key)
        return thread

    def threads_of(self, chat_id: str) -> list[ConversationThread]:
        """The thread objects this process holds of a chat (none if it holds none)."""
        return list(self._chats.get(chat_id, {}).values())

    def held_items(self, chat_id: str) -> dict[str, list[Item]]:
        """{thread key: the thread's own items list} of the threads this process holds of a chat, marks included:
        for reading only, with no copy (`get_threads` copies)."""
        return {key: thread.items for key, thread in self._chats.get(chat_id, {}).items()}

    def get_threads(self, chat_id: str, *, include_marks: bool = False) -> Threads:
        """A chat's threads held in memory, as {thread key: items} (lists are copies; items are shared): the items
        its models read, without the bookkeeping marks (`CALL_MARKS`) unless `include_marks`.

        With a store, a chat this process does not hold (no turn of it ran here, it left memory, or it was deleted)
        raises ChatNotLoaded instead of looking empty: `await agency.get_threads(chat_id)` loads it and reads it.
        """
        if self.store is not None and chat_id not in self._chats and chat_id not in self._loaded:
            raise ChatNotLoaded(
                f"Chat {chat_id!r} is not loaded in this process (no turn of it ran here, it left memory, or it was "
                f"deleted): read what the store holds with `await agency.get_threads({chat_id!r})`.",
                chat_id=chat_id,
            )
        shown = list if include_marks else without_call_marks
        return {key: shown(t.items) for key, t in self._chats.get(chat_id, {}).items()}

    async def read_threads(self, chat_id: str, *, include_marks: bool = False) -> Threads:
        """A chat's threads as copies, loaded from the store first if need be (marks only with `include_marks`).

        Waits for a running turn of the chat (and, with a store several processes share, reads what they added), so
        it never sees half a turn. Called from a tool of that chat's own turn, it reads what the turn holds.
        """
        inside = INSIDE.get()
        if (self, chat_id) in inside:  # this chat's turn is running this code and holds the lock
            return copied(self._chats.get(chat_id, {}), include_marks)
        if (self.store, chat_id) in inside:
            raise ReentrantTurn(
                f"Chat {chat_id!r} is running the turn this call comes from, in an agency sharing this store; read "
                "its threads from that agency.", chat_id=chat_id,
            )
        async with self.hold(chat_id):
            await self.ensure_loaded(chat_id)
            return copied(self._chats.get(chat_id, {}), include_marks)

    def chat_ids(self) -> list[str]:
        """Chats used in this process (the store may hold more: `await store.list_chats()`)."""
        return list(self._chats)

    # -- turn lifecycle ----------------------------------------------------------------------
    def lock(self, chat_id: str) -> asyncio.Lock:
        """Top-level turns of one chat run one after another, in arrival order (asyncio.Lock is fair)."""
        return self._locks[chat_id]

    def hold(self, chat_id: str, *, catch_up: bool = True) -> AbstractAsyncContextManager[object]:
        """Held for a whole top-level turn: this process's lock, then the store's turn lock if it has one.

        A store with a turn lock is shared between processes, so inside that lock what others added to the chat is
        read (`catch_up`; a caller that is about to delete the chat has no use for it).
        """
        turn_lock = self.store_turn_lock
        if turn_lock is None:
            return self._locks[chat_id]  # an asyncio.Lock is itself the context manager: nothing added per turn
        store_lock = turn_lock(chat_id)
        if store_lock is None:
            return self._locks[chat_id]
        return self._held(chat_id, store_lock, catch_up)

    @asynccontextmanager
    async def _held(
        self, chat_id: str, store_lock: AbstractAsyncContextManager[ChatVersion | None], catch_up: bool
    ) -> AsyncIterator[None]:
        async with self.lock(chat_id):
            version: ChatVersion | None = None
            before: tuple[int, int] | None = None
            try:
                async with store_lock as version:
                    if catch_up:
                        await self._catch_up(chat_id, version)
                    if version is not None:
                        before = (version.version, self._item_count(chat_id))
                    yield
            finally:
                self._versions.pop(chat_id, None)
                if version is not None and before is not None:
                    self._note_version(chat_id, version, before)

    async def _catch_up(self, chat_id: str, version: ChatVersion | None) -> None:
        """Inside the turn lock: read what other processes added to the chat since this one last held it."""
        known = self._versions.get(chat_id) if chat_id in self._loaded and chat_id not in self._unknown else None
        change = "all" if version is None else version.changes_after(known)
        if change == "none":
            return
        load_after = getattr(self.store, "load_after", None)
        if change == "all" or load_after is None:
            self._forget(chat_id)
            if version is not None:
                await self.ensure_loaded(chat_id)
                self._versions[chat_id] = version.version
            return
        assert version is not None
        assert known is not None
        added = self._checked(chat_id, await load_after(chat_id, known), type(self.store).__name__, held=True)
        added = await self.attachments.loaded(chat_id, added)
        self._add_stored(chat_id, added, at_end=True)
        self._versions[chat_id] = version.version

    def _note_version(self, chat_id: str, version: ChatVersion, before: tuple[int, int]) -> None:
        """After the turn: the version the store reports is what this process holds, unless that cannot be so
        (the chat was dropped or became unknown, or this process stored items but the version did not move:
        the unlock failed). Then the next turn reads the whole chat."""
        if chat_id not in self._loaded or chat_id in self._unknown:
            return
        moved = version.version != before[0]
        if moved or self._item_count(chat_id) == before[1]:
            self._versions[chat_id] = version.version

    def _item_count(self, chat_id: str) -> int:
        return sum(len(thread.items) for thread in self._chats.get(chat_id, {}).values())

    def _forget(self, chat_id: str) -> None:
        """Drop what this process knows of a chat; the next ensure_loaded reads it from the store again."""
        self._chats.pop(chat_id, None)
        self._loaded.pop(chat_id, None)
        self._versions.pop(chat_id, None)
        self._unanswered.discard(chat_id)
        self._unknown.discard(chat_id)
        self.attachments.forget(chat_id)

    def _reread(self, chat_id: str) -> None:
        """An append of this chat may or may not have reached the store: the next turn reads the chat from it."""
        self._loaded.pop(chat_id, None)
        self._unknown.add(chat_id)

    def is_loaded(self, chat_id: str) -> bool:
        """Whether the chat is ready in memory (then marked as just used); if not, `await ensure_loaded` first."""
        if self.store is None:  # this process's memory is the store: every chat is loaded, none ever leaves
            return True
        loaded = self._loaded
        if chat_id in loaded:
            loaded.move_to_end(chat_id)
            return True
        return False

    async def ensure_loaded(self, chat_id: str) -> None:
        """Load a chat from the store the first time a turn uses it in this process.

        Calls left without outputs (a crash, or a pause for approval) are kept as they are: `resume` continues
        from them, and the next new message repairs them (`repair_chat`).
        """
        if self.is_loaded(chat_id):
            return
        assert self.store is not None  # a chat without a store is always loaded
        stored = self._checked(chat_id, await self.store.load(chat_id), type(self.store).__name__)
        stored = await self.attachments.loaded(chat_id, stored)
        if chat_id in self._unknown:  # what this process holds may differ from the store: the store wins
            self._unknown.discard(chat_id)
            self._unanswered.discard(chat_id)
            for held in self._chats.get(chat_id, {}).values():
                held.writable().clear()
        self._add_stored(chat_id, stored, at_end=False)
        self._loaded[chat_id] = None
        self._evict_idle_chats()

    def _checked(self, chat_id: str, loaded: object, source: str, *, held: bool = False) -> Threads:
        """What a store returned (`held`: what it added to the threads held here), as threads a model may be handed.
        Checked once per load, never per turn."""
        threads = validated_threads(loaded, chat_id, source=source)
        if threads and not getattr(self.store, "checks_items", False):  # the file store quarantines on its own
            counts = {key: len(t.items) for key, t in self._chats.get(chat_id, {}).items()} if held else None
            threads = without_refused_items(threads, chat_id, source, counts)
        if threads and self.recipients is not None:
            threads = only_known_recipients(threads, chat_id, self.recipients)
        return threads

    def _add_stored(self, chat_id: str, stored: Threads, *, at_end: bool) -> None:
        """Stored items into the chat's threads: after what they hold (`at_end`), or before it (threads read, and
        so created, before the chat's first load hold only what this turn is adding)."""
        threads = self._chats.setdefault(chat_id, {})
        for key, items in stored.items():
            sender, recipient = key.split("->", 1)
            thread = threads.get(key)
            if thread is None:
                thread = threads[key] = ConversationThread(chat_id, sender, recipient, host=self._host)
            if at_end:
                thread.add_stored(items)  # the thread keeps its model view and marks' index up, as with its own
            else:
                thread.writable()[:0] = items
                thread.has_marks = thread.has_marks or has_call_marks(items)
                thread.has_attachments = thread.has_attachments or any_attachments(items)
                thread.has_send_ids = thread.has_send_ids or has_send_ids(items)
            # Added at the end: a call left open can only be among the new items (older ones were checked before).
            new = items if at_end else thread.items
            if unanswered_calls(new) or unanswered_requests(new) or ends_with_reasoning(thread.items):
                self._unanswered.add(chat_id)

    def has_unanswered_calls(self, chat_id: str) -> bool:
        """A crash or a pause for approval left some function_call of this chat without an output."""
        return chat_id in self._unanswered

    def mark_unanswered(self, chat_id: str) -> None:
        self._unanswered.add(chat_id)

    def pending_calls(self, chat_id: str) -> dict[str, list[Item]]:
        """{thread key: its function_call items without outputs}, for the threads that have any."""
        pending: dict[str, list[Item]] = {}
        for key, thread in self._chats.get(chat_id, {}).items():
            calls = thread.unanswered_calls()
            if calls:
                pending[key] = calls
        if not pending:
            self._unanswered.discard(chat_id)
        return pending

    def waiting_calls(self, chat_id: str) -> dict[str, list[Item]]:
        """{thread key: its calls that wait for an approval decision}: paused for approval (`AWAITING_APPROVAL`), not
        started since (`APPROVED_RUN`), and in a turn somebody still waits for (not `abandoned_calls`). Every other
        call without an output was cut short (a crash, a failed send) and is never run again. Hosted MCP approval
        requests without a response wait the same way (marked with their `id`)."""
        abandoned = self.abandoned_calls(chat_id)
        waiting: dict[str, list[Item]] = {}
        for key, thread in self._chats.get(chat_id, {}).items():
            if not thread.has_marks:
                continue
            awaiting, started = thread.call_marks()
            calls = [
                call for call in [*thread.unanswered_calls(), *thread.unanswered_requests()]
                if (call_id := str(call.get("call_id") or call.get("id"))) in awaiting and call_id not in started
                and call_id not in abandoned
            ]
            if calls:
                waiting[key] = calls
        return waiting

    def abandoned_calls(self, chat_id: str) -> set[str]:
        """Call ids of calls without outputs (and ids of hosted MCP approval requests without responses) in a nested
        thread whose sender no longer waits for it: the send that started that turn already has its output (it failed,
        was cut short, or a crash repaired it). Nobody will read what such a call gives, so it is never waiting for
        approval; the next turn repairs it."""
        threads = self._chats.get(chat_id, {})
        unanswered = {key: thread.unanswered_calls() for key, thread in threads.items()}
        open_sends = {str(call.get("call_id")) for calls in unanswered.values() for call in calls}
        abandoned: set[str] = set()
        for key, calls in unanswered.items():
            open_items = [*calls, *threads[key].unanswered_requests()]
            if open_items and started_by_a_closed_send(threads[key].items, open_sends):
                abandoned.update(str(item.get("call_id") or item.get("id")) for item in open_items)
        return abandoned

    async def repair_chat(self, chat_id: str) -> None:
        """Give every call without an output an "interrupted" output, stored, so the model API accepts the threads."""
        pending = self.pending_calls(chat_id)
        for key, thread in self._chats.get(chat_id, {}).items():
            if ends_with_reasoning(thread.items):
                drop_lost_reasoning(thread.writable())  # in place only when needed: its index and view stay
            calls = pending.get(key, [])
            await thread.extend([interrupted_output(str(call.get("call_id"))) for call in calls])
        self._unanswered.discard(chat_id)

    def _evict_idle_chats(self) -> None:
        """Everything is in the store: idle chats beyond the limit can leave memory and be loaded again."""
        excess = len(self._loaded) - self.max_chats_in_memory
        for chat_id in list(self._loaded)[:max(0, excess)]:
            if not self._drop_idle_lock(chat_id):
                continue  # a turn is running on it (the current one included) or waiting for it
            del self._loaded[chat_id]
            self._chats.pop(chat_id, None)
            self._versions.pop(chat_id, None)
            self._unanswered.discard(chat_id)  # derived again from the store when the chat is loaded again
            self.paused_turns.pop(chat_id, None)
            self.attachments.forget(chat_id)

    def _drop_idle_lock(self, chat_id: str) -> bool:
        """Forget the chat's lock unless a turn holds it or waits for it; False when it is in use."""
        lock = self._locks.get(chat_id)
        if lock is None:
            return True
        # A released lock whose next waiter has not run yet is unlocked but still has that waiter.
        if lock.locked() or getattr(lock, "_waiters", None):
            return False
        del self._locks[chat_id]
        return True

    async def save(self, chat_id: str) -> None:
        """End of a top-level turn: stores that want a whole snapshot (the callback adapter) get it now."""
        end_turn = getattr(self.store, "end_turn", None)  # None for a None store too
        if end_turn is not None:
            await end_turn(chat_id)

    async def delete_chat(self, chat_id: str) -> None:
        """Forget a chat here and in the store."""
        check_chat_id(chat_id)
        # not in the middle of a turn, in this process or another; nothing of the chat is read, it is going
        async with self.hold(chat_id, catch_up=False):
            self._forget(chat_id)
            self.paused_turns.pop(chat_id, None)
            if self.store is not None:
                await self.store.delete(chat_id)
        self._drop_idle_lock(chat_id)  # deleted chats leave nothing behind, locks included

    async def aclose(self) -> None:
        if self.store is not None:
            await self.store.aclose()


def copied(threads: dict[str, ConversationThread], include_marks: bool) -> Threads:
    """{thread key: deep copies of its items (its marks only if asked)}: what a caller may change without changing
    the chat."""
    shown = list if include_marks else without_call_marks
    return {key: copy.deepcopy(shown(thread.items)) for key, thread in threads.items()}
