"""One store shared by several agencies of an app: each sees it through a `NamespacedStore`, its chat ids prefixed
with `<name>~`, so two agencies never see, lock or run each other's chats, whatever ids their clients use."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from .._base._errors import InvalidChatId
from ._chat_index import ChatEntry, ChatIndex
from ._chat_indexes import chat_index_for
from ._manager import check_chat_id
from ._pg_cancel import CancelHandler
from ._running import CancelOutcome
from ._store import Item, Threads, ThreadStore

SEPARATOR = "~"


class SharedStore:
    """The store the agencies share, closed when the last of them closes its view."""

    def __init__(self, store: ThreadStore, views: int) -> None:
        self.store, self.open_views = store, views
        self.index: ChatIndex | None = chat_index_for(store)

    async def release(self) -> None:
        self.open_views -= 1
        if self.open_views == 0:
            await self.store.aclose()


class NamespacedStore:
    """`shared`'s chats whose ids begin with `<namespace>~`, under the ids without it (a chat id here is at most
    200 characters less the prefix)."""

    def __init__(self, shared: SharedStore, namespace: str) -> None:
        self._shared, self._inner, self.namespace = shared, shared.store, namespace
        self._prefix = namespace + SEPARATOR
        self.stores_attachments = bool(getattr(self._inner, "stores_attachments", False))
        self.checks_items = bool(getattr(self._inner, "checks_items", False))
        self._closed = False

    def __repr__(self) -> str:
        return f"NamespacedStore({self.namespace!r} of {self._inner!r})"

    def _id(self, chat_id: str) -> str:
        check_chat_id(chat_id)
        inner = self._prefix + chat_id
        try:
            return check_chat_id(inner)
        except InvalidChatId:
            raise InvalidChatId(
                f"chat_id is too long for agency {self.namespace!r} of a shared store: at most "
                f"{200 - len(self._prefix)} characters."
            ) from None

    def _own(self, inner: str) -> str | None:
        return inner[len(self._prefix):] if inner.startswith(self._prefix) else None

    # -- ThreadStore ---------------------------------------------------------------------------------------------
    async def load(self, chat_id: str) -> Threads:
        return await self._inner.load(self._id(chat_id))

    async def append(self, chat_id: str, thread_key: str, items: list[Item]) -> None:
        await self._inner.append(self._id(chat_id), thread_key, items)

    async def list_chats(self) -> list[str]:
        return [own for inner in await self._inner.list_chats() if (own := self._own(inner)) is not None]

    async def delete(self, chat_id: str) -> None:
        await self._inner.delete(self._id(chat_id))

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._shared.release()

    def __getattr__(self, name: str) -> Any:
        """The inner store's optional methods, each with the chat id (its first argument) namespaced; those it
        lacks stay missing, as the code that looks for them expects."""
        if name not in _BY_CHAT or not callable(getattr(self._inner, name, None)):
            raise AttributeError(name)
        method = getattr(self._inner, name)

        def namespaced(chat_id: str, *args: Any, **kwargs: Any) -> Any:
            return method(self._id(chat_id), *args, **kwargs)

        return namespaced

    # -- cancels across processes --------------------------------------------------------------------------------
    def on_cancel(self, handler: CancelHandler) -> None:
        on_cancel = getattr(self._inner, "on_cancel", None)
        if on_cancel is None:
            return

        async def ours(inner: str, turn_id: str | None) -> CancelOutcome | None:
            own = self._own(inner)
            return None if own is None else await handler(own, turn_id)

        on_cancel(ours)

    async def cancel_elsewhere(self, chat_id: str, turn_id: str | None) -> CancelOutcome | None:
        elsewhere = getattr(self._inner, "cancel_elsewhere", None)
        return None if elsewhere is None else await elsewhere(self._id(chat_id), turn_id)

    # -- ChatIndex -----------------------------------------------------------------------------------------------
    def _index(self) -> ChatIndex:
        if self._shared.index is None:
            raise AttributeError("the shared store keeps no chat index")
        return self._shared.index

    async def chat_owner(self, chat_id: str) -> str | None:
        return await self._index().chat_owner(self._id(chat_id))

    async def claim_chat(self, chat_id: str, owner: str, title: str | None, now_us: int) -> bool:
        return await self._index().claim_chat(self._id(chat_id), owner, title, now_us)

    async def forget_chat(self, chat_id: str) -> None:
        await self._index().forget_chat(self._id(chat_id))

    async def chat_stored(self, chat_id: str) -> bool:
        return await self._index().chat_stored(self._id(chat_id))

    async def owned_chats(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[ChatEntry]:
        """The owner's chats of this agency: the shared index's pages read on until `limit` are found."""
        index, found = self._index(), list[ChatEntry]()
        cursor = None if after is None else (after[0], self._prefix + after[1])
        while len(found) < limit:
            page = await index.owned_chats(owner, cursor, limit)
            found += [dataclasses.replace(entry, chat_id=own) for entry in page
                      if (own := self._own(entry.chat_id)) is not None]
            if len(page) < limit:
                break
            cursor = page[-1].position
        return found[:limit]


_BY_CHAT = frozenset({"load_after", "version", "put_attachments", "load_attachments", "turn_lock", "end_turn"})
"""The optional store methods that take a chat id first."""


def namespaced_stores(store: ThreadStore, names: Collection[str]) -> Mapping[str, ThreadStore]:
    """One view of `store` per agency name."""
    shared = SharedStore(store, len(names))
    return {name: NamespacedStore(shared, name) for name in names}

