"""The PostgreSQL backend (asyncpg): a pool per event loop, one-statement appends, turn locks between processes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from .._base._errors import ConfigError, TurnLockLost
from .._base._extras import extra_message
from . import _sql_schema as sql
from ._pg_cancel import CancelChannel
from ._pg_turn_locks import (
    LOCK_SESSION_TIMEOUT_S,
    POSTGRES_CLOSE_TIMEOUT_S,
    POSTGRES_CONNECT_TIMEOUT_S,
    SQL_CREATE_TAKE_TURN,
    TAKE_TURN_SIGNATURE,
    HeldTurn,
    KeyLock,
    TurnLocks,
)
from ._running import CancelOutcome
from ._store import ChatVersion

POSTGRES_POOL_SIZE = 4
# $5: the turn's fencing token, NULL for an append made outside a turn lock of this process (not checked then).
# A refused append updates no chat row, so it inserts no item: "INSERT 0 0".
_SQL_APPEND = """
WITH bumped AS (
    INSERT INTO agency_swarm_chats AS c (chat_id, version, cleared, lock_token)
    VALUES ($1::text, $4::bigint, 0, COALESCE($5::bigint, 0))
    ON CONFLICT (chat_id) DO UPDATE SET version = c.version + $4::bigint
    WHERE $5::bigint IS NULL OR c.lock_token = $5::bigint
    RETURNING c.version
)
INSERT INTO agency_swarm_items (chat_id, thread_key, seq, item, version)
SELECT $1::text, $2::text, bumped.version - $4::bigint + t.n - 1, t.item, bumped.version - $4::bigint + t.n
FROM bumped, unnest($3::text[]) WITH ORDINALITY AS t(item, n)"""
# One statement, so no transaction stays open between round trips (a client cut off half-way through one would keep
# the chat row locked until the server noticed); fenced like an append. Returns 1 unless the fence refused it.
_SQL_DELETE = """
WITH chat AS (
    UPDATE agency_swarm_chats SET version = version + 1, cleared = version + 1
    WHERE chat_id = $1::text AND ($2::bigint IS NULL OR lock_token = $2::bigint)
    RETURNING chat_id
), gone AS (
    DELETE FROM agency_swarm_items WHERE chat_id = $1::text AND ($2::bigint IS NULL OR EXISTS (SELECT FROM chat))
), unheld AS (
    DELETE FROM agency_swarm_blob_holders
    WHERE chat_id = $1::text AND ($2::bigint IS NULL OR EXISTS (SELECT FROM chat)) RETURNING digest
), lowered AS (
    UPDATE agency_swarm_blobs b SET holders = b.holders - 1 FROM unheld u WHERE b.digest = u.digest
    RETURNING b.digest, b.holders
)
SELECT CASE WHEN $2::bigint IS NULL OR EXISTS (SELECT FROM chat) THEN 1 ELSE 0 END,
    ARRAY(SELECT digest FROM lowered WHERE holders <= 0)"""
# A blob's row is written, or its count of holders raised, only when the chat did not hold it yet.
_SQL_PUT_BLOB = """
WITH held AS (
    INSERT INTO agency_swarm_blob_holders (chat_id, digest) VALUES ($1::text, $2::text)
    ON CONFLICT DO NOTHING RETURNING digest
)
INSERT INTO agency_swarm_blobs AS b (digest, data, holders) SELECT $2::text, $3::bytea, 1 FROM held
ON CONFLICT (digest) DO UPDATE SET holders = b.holders + 1"""
_SQL_LOAD_BLOBS = (
    "SELECT b.digest, b.data FROM agency_swarm_blob_holders h JOIN agency_swarm_blobs b ON b.digest = h.digest "
    "WHERE h.chat_id = $1::text AND h.digest = ANY($2::text[])"
)
_BLOB_MIGRATION = (  # the holders table last: its presence says they exist
    sql.CREATE_BLOBS.format(blob="BYTEA", int="BIGINT"),
    sql.CREATE_BLOB_HOLDERS,
)
_BLOBS_DONE = (
    "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = 'agency_swarm_blob_holders' AND n.nspname = current_schema())"
)
_ADD_LOCK_TOKEN = "ALTER TABLE agency_swarm_chats ADD COLUMN IF NOT EXISTS lock_token BIGINT NOT NULL DEFAULT 0"
_MIGRATION = (
    sql.CREATE_ITEMS.format(int="BIGINT"),
    sql.ADD_VERSION_COLUMN.format(int="BIGINT").replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"),
    sql.CREATE_VERSION_INDEX,
    sql.CREATE_CHATS.format(int="BIGINT"),
    sql.VERSION_EXISTING_CHATS + " ON CONFLICT (chat_id) DO NOTHING",
    _ADD_LOCK_TOKEN,
    SQL_CREATE_TAKE_TURN,  # last: its presence says the schema is complete
)


_SCHEMA_DONE = (  # in the schema the migration makes it in: the first of the search path
    "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
    "WHERE p.proname = $1 AND n.nspname = current_schema())"
)


async def _nothing_to_reset(_connection: Any) -> None:
    """Pool connections keep no session state (no SET, LISTEN or session lock): no reset round trip on release."""


class PostgresBackend:
    """asyncpg pools, one per event loop that used the store (asyncpg connections belong to the loop that opened them).

    An append is ONE statement, so one round trip: it raises the chat's version and inserts the items numbered by
    it (see `_sql_schema`). The chat row's lock orders appends to one chat across processes in commit order, so
    two processes appending at once can neither collide nor leave a gap a reader could pass. Chosen over a
    BIGSERIAL id because a sequence hands out numbers in call order, not commit order, so a reader could see item
    n+1 before item n. Within this process, appends to one thread queue on an asyncio lock so they land in call
    order even when a pool runs them on different connections.

    Turn locks (`lock_turn`) live on one more connection per event loop: `TurnLocks`. While this process holds a
    chat's turn lock, its appends and deletes of that chat carry the hold's fencing token, and the statement itself
    refuses them (TurnLockLost) once another process has taken the chat since: the lock was lost meanwhile.
    """

    def __init__(
        self, dsn: str, asyncpg: Any, *, url: str, lock_session_timeout: float | None = LOCK_SESSION_TIMEOUT_S
    ) -> None:
        self._dsn = dsn
        self._asyncpg = asyncpg
        self._url = url  # redacted, for messages
        self._lock_session_timeout = lock_session_timeout
        self.errors: tuple[type[BaseException], ...] = (
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
        )
        self._pools: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] = {}
        self._pools_lock = threading.Lock()  # loops in other threads may open pools at the same time
        self._thread_locks: dict[tuple[asyncio.AbstractEventLoop, str, str], KeyLock] = {}
        self._turn_locks: dict[asyncio.AbstractEventLoop, TurnLocks] = {}
        self.cancels = CancelChannel([])
        """The managers on this store that answer cancels other processes ask for (`_pg_cancel`)."""

    async def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._pools_lock:
            task = self._pools.get(loop)
            if task is None:
                task = self._pools[loop] = loop.create_task(self._open_pool())
                task.add_done_callback(self._forget_failed_pool)
        return await asyncio.shield(task)  # a cancelled caller does not cancel the pool others are waiting for

    def _forget_failed_pool(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            with self._pools_lock:
                for loop, known in list(self._pools.items()):
                    if known is task:
                        del self._pools[loop]

    async def _open_pool(self) -> Any:
        pool = await self._asyncpg.create_pool(
            self._dsn, min_size=1, max_size=POSTGRES_POOL_SIZE, timeout=POSTGRES_CONNECT_TIMEOUT_S,
            reset=_nothing_to_reset,
        )
        try:
            async with pool.acquire() as conn:
                if await conn.fetchval("SELECT to_regprocedure($1)", TAKE_TURN_SIGNATURE) is None:
                    async with conn.transaction():  # concurrent CREATE ... IF NOT EXISTS can still collide
                        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agency_swarm_items schema'))")
                        # Made meanwhile by the worker we waited for? Then not again: its ALTERs would wait for
                        # that worker's appends while holding what they need (a deadlock, seen with 3 new workers).
                        # Read from pg_proc with this statement's snapshot: to_regprocedure's cache may still hold
                        # the "no such function" of the check above (invalidations wait for the next transaction).
                        if not await conn.fetchval(_SCHEMA_DONE, TAKE_TURN_SIGNATURE.partition("(")[0]):
                            for statement in _MIGRATION:
                                await conn.execute(statement)
                if not await conn.fetchval(_BLOBS_DONE):  # added after the schema above: checked on its own
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agency_swarm_items schema'))")
                        for statement in _BLOB_MIGRATION:
                            await conn.execute(statement)
        except BaseException:
            pool.terminate()
            raise
        return pool

    def _turn_locks_here(self) -> TurnLocks:
        loop = asyncio.get_running_loop()
        with self._pools_lock:
            locks = self._turn_locks.get(loop)
            if locks is None:
                locks = self._turn_locks[loop] = TurnLocks(
                    self._dsn, self._asyncpg, self._lock_session_timeout, self.cancels
                )
        return locks

    async def lock_turn(self, chat_id: str) -> tuple[TurnLocks, HeldTurn]:
        await self._pool()  # opened once per loop: the schema (and the locking function) exist from then on
        locks = self._turn_locks_here()
        return locks, await locks.acquire(chat_id)

    async def cancel_elsewhere(self, chat_id: str, turn_id: str | None) -> CancelOutcome | None:
        return await self._turn_locks_here().cancel_elsewhere(chat_id, turn_id)

    async def unlock_turn(self, held: tuple[TurnLocks, HeldTurn]) -> None:
        locks, lock = held
        await locks.release(lock)

    def _fence(self, chat_id: str) -> int | None:
        """The fencing token of this loop's turn of the chat, if one holds its lock (its writes carry it)."""
        locks = self._turn_locks.get(asyncio.get_running_loop())
        return None if locks is None else locks.fence(chat_id)

    def _lost(self, chat_id: str, what: str) -> TurnLockLost:
        return TurnLockLost(
            f"Thread store {self._url}: the turn of chat {chat_id!r} lost its turn lock (the session holding it "
            f"ended) and another turn has taken the chat since; {what}.",
            chat_id=chat_id,
        )

    @contextlib.asynccontextmanager
    async def _thread_lock(self, chat_id: str, thread_key: str) -> AsyncIterator[None]:
        key = (asyncio.get_running_loop(), chat_id, thread_key)
        entry = self._thread_locks.get(key)
        if entry is None:
            entry = self._thread_locks[key] = KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._thread_locks[key]

    async def load(self, chat_id: str) -> list[tuple[str, str]]:
        pool = await self._pool()
        rows = await pool.fetch(sql.LOAD.format("$1"), chat_id)
        return [(str(row[0]), str(row[1])) for row in rows]

    async def load_after(self, chat_id: str, version: int) -> list[tuple[str, str]]:
        pool = await self._pool()
        rows = await pool.fetch(sql.LOAD_AFTER.format("$1", "$2::bigint"), chat_id, version)
        return [(str(row[0]), str(row[1])) for row in rows]

    async def version(self, chat_id: str) -> ChatVersion:
        pool = await self._pool()
        row = await pool.fetchrow(sql.VERSION.format("$1"), chat_id)
        return ChatVersion() if row is None else ChatVersion(int(row[0]), int(row[1]))

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        token = self._fence(chat_id)
        async with self._thread_lock(chat_id, thread_key):
            pool = await self._pool()
            status = await pool.execute(_SQL_APPEND, chat_id, thread_key, encoded, len(encoded), token)
        if token is not None and status.endswith(" 0"):
            raise self._lost(chat_id, "nothing of this append was stored")

    async def list_chats(self) -> list[str]:
        pool = await self._pool()
        return [str(row[0]) for row in await pool.fetch(sql.LIST)]

    async def delete(self, chat_id: str) -> None:
        token = self._fence(chat_id)
        pool = await self._pool()
        deleted, unheld = await pool.fetchrow(_SQL_DELETE, chat_id, token)
        if not deleted:
            raise self._lost(chat_id, "the chat was not deleted")
        if unheld:  # a row-local condition: a chat that put the blob meanwhile raised its count, so it stays
            await pool.execute(f"DELETE FROM {sql.BLOBS} WHERE digest = ANY($1::text[]) AND holders <= 0", unheld)

    async def put_blobs(self, chat_id: str, blobs: dict[str, bytes]) -> None:
        pool = await self._pool()
        for digest, data in blobs.items():
            await pool.execute(_SQL_PUT_BLOB, chat_id, digest, data)

    async def load_blobs(self, chat_id: str, digests: list[str]) -> dict[str, bytes]:
        pool = await self._pool()
        rows = await pool.fetch(_SQL_LOAD_BLOBS, chat_id, digests)
        return {str(row[0]): bytes(row[1]) for row in rows}

    async def aclose(self) -> None:
        with self._pools_lock:
            pools = list(self._pools.items())
            self._pools.clear()
            turn_locks = list(self._turn_locks.items())
            self._turn_locks.clear()
        current = asyncio.get_running_loop()
        for loop, locks in turn_locks:
            if loop is current:
                await locks.close()
            elif loop.is_running():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(locks.close(), loop))
        for loop, task in pools:
            if loop is current:
                await _close_pool(task)
            elif loop.is_running():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_close_pool(task), loop))
            elif task.done() and not task.cancelled() and task.exception() is None:
                task.result().terminate()  # that loop stopped: nothing can await there any more


async def _close_pool(task: asyncio.Task[Any]) -> None:
    try:
        pool = await task
    except Exception:
        return  # it never opened; the caller that waited for it got the error
    await asyncio.wait_for(pool.close(), POSTGRES_CLOSE_TIMEOUT_S)  # on timeout close() terminates the pool


def import_asyncpg(redacted: str) -> Any:
    try:
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigError(extra_message("postgres", "asyncpg", f"Thread store URL {redacted!r}")) from exc
