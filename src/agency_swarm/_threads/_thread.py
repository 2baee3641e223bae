"""One thread: the items one recipient's model sees on one sender->recipient pair of a chat, stored item by item,
and the list a model reads of them (`model_view`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from .._attachments._view import any_attachments, model_item
from .._base._errors import ConfigError, ItemTooLarge
from ._blobs import Attachments
from ._checks import CALL_MARKS
from ._store import Item, ThreadStore, immediate_append
from ._thread_index import ThreadIndex
from ._thread_items import SEND_CALL_ID, has_call_marks, has_send_ids, held_elsewhere, model_item_of


class ItemListener(Protocol):
    """Told about every item the moment a thread gets it."""

    def __call__(self, thread: ConversationThread, item: Item) -> None: ...


class ThreadHost:
    """What every thread of one manager shares, made once per manager: its store and, for a memory store, the
    store's synchronous append (`immediate_append`), the item listeners (the manager's own list), what to call when
    an append's outcome is unknown, and the attachments."""

    __slots__ = ("append_now", "attachments", "listeners", "on_unknown", "store")

    def __init__(
        self,
        store: ThreadStore | None = None,
        listeners: list[ItemListener] | None = None,
        on_unknown: Callable[[str], None] | None = None,
        attachments: Attachments | None = None,
    ) -> None:
        self.store = store
        self.append_now = immediate_append(store)
        self.listeners = listeners if listeners is not None else []
        self.on_unknown = on_unknown
        self.attachments = attachments


class _ModelView:
    """A thread's items as its model reads them (`ConversationThread.model_view`): `items`, a list of its own, of
    the thread's first `length` items, shown with `markers` or without; lent to each model call, so it is copied
    before it grows if someone kept it."""

    __slots__ = ("items", "length", "markers")

    def __init__(self, items: list[Item], length: int, markers: bool) -> None:
        self.items, self.length, self.markers = items, length, markers


class ConversationThread:
    """The items one recipient's model sees on one sender->recipient pair of one chat, in order.

    With a store, items join `items` only once the store took them: an append that fails leaves the thread as the
    store has it. An append whose outcome is unknown (cancelled half-way, or a failure after which the store may
    hold the items) calls `on_unknown(chat_id)`: the ThreadManager then reads the chat from the store again.

    Flags: `has_marks`, the thread holds approval bookkeeping items (`CALL_MARKS`), which the model must not be
    handed; `has_attachments`, it holds images or files, which the model reads resolved (`model_view`);
    `has_send_ids`, incoming messages keep the call id of the send that brought them, which the model must not be
    handed; `lent`, `items` itself was handed to a model as its input: `writable` copies it first if anyone still
    holds it.
    """

    __slots__ = ("_host", "_index", "_view", "chat_id",
                 "has_attachments", "has_marks", "has_send_ids", "items", "key", "lent", "recipient", "sender")

    def __init__(
        self,
        chat_id: str,
        sender: str,
        recipient: str,
        items: list[Item] | None = None,
        store: ThreadStore | None = None,
        listeners: list[ItemListener] | None = None,
        on_unknown: Callable[[str], None] | None = None,
        attachments: Attachments | None = None,
        *,
        host: ThreadHost | None = None,
        key: str | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.sender = sender
        self.recipient = recipient
        self.key = f"{sender}->{recipient}" if key is None else key
        self._host = host if host is not None else ThreadHost(store, listeners, on_unknown, attachments)
        self._index: ThreadIndex | None = None  # built when first asked (`index`), kept up with appends
        self._view: _ModelView | None = None  # made when first asked (`model_view`)
        self.lent = False
        if items:
            self.items: list[Item] = items
            self.has_marks = has_call_marks(items)
            self.has_attachments = any_attachments(items)
            self.has_send_ids = has_send_ids(items)
        else:  # a new thread: nothing to look for
            self.items = items if items is not None else []
            self.has_marks = self.has_attachments = self.has_send_ids = False

    async def append(self, item: Item) -> None:
        """Add one item and persist it before returning."""
        await self.extend([item])

    async def extend(self, items: list[Item]) -> None:
        """Add items in order; the store gets them in one append."""
        stored = self.add(items)
        if stored is not None:
            await stored

    def add(self, items: list[Item]) -> Awaitable[None] | None:
        """Add items in order: stored first, then in `items`. Returns what to await for that, or None when it is
        done already (no store, or a memory store: nothing to wait for)."""
        if not items:
            return None
        host = self._host
        if host.store is not None:  # the usual store is this process's memory (None): nothing to wait for
            kept = items
            if self.has_attachments and host.attachments is not None and host.attachments.inline:
                kept = host.attachments.inlined(items)  # a store without bytes of its own keeps them inline
            append_now = host.append_now
            if append_now is None:
                return self._stored(host.store, items, kept)
            append_now(self.chat_id, self.key, kept)
        self._grow(items)
        if host.listeners:
            self._tell(items)
        return None

    async def _stored(self, store: ThreadStore, items: list[Item], kept: list[Item]) -> None:
        try:
            await store.append(self.chat_id, self.key, kept)
        except (ItemTooLarge, ConfigError):
            raise  # refused before anything was written: the thread stays as the store has it
        except BaseException:
            on_unknown = self._host.on_unknown
            if on_unknown is not None:  # the store may hold the items or not: it is the one to ask
                on_unknown(self.chat_id)
            raise
        self._grow(items)
        if self._host.listeners:
            self._tell(items)

    def add_stored(self, items: list[Item]) -> None:
        """Add items the store holds already (another process appended them): as `add` does after storing."""
        self.has_marks = self.has_marks or has_call_marks(items)
        self.has_attachments = self.has_attachments or any_attachments(items)
        self._grow(items)

    def _grow(self, items: list[Item]) -> None:
        """Append items the store took. The model view and the index take them when next asked (`model_view`,
        `index`): a thread's last answer, say, is never looked at until its next turn."""
        if self.lent:  # as `_owned`, without its call: every model call's response comes this way
            self.lent = False
            if held_elsewhere(self.items):
                self.items = list(self.items)
        self.items.extend(items)
        if not self.has_send_ids and (SEND_CALL_ID in items[0] if len(items) == 1 else has_send_ids(items)):
            self.has_send_ids = True

    def writable(self) -> list[Item]:
        """`items`, to change in place. A list lent to a model that someone (the model, a hook) still holds stays
        theirs, unchanged: the thread goes on with a copy. Nobody else holding it, the lend cost no copy at all."""
        self._view = None  # changed in place: `model_view` and `index` are built again when next asked
        self._index = None
        return self._owned()

    def _owned(self) -> list[Item]:
        if self.lent:
            self.lent = False
            if held_elsewhere(self.items):
                self.items = list(self.items)
        return self.items

    def model_view(self, markers: bool = False) -> list[Item]:
        """`items` as a model may read them: without bookkeeping marks (`CALL_MARKS`), and with the images and files
        stored by reference resolved into their data (each after a marker naming its id, with `markers`: for an
        agent that can pass them on). A thread with marks or attachments keeps this list instead of building it
        from the whole chat at every model call: it takes the items appended since it was last asked; it is lent
        like `items` (copied before it grows if someone kept it) and built again after an in-place change."""
        if not (self.has_marks or self.has_attachments or self.has_send_ids):
            return self.items
        view = self._view
        length = len(self.items)
        if view is None or view.markers != markers or view.length > length:
            view = self._view = _ModelView(self._shown(self.items, markers), length, markers)
        elif view.length < length:
            if held_elsewhere(view.items):  # a model or a hook kept the view it was given: it stays as it was
                view.items = list(view.items)
            view.items.extend(self._shown(self.items[view.length:], markers))
            view.length = length
        return view.items

    def _shown(self, items: list[Item], markers: bool) -> list[Item]:
        """`items` as `model_view` shows them: a new list (its items are the given ones where nothing changes).
        Marks are left out even before `has_marks` is set after adding one; a send's call id wherever an item keeps
        one (an item that does sets `has_send_ids`)."""
        shown = [item if SEND_CALL_ID not in item else model_item_of(item) for item in items
                 if item.get("type") not in CALL_MARKS]
        attachments = self._host.attachments
        if self.has_attachments and attachments is not None:
            base64_of = attachments.base64_of
            shown = [model_item(item, base64_of, markers) for item in shown]
        return shown

    @property
    def index(self) -> ThreadIndex:
        """Open calls, approval marks and turn marks of `items` (`ThreadIndex`): built in one pass when first asked,
        then it takes the items appended since it was last asked; built again after an in-place change
        (`writable`)."""
        index = self._index
        length = len(self.items)
        if index is None or index.length > length:
            index = self._index = ThreadIndex()
            index.add(self.items)
        elif index.length < length:
            index.add(self.items[index.length:])
        return index

    def turn_begun(self, turn_id: str) -> int | None:
        """Where the turn `turn_id` begins (its mark's index), if it began in this thread."""
        return self.index.turns.get(turn_id)

    def unanswered_calls(self) -> list[Item]:
        """The function_call items without an output (`_thread_items.unanswered_calls`)."""
        return list(self.index.calls.values())

    def unanswered_requests(self) -> list[Item]:
        """The hosted MCP approval requests without a response (`_thread_items.unanswered_requests`)."""
        return list(self.index.requests.values())

    def call_marks(self) -> tuple[set[str], set[str]]:
        """(calls waiting for approval, calls started after one) (`_thread_items.call_marks`)."""
        index = self.index
        return set(index.awaiting), set(index.started)

    def paused_run(self, call_id: str) -> Item | None:
        """The last nested-run mark of `call_id`: the nested run it waits for, if any."""
        return self.index.nested.get(call_id)

    def _tell(self, items: list[Item]) -> None:
        for item in items:
            for listener in self._host.listeners:
                listener(self, item)

    def __repr__(self) -> str:
        return f"ConversationThread({self.chat_id!r}, {self.key!r}, {len(self.items)} items)"
