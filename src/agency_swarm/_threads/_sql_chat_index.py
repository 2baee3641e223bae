"""The SQL stores' ChatIndex: `agency_swarm_chat_owners`, one row per chat, on SQLite and PostgreSQL alike.

`agency_swarm_chat_owners(chat_id, owner, title, created_us, active_us, deleted)`, indexed by (owner, active_us,
chat_id) for each owner's list, newest activity first. A claim is one statement (an upsert that changes nothing
when another owner holds the row), so two workers claiming one chat at once cannot both win. The table is made on
the index's first use in each process.
"""

from __future__ import annotations

import abc
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ._chat_index import ChatEntry
from ._postgres import PostgresBackend
from ._sqlite import SQLiteBackend, _retry_while_locked

if TYPE_CHECKING:
    from ._sql_store import SQLThreadStore

T = TypeVar("T")

_CREATE = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_chat_owners (chat_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
    "title TEXT, created_us BIGINT NOT NULL, active_us BIGINT NOT NULL, deleted BOOLEAN NOT NULL DEFAULT FALSE)",
    "CREATE INDEX IF NOT EXISTS agency_swarm_chat_owners_by_activity "
    "ON agency_swarm_chat_owners (owner, active_us, chat_id)",
)
_OWNER = "SELECT owner FROM agency_swarm_chat_owners WHERE chat_id = {0}"
_CLAIM = (
    "INSERT INTO agency_swarm_chat_owners AS o (chat_id, owner, title, created_us, active_us, deleted) "
    "VALUES ({0}, {1}, {2}, {3}, {3}, FALSE) ON CONFLICT (chat_id) DO UPDATE SET "
    "title = CASE WHEN o.deleted THEN excluded.title ELSE COALESCE(o.title, excluded.title) END, "
    "created_us = CASE WHEN o.deleted THEN excluded.created_us ELSE o.created_us END, "
    "active_us = CASE WHEN o.active_us > excluded.active_us THEN o.active_us ELSE excluded.active_us END, "
    "deleted = FALSE WHERE o.owner = excluded.owner RETURNING owner"
)
_FORGET = "UPDATE agency_swarm_chat_owners SET deleted = TRUE WHERE chat_id = {0} AND NOT deleted"
_LIST = (
    "SELECT chat_id, owner, title, created_us, active_us FROM agency_swarm_chat_owners "
    "WHERE owner = {0} AND NOT deleted{after} ORDER BY active_us DESC, chat_id DESC LIMIT {limit}"
)
_AFTER = " AND (active_us, chat_id) < ({0}, {1})"
_STORED = "SELECT 1 FROM agency_swarm_items WHERE chat_id = {0} LIMIT 1"
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('agency_swarm_chat_owners schema'))"


def _entry(row: Any) -> ChatEntry:
    return ChatEntry(str(row[0]), str(row[1]), None if row[2] is None else str(row[2]), int(row[3]), int(row[4]))


class _SQLChatIndex(abc.ABC):
    """What both databases share: each operation through the store's guard (StoreError, the URL's password
    redacted), the table made once per process."""

    def __init__(self, store: SQLThreadStore) -> None:
        self._store = store
        self._made = False

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if not self._made:
            await self._store._guard("make the chat index", self._make)
            self._made = True
        return await self._store._guard(operation, call)

    @abc.abstractmethod
    async def _make(self) -> None: ...

    @abc.abstractmethod
    async def _fetch(self, query: str, *args: Any) -> list[Any]: ...

    @abc.abstractmethod
    def _list_query(self, after: tuple[int, str] | None, limit: int) -> tuple[str, list[Any]]: ...

    async def chat_owner(self, chat_id: str) -> str | None:
        rows = await self._call(f"read the owner of chat {chat_id!r}", lambda: self._fetch(self._owner, chat_id))
        return None if not rows else str(rows[0][0])

    async def claim_chat(self, chat_id: str, owner: str, title: str | None, now_us: int) -> bool:
        rows = await self._call(
            f"claim chat {chat_id!r}", lambda: self._fetch(self._claim, chat_id, owner, title, now_us)
        )
        return bool(rows)

    async def forget_chat(self, chat_id: str) -> None:
        await self._call(f"forget chat {chat_id!r}", lambda: self._fetch(self._forget, chat_id))

    async def owned_chats(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[ChatEntry]:
        query, args = self._list_query(after, limit)
        rows = await self._call("list chats", lambda: self._fetch(query, owner, *args))
        return [_entry(row) for row in rows]

    async def chat_stored(self, chat_id: str) -> bool:
        rows = await self._call(f"look for chat {chat_id!r}", lambda: self._fetch(self._stored, chat_id))
        return bool(rows)

    _owner = _claim = _forget = _stored = ""


class PostgresChatIndex(_SQLChatIndex):
    _owner, _forget, _stored = _OWNER.format("$1"), _FORGET.format("$1"), _STORED.format("$1")
    _claim = _CLAIM.format("$1", "$2", "$3", "$4::bigint")

    def __init__(self, store: SQLThreadStore, backend: PostgresBackend) -> None:
        super().__init__(store)
        self._backend = backend

    async def _make(self) -> None:
        pool = await self._backend._pool()  # the store's own tables first
        async with pool.acquire() as conn:
            if await conn.fetchval("SELECT to_regclass('agency_swarm_chat_owners')") is not None:
                return
            async with conn.transaction():  # concurrent CREATE ... IF NOT EXISTS can still collide
                await conn.execute(_SCHEMA_LOCK)
                for statement in _CREATE:
                    await conn.execute(statement)

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        pool = await self._backend._pool()
        rows: list[Any] = await pool.fetch(query, *args)
        return rows

    def _list_query(self, after: tuple[int, str] | None, limit: int) -> tuple[str, list[Any]]:
        if after is None:
            return _LIST.format("$1", after="", limit="$2"), [limit]
        return _LIST.format("$1", after=_AFTER.format("$2::bigint", "$3"), limit="$4"), [*after, limit]


class SQLiteChatIndex(_SQLChatIndex):
    _owner, _forget, _stored = _OWNER.format("?"), _FORGET.format("?"), _STORED.format("?")
    _claim = _CLAIM.format(":p1", ":p2", ":p3", ":p4")  # named: `?1` with a sequence is deprecated (3.12+)

    def __init__(self, store: SQLThreadStore, backend: SQLiteBackend) -> None:
        super().__init__(store)
        self._backend = backend

    async def _make(self) -> None:
        def make() -> None:
            conn = self._backend._sync_connection()
            for statement in _CREATE:
                _retry_while_locked(lambda statement=statement: conn.execute(statement))  # type: ignore[misc]

        await self._backend._run(make)

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        params: Any = {f"p{number}": arg for number, arg in enumerate(args, 1)} if ":p1" in query else args

        def fetch() -> list[Any]:
            cursor: sqlite3.Cursor = self._backend._sync_connection().execute(query, params)
            return cursor.fetchall()

        return await self._backend._run(fetch)

    def _list_query(self, after: tuple[int, str] | None, limit: int) -> tuple[str, list[Any]]:
        if after is None:
            return _LIST.format("?", after="", limit="?"), [limit]
        return _LIST.format("?", after=_AFTER.format("?", "?"), limit="?"), [*after, limit]


def sql_chat_index(store: SQLThreadStore) -> _SQLChatIndex:
    backend = store._backend
    if isinstance(backend, PostgresBackend):
        return PostgresChatIndex(store, backend)
    assert isinstance(backend, SQLiteBackend)
    return SQLiteChatIndex(store, backend)
