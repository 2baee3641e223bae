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
from ._thread_items import has_call_marks, held_elsewhere, without_call_marks


class ItemListener(Protocol):
    """Told about every item the moment a thread gets it."""

    def __call__(self, thread: ConversationThread, item: Item) -> None: ...


class ConversationThread:
    """The items one recipient's model sees on one sender->recipient pair of one chat, in order.

    With a store, items join `items` only once the store took them: an append that fails leaves the thread as the
    store has it. An append whose outcome is unknown (cancelled half-way, or a failure after which the store may
    hold the items) calls `on_unknown(chat_id)`: the ThreadManager then reads the chat from the store again.
    """

    __slots__ = ("_append_now", "_attachments", "_listeners", "_on_unknown", "_store", "_view", "_view_length",
                 "_view_lent", "_view_markers", "chat_id", "has_attachments", "has_marks", "items", "key", "lent",
                 "recipient", "sender")

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
    ) -> None:
        self.chat_id = chat_id
        self.sender = sender
        self.recipient = recipient
        self.key = f"{sender}->{recipient}"
        self.items: list[Item] = items if items is not None else []
        self.has_marks = bool(self.items) and has_call_marks(self.items)
        """The thread holds approval bookkeeping items (`CALL_MARKS`), which the model must not be handed."""
        self.has_attachments = bool(self.items) and any_attachments(self.items)
        """The thread holds images or files: the model reads them resolved (`model_view`)."""
        self._attachments = attachments
        self._view_markers = False
        self.lent = False
        """`items` itself was handed to a model as its input: `writable` copies it first if anyone still holds it."""
        self._view: list[Item] | None = None  # `model_view`'s list, and how many of `items` it has seen
        self._view_length = 0
        self._view_lent = False
        self._store = store
        self._append_now = immediate_append(store)
        self._listeners = listeners if listeners is not None else []  # shared with the manager
        self._on_unknown = on_unknown

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
        store = self._store
        if store is not None:
            kept = items
            if self.has_attachments and self._attachments is not None and self._attachments.inline:
                kept = self._attachments.inlined(items)  # a store without bytes of its own keeps them inline
            append_now = self._append_now
            if append_now is None:
                return self._stored(store, items, kept)
            append_now(self.chat_id, self.key, kept)
        self._grow(items)
        if self._listeners:
            self._tell(items)
        return None

    async def _stored(self, store: ThreadStore, items: list[Item], kept: list[Item]) -> None:
        try:
            await store.append(self.chat_id, self.key, kept)
        except (ItemTooLarge, ConfigError):
            raise  # refused before anything was written: the thread stays as the store has it
        except BaseException:
            if self._on_unknown is not None:  # the store may hold the items or not: it is the one to ask
                self._on_unknown(self.chat_id)
            raise
        self._grow(items)
        if self._listeners:
            self._tell(items)

    def _grow(self, items: list[Item]) -> None:
        (self._owned() if self.lent else self.items).extend(items)
        if self._view is not None:
            if self._view_lent:
                self._view_lent = False
                if held_elsewhere(self._view):  # a model or a hook kept the view it was given: it stays as it was
                    self._view = list(self._view)
            shown = [item for item in items if item.get("type") not in CALL_MARKS]
            self._view.extend(self._resolved(shown, self._view_markers) if self.has_attachments else shown)
            self._view_length = len(self.items)

    def writable(self) -> list[Item]:
        """`items`, to change in place. A list lent to a model that someone (the model, a hook) still holds stays
        theirs, unchanged: the thread goes on with a copy. Nobody else holding it, the lend cost no copy at all."""
        self._view = None  # changed in place: `model_view` builds it again when next asked
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
        agent that can pass them on). A thread with marks or attachments keeps this list up with its appends instead
        of building it from the whole chat at every model call; it is lent like `items` (copied before it grows if
        someone kept it) and built again after an in-place change."""
        if not self.has_marks and not self.has_attachments:
            return self.items
        if self._view is None or self._view_length != len(self.items) or self._view_markers != markers:
            shown = without_call_marks(self.items)
            self._view = self._resolved(shown, markers) if self.has_attachments else shown
            self._view_length = len(self.items)
            self._view_markers = markers
        self._view_lent = True
        return self._view

    def _resolved(self, items: list[Item], markers: bool) -> list[Item]:
        attachments = self._attachments
        if attachments is None:
            return items
        base64_of = attachments.base64_of
        return [model_item(item, base64_of, markers) for item in items]

    def _tell(self, items: list[Item]) -> None:
        for item in items:
            for listener in self._listeners:
                listener(self, item)

    def __repr__(self) -> str:
        return f"ConversationThread({self.chat_id!r}, {self.key!r}, {len(self.items)} items)"
