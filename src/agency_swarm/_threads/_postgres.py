"""The PostgreSQL backend (asyncpg): a pool per event loop, one-statement appends, turn locks between processes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import ConfigError, StoreError
from . import _sql_schema as sql
from ._store import ChatVersion

logger = logging.getLogger("agency_swarm")

POSTGRES_POOL_SIZE = 4
POSTGRES_CONNECT_TIMEOUT_S = 10.0
POSTGRES_CLOSE_TIMEOUT_S = 10.0
TURN_LOCK_RETRY_S = 0.5
"""A chat locked by another process is tried again this often: its holder's NOTIFY usually comes first, but a
holder that died notifies nobody (the server frees a dead session's locks silently)."""

# Turn locks: session-level advisory locks on (namespace, chat key). They are taken inside a function so that the
# chat's version is read by a statement that starts after the lock was granted: read in the same statement, it
# would come from a snapshot taken before, and could miss the last items of the turn that just let go.
_TURN_CHANNEL = "agency_swarm_turn"
_TAKE_TURN_SIGNATURE = "agency_swarm_take_turn(integer,text)"
_SQL_CREATE_TAKE_TURN = """
CREATE OR REPLACE FUNCTION agency_swarm_take_turn(lock_key int4, chat text,
    OUT taken boolean, OUT chat_version bigint, OUT chat_cleared bigint)
LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
    taken := pg_try_advisory_lock(hashtext('agency_swarm_turn'), lock_key);
    IF taken THEN
        SELECT c.version, c.cleared INTO chat_version, chat_cleared FROM agency_swarm_chats c WHERE c.chat_id = chat;
    END IF;
END
$body$"""
_SQL_TRY_TURN = "SELECT taken, chat_version, chat_cleared FROM agency_swarm_take_turn($1::int4, $2::text)"
_SQL_END_TURN = (
    "SELECT pg_advisory_unlock(hashtext('agency_swarm_turn'), $1::int4), c.version, c.cleared "
    "FROM (SELECT pg_notify('agency_swarm_turn', $1::int4::text)) AS notified "
    "LEFT JOIN agency_swarm_chats c ON c.chat_id = $2::text"
)
_SQL_APPEND = """
WITH bumped AS (
    INSERT INTO agency_swarm_chats AS c (chat_id, version, cleared) VALUES ($1::text, $4::bigint, 0)
    ON CONFLICT (chat_id) DO UPDATE SET version = c.version + $4::bigint
    RETURNING c.version
)
INSERT INTO agency_swarm_items (chat_id, thread_key, seq, item, version)
SELECT $1::text, $2::text, bumped.version - $4::bigint + t.n - 1, t.item, bumped.version - $4::bigint + t.n
FROM bumped, unnest($3::text[]) WITH ORDINALITY AS t(item, n)"""
_MIGRATION = (
    sql.CREATE_ITEMS.format(int="BIGINT"),
    sql.ADD_VERSION_COLUMN.format(int="BIGINT").replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"),
    sql.CREATE_VERSION_INDEX,
    sql.CREATE_CHATS.format(int="BIGINT"),
    sql.VERSION_EXISTING_CHATS + " ON CONFLICT (chat_id) DO NOTHING",
    _SQL_CREATE_TAKE_TURN,  # last: its presence says the schema is complete
)


async def _nothing_to_reset(_connection: Any) -> None:
    """Pool connections keep no session state (no SET, LISTEN or session lock): no reset round trip on release."""


@dataclass
class _ThreadLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def turn_lock_key(chat_id: str) -> int:
    """A chat's 32-bit advisory lock key, the same in every process (two chats sharing one only wait for each other)."""
    return int.from_bytes(hashlib.blake2b(chat_id.encode("utf-8"), digest_size=4).digest(), "big", signed=True)


class _TurnLocks:
    """Every turn lock of one event loop's turns, held on ONE dedicated PostgreSQL session.

    Session-level advisory locks, taken with `pg_try_advisory_lock` so the session never blocks and one connection
    serves any number of running turns. A chat busy in another process is waited for here: its holder's unlock
    comes with a NOTIFY, and a try every TURN_LOCK_RETRY_S covers a holder that died. Session locks are re-entrant
    (a second turn of this process would "get" a lock this session holds), so this process's turns of one chat
    queue on an asyncio lock first. docs/design/serving.md compares this with a connection per running turn.
    """

    def __init__(self, dsn: str, asyncpg: Any) -> None:
        self._dsn, self._asyncpg = dsn, asyncpg
        self._conn: Any = None
        self._queries = asyncio.Lock()  # one statement at a time on the session
        self._local: dict[int, _ThreadLock] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._orphans: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def acquire(self, chat_id: str) -> tuple[int, Any, ChatVersion]:
        """Wait until this process holds the chat's turn lock; returns what `release` needs and the chat's version,
        read after the lock was taken."""
        key = turn_lock_key(chat_id)
        entry = self._local.get(key)
        if entry is None:
            entry = self._local[key] = _ThreadLock()
        entry.users += 1
        try:
            await entry.lock.acquire()
            try:
                session, version = await self._take(key, chat_id)
                return key, session, version
            except BaseException:
                entry.lock.release()
                raise
        except BaseException:
            self._forget(key, entry)
            raise

    async def release(self, held: tuple[int, Any, ChatVersion], chat_id: str) -> None:
        """Unlock; `held`'s version becomes the one the turn left behind (unchanged if the unlock failed)."""
        key, session, version = held
        try:
            await asyncio.shield(self._unlock(key, session, chat_id, version))  # a cancelled turn still unlocks
        finally:
            entry = self._local[key]
            entry.lock.release()
            self._forget(key, entry)

    def _forget(self, key: int, entry: _ThreadLock) -> None:
        entry.users -= 1
        if entry.users == 0:
            del self._local[key]

    async def _take(self, key: int, chat_id: str) -> tuple[Any, ChatVersion]:
        wakeup = self._wakeups[key] = asyncio.Event()  # one taker per key at a time: the asyncio lock above
        try:
            while True:
                wakeup.clear()  # before trying: an unlock between the try and the wait is not missed
                attempt = asyncio.ensure_future(self._query(_SQL_TRY_TURN, key, chat_id))
                try:
                    session, (taken, version, cleared) = await asyncio.shield(attempt)
                except asyncio.CancelledError:
                    attempt.add_done_callback(self._unlock_if_taken(key))  # granted as we were cancelled?
                    raise
                if taken:
                    return session, ChatVersion(version or 0, cleared or 0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), TURN_LOCK_RETRY_S)
        finally:
            del self._wakeups[key]

    def _unlock_if_taken(self, key: int) -> Callable[[asyncio.Future[Any]], None]:
        def done(attempt: asyncio.Future[Any]) -> None:
            if attempt.cancelled() or attempt.exception() is not None or not attempt.result()[1][0]:
                return
            task = asyncio.ensure_future(self._unlock(key, attempt.result()[0], None, None))
            self._orphans.add(task)
            task.add_done_callback(self._orphans.discard)

        return done

    async def _query(self, query: str, key: int, chat_id: str) -> tuple[Any, Any]:
        async with self._queries:
            if self._closed:  # a turn still waiting when the store closed must not open a new session
                raise StoreError("The thread store was closed while a turn waited for its chat's lock.")
            session = self._conn
            if session is None or session.is_closed():
                session = self._conn = await self._connect()
            return session, await session.fetchrow(query, key, chat_id)

    async def _connect(self) -> Any:
        session = await self._asyncpg.connect(self._dsn, timeout=POSTGRES_CONNECT_TIMEOUT_S)
        try:
            await session.add_listener(_TURN_CHANNEL, self._notified)
        except BaseException:
            session.terminate()
            raise
        return session

    def _notified(self, _session: Any, _pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            wakeup = self._wakeups.get(int(payload))
            if wakeup is not None:
                wakeup.set()

    async def _unlock(self, key: int, session: Any, chat_id: str | None, version: ChatVersion | None) -> None:
        async with self._queries:
            if session is not self._conn or session.is_closed():
                return  # that session ended, and its locks with it
            try:
                row = await session.fetchrow(_SQL_END_TURN, key, chat_id)
                if version is not None:
                    version.version, version.cleared = row[1] or 0, row[2] or 0
            except Exception as error:
                # A lock that cannot be released would keep the chat busy everywhere until this process exits:
                # ending the session frees it (and this process's other turn locks; those turns carry on unlocked).
                session.terminate()
                self._conn = None
                logger.warning("Turn lock session closed after a failed unlock: %s", type(error).__name__)

    async def close(self) -> None:
        async with self._queries:
            self._closed = True
            session, self._conn = self._conn, None
        if session is not None and not session.is_closed():
            try:
                await asyncio.wait_for(session.close(), POSTGRES_CLOSE_TIMEOUT_S)
            except BaseException:
                session.terminate()
                raise


class PostgresBackend:
    """asyncpg pools, one per event loop that used the store (asyncpg connections belong to the loop that opened them).

    An append is ONE statement, so one round trip: it raises the chat's version and inserts the items numbered by
    it (see `_sql_schema`). The chat row's lock orders appends to one chat across processes in commit order, so
    two processes appending at once can neither collide nor leave a gap a reader could pass. Chosen over a
    BIGSERIAL id because a sequence hands out numbers in call order, not commit order, so a reader could see item
    n+1 before item n. Within this process, appends to one thread queue on an asyncio lock so they land in call
    order even when a pool runs them on different connections.

    Turn locks (`lock_turn`) live on one more connection per event loop: `_TurnLocks`.
    """

    def __init__(self, dsn: str, asyncpg: Any) -> None:
        self._dsn = dsn
        self._asyncpg = asyncpg
        self.errors: tuple[type[BaseException], ...] = (
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
        )
        self._pools: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] = {}
        self._pools_lock = threading.Lock()  # loops in other threads may open pools at the same time
        self._thread_locks: dict[tuple[asyncio.AbstractEventLoop, str, str], _ThreadLock] = {}
        self._turn_locks: dict[asyncio.AbstractEventLoop, _TurnLocks] = {}

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
                if await conn.fetchval("SELECT to_regprocedure($1)", _TAKE_TURN_SIGNATURE) is None:
                    async with conn.transaction():  # concurrent CREATE ... IF NOT EXISTS can still collide
                        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agency_swarm_items schema'))")
                        for statement in _MIGRATION:
                            await conn.execute(statement)
        except BaseException:
            pool.terminate()
            raise
        return pool

    def _turn_locks_here(self) -> _TurnLocks:
        loop = asyncio.get_running_loop()
        with self._pools_lock:
            locks = self._turn_locks.get(loop)
            if locks is None:
                locks = self._turn_locks[loop] = _TurnLocks(self._dsn, self._asyncpg)
        return locks

    async def lock_turn(self, chat_id: str) -> tuple[_TurnLocks, tuple[int, Any, ChatVersion]]:
        await self._pool()  # opened once per loop: the schema (and the locking function) exist from then on
        locks = self._turn_locks_here()
        return locks, await locks.acquire(chat_id)

    async def unlock_turn(self, held: tuple[_TurnLocks, tuple[int, Any, ChatVersion]], chat_id: str) -> None:
        locks, lock = held
        await locks.release(lock, chat_id)

    @contextlib.asynccontextmanager
    async def _thread_lock(self, chat_id: str, thread_key: str) -> AsyncIterator[None]:
        key = (asyncio.get_running_loop(), chat_id, thread_key)
        entry = self._thread_locks.get(key)
        if entry is None:
            entry = self._thread_locks[key] = _ThreadLock()
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
        async with self._thread_lock(chat_id, thread_key):
            pool = await self._pool()
            await pool.execute(_SQL_APPEND, chat_id, thread_key, encoded, len(encoded))

    async def list_chats(self) -> list[str]:
        pool = await self._pool()
        return [str(row[0]) for row in await pool.fetch(sql.LIST)]

    async def delete(self, chat_id: str) -> None:
        pool = await self._pool()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(sql.DELETE_ITEMS.format("$1"), chat_id)
            await conn.execute(sql.CLEAR_CHAT.format("$1"), chat_id)

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
        raise ConfigError(
            f"Thread store URL {redacted!r} needs asyncpg: pip install 'agency-swarm-sdk[postgres]'."
        ) from exc
