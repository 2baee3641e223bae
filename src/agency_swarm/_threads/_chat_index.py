"""Who owns each chat, its title and last activity: the ChatIndex a server keeps beside a store, in memory here.

An index entry is made when a principal first posts to a chat id and never changes owner afterwards: deleting the
chat marks the entry deleted (the owner may post to the id again; nobody else may), so an owner once read stays
true and can be cached. `_chat_indexes.chat_index_for(store)` gives the index of the built-in stores: memory (this
module), file (`_file_chat_index`), SQLite and PostgreSQL (`_sql_chat_index`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

MAX_TITLE_CHARS = 80
"""A chat's title is its first user message, whitespace collapsed, cut to this many characters."""


def title_of(message: object) -> str | None:
    """The title a first message gives its chat: None for what is not text (or only whitespace)."""
    if not isinstance(message, str):
        return None
    text = " ".join(message[: MAX_TITLE_CHARS * 4].split())
    if not text:
        return None
    return text if len(text) <= MAX_TITLE_CHARS else text[: MAX_TITLE_CHARS - 1].rstrip() + "…"


@dataclass(frozen=True, slots=True)
class ChatEntry:
    """A chat as its owner's list shows it; times in microseconds since the epoch (UTC)."""

    chat_id: str
    owner: str
    title: str | None
    created_us: int
    active_us: int

    @property
    def position(self) -> tuple[int, str]:
        """Where the entry sorts in a list, newest activity first (ties: the larger chat id first)."""
        return self.active_us, self.chat_id


@runtime_checkable
class ChatIndex(Protocol):
    """Chat owners, titles and activity. Every method is async; failures raise StoreError."""

    async def chat_owner(self, chat_id: str) -> str | None:
        """The chat's owner, or None when no principal has claimed it."""
        ...

    async def claim_chat(self, chat_id: str, owner: str, title: str | None, now_us: int) -> bool:
        """Make `owner` the chat's owner if it has none, and its last activity `now_us`; True when the chat is
        `owner`'s (now or already), False when another owner holds it. A deleted entry of `owner` comes back with
        `title`; a live one keeps its title (or takes `title` when it had none)."""
        ...

    async def forget_chat(self, chat_id: str) -> None:
        """Mark the chat deleted: out of its owner's list; its owner stays its owner."""
        ...

    async def owned_chats(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[ChatEntry]:
        """`owner`'s chats that are not deleted, newest activity first, starting after the `position` `after`."""
        ...

    async def chat_stored(self, chat_id: str) -> bool:
        """Whether the store holds items of the chat (a chat stored before it had an owner)."""
        ...


@dataclass(slots=True)
class _Row:
    owner: str
    title: str | None
    created_us: int
    active_us: int
    deleted: bool = False

    def entry(self, chat_id: str) -> ChatEntry:
        return ChatEntry(chat_id, self.owner, self.title, self.created_us, self.active_us)

    def to_json(self, chat_id: str) -> dict[str, Any]:
        return {"c": chat_id, "o": self.owner, "t": self.title, "cr": self.created_us, "a": self.active_us,
                "d": self.deleted}


class MemoryChatIndex:
    """The index in this process's memory (and the file index's working copy); `stored` answers `chat_stored`."""

    def __init__(self, stored: Callable[[str], bool]) -> None:
        self._stored = stored
        self.rows: dict[str, _Row] = {}
        self._by_owner: dict[str, set[str]] = {}

    def put(self, chat_id: str, row: _Row) -> None:
        old = self.rows.get(chat_id)
        if old is not None and old.owner != row.owner:
            self._by_owner[old.owner].discard(chat_id)
        self.rows[chat_id] = row
        self._by_owner.setdefault(row.owner, set()).add(chat_id)

    def claimed(self, chat_id: str, owner: str, title: str | None, now_us: int) -> _Row | None:
        """The row as it is once `owner` claims the chat (a new object: `put` stores it), or None when another
        owner holds it."""
        row = self.rows.get(chat_id)
        if row is None:
            return _Row(owner, title, now_us, now_us)
        if row.owner != owner:
            return None
        active = max(row.active_us, now_us)
        if row.deleted:
            return _Row(owner, title, now_us, active)
        return _Row(owner, title if row.title is None else row.title, row.created_us, active)

    async def chat_owner(self, chat_id: str) -> str | None:
        row = self.rows.get(chat_id)
        return None if row is None else row.owner

    async def claim_chat(self, chat_id: str, owner: str, title: str | None, now_us: int) -> bool:
        row = self.claimed(chat_id, owner, title, now_us)
        if row is not None:
            self.put(chat_id, row)
        return row is not None

    async def forget_chat(self, chat_id: str) -> None:
        row = self.rows.get(chat_id)
        if row is not None:
            row.deleted = True

    async def owned_chats(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[ChatEntry]:
        rows = ((chat_id, self.rows[chat_id]) for chat_id in self._by_owner.get(owner, ()))
        live = (row.entry(chat_id) for chat_id, row in rows if not row.deleted)
        shown = (entry for entry in live if after is None or entry.position < after)
        return heapq.nlargest(limit, shown, key=lambda entry: entry.position)

    async def chat_stored(self, chat_id: str) -> bool:
        return self._stored(chat_id)
