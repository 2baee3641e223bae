"""`chat_index_for(store)`: the ChatIndex kept with a store, one per store instance, for every built-in store."""

from __future__ import annotations

import weakref
from typing import Any

from ._chat_index import ChatIndex, MemoryChatIndex
from ._store import MemoryThreadStore, ThreadStore

_indexes: weakref.WeakKeyDictionary[Any, ChatIndex] = weakref.WeakKeyDictionary()


def chat_index_for(store: ThreadStore) -> ChatIndex | None:
    """The index kept with `store`: the store itself when it is a ChatIndex, else the built-in stores' own (one per
    store instance, so apps sharing a store share it); None for a store this package does not know."""
    if isinstance(store, ChatIndex):
        return store
    found = _indexes.get(store)
    if found is not None:
        return found
    index = _new_index(store)
    if index is not None:
        _indexes[store] = index
    return index


def _new_index(store: ThreadStore) -> ChatIndex | None:
    from ._file_store import FileThreadStore
    from ._sql_store import SQLThreadStore

    if isinstance(store, MemoryThreadStore):
        return MemoryChatIndex(lambda chat_id: bool(store._chats.get(chat_id)))
    if isinstance(store, FileThreadStore):
        from ._file_chat_index import FileChatIndex

        return FileChatIndex(store)
    if isinstance(store, SQLThreadStore):
        from ._sql_chat_index import sql_chat_index

        return sql_chat_index(store)
    return None
