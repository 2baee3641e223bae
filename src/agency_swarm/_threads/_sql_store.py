"""Thread stores on SQL databases by URL: SQLite (stdlib sqlite3 in one worker thread) and PostgreSQL (asyncpg)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from .._base._errors import ConfigError, ItemTooLarge, StoreError
from ._manager import check_chat_id
from ._store import DEFAULT_MAX_ITEM_BYTES, Item, Threads

T = TypeVar("T")
logger = logging.getLogger("agency_swarm")

TABLE = "agency_swarm_items"
SQLITE_SCHEMES = ("sqlite", "sqlite+aiosqlite")
POSTGRES_SCHEMES = ("postgresql", "postgresql+asyncpg", "postgres")
SQLITE_BUSY_TIMEOUT_MS = 10_000
POSTGRES_POOL_SIZE = 4
POSTGRES_CONNECT_TIMEOUT_S = 10.0
POSTGRES_CLOSE_TIMEOUT_S = 10.0
TURN_LOCK_RETRY_S = 0.5
"""A chat locked by another process is tried again this often: its holder's NOTIFY usually comes first, but a
holder that died notifies nobody (the server frees a dead session's locks silently)."""
_SECRET_QUERY_KEYS = frozenset({"password", "sslpassword"})
_REDACTED = "***"

_SQL_LOAD = "SELECT thread_key, item FROM agency_swarm_items WHERE chat_id = {0} ORDER BY thread_key, seq"
_SQL_LIST = "SELECT DISTINCT chat_id FROM agency_swarm_items ORDER BY chat_id"
_SQL_DELETE = "DELETE FROM agency_swarm_items WHERE chat_id = {0}"
# Turn locks: session-level advisory locks on (namespace, chat key). Appends lock another namespace: no collision.
_TURN_CHANNEL = "agency_swarm_turn"
_SQL_TRY_TURN = "SELECT pg_try_advisory_lock(hashtext('agency_swarm_turn'), $1::int4)"
_SQL_END_TURN = (
    "SELECT pg_advisory_unlock(hashtext('agency_swarm_turn'), $1::int4), pg_notify('agency_swarm_turn', $1::text)"
)
_SQL_CREATE = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_items (chat_id TEXT NOT NULL, thread_key TEXT NOT NULL, "
    "seq {seq_type} NOT NULL, item TEXT NOT NULL, PRIMARY KEY (chat_id, thread_key, seq))"
)


# --- URLs -------------------------------------------------------------------------------------------------------


def redact_url(url: str) -> str:
    """The URL with its password (user:PASSWORD@ and ?password=...) replaced by ***; safe for errors and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        scheme = url.partition("://")[0] if "://" in url else ""
        return f"{scheme}://{_REDACTED}" if scheme.isidentifier() else _REDACTED
    redacted = url
    if parts.password is not None:
        userinfo, _, hostinfo = parts.netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:{_REDACTED}@{hostinfo}"
        redacted = redacted.replace(parts.netloc, netloc, 1)
    if parts.query:
        pairs = []
        for pair in parts.query.split("&"):
            key, sep, _value = pair.partition("=")
            pairs.append(f"{key}={_REDACTED}" if sep and unquote(key).lower() in _SECRET_QUERY_KEYS else pair)
        redacted = redacted.replace("?" + parts.query, "?" + "&".join(pairs), 1)
    return redacted


def _url_secrets(url: str) -> tuple[str, ...]:
    """Every spelling of the URL's password, to scrub from driver messages that might echo it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    secrets = []
    if parts.password:
        secrets += [parts.password, unquote(parts.password)]
    for key, value in parse_qsl(parts.query):
        if key.lower() in _SECRET_QUERY_KEYS and value:
            secrets.append(value)
    return tuple(sorted(set(secrets), key=len, reverse=True))


def _sqlite_path(rest: str, redacted: str) -> str:
    """`sqlite:///rel.db` -> rel.db, `sqlite:////abs.db` -> /abs.db, `sqlite://` or `sqlite:///:memory:` -> memory."""
    if rest in ("", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigError(
            f"SQLite URL {redacted!r} names a host; use sqlite:///relative/path.db or sqlite:////absolute/path.db."
        )
    if "?" in rest or "#" in rest:
        raise ConfigError(
            f"SQLite URL {redacted!r} has query parameters, which this store does not support; "
            "for a file name with '?' or '#' use SQLiteThreadStore(path)."
        )
    path = rest[1:]
    if not path:
        raise ConfigError(f"SQLite URL {redacted!r} names no file; use sqlite:///relative/path.db.")
    return os.path.abspath(path)


# --- backends ---------------------------------------------------------------------------------------------------


class _Backend(Protocol):
    errors: tuple[type[BaseException], ...]

    async def load(self, chat_id: str) -> list[tuple[str, str]]: ...

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None: ...

    async def list_chats(self) -> list[str]: ...

    async def delete(self, chat_id: str) -> None: ...

    async def aclose(self) -> None: ...


def _retry_while_locked(statement: Callable[[], object]) -> None:
    """Run a set-up statement again while another connection holds the lock, up to the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause)  # a worker thread waiting for another process's lock, not test synchronisation
        pause = min(pause * 2, 0.05)


class _SQLiteBackend:
    """One sqlite3 connection, created and used only in this backend's single worker thread.

    The single writer makes `SELECT MAX(seq) + 1` then INSERT safe within the process, and `BEGIN IMMEDIATE` (the
    write lock taken before the read) keeps it safe against other processes on the same file. Jobs run in the
    order they were submitted, so appends to one thread land in the order the calls were made. A job cannot be
    interrupted: an append whose caller is cancelled after the job started still commits (whole, never half).
    """

    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)

    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agency-swarm-sqlite")
        self._conn: sqlite3.Connection | None = None  # only ever touched in the worker thread

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    # Everything below whose name starts with _sync runs in the worker thread.

    def _sync_connection(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        in_memory = self.path == ":memory:"
        if not in_memory:
            # create the file owner-only before SQLite does (it would honour the umask, often 0644)
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            # Switching to WAL can fail at once with "database is locked" while another connection writes: the busy
            # handler does not cover it. WAL is stored in the file, so only the first opener switches; others retry.
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                _retry_while_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            conn.execute("PRAGMA synchronous = NORMAL")
            _retry_while_locked(lambda: conn.execute(_SQL_CREATE.format(seq_type="INTEGER")))
            if not in_memory:
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.chmod(self.path + suffix, 0o600)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _sync_load(self, chat_id: str) -> list[tuple[str, str]]:
        rows = self._sync_connection().execute(_SQL_LOAD.format("?"), (chat_id,)).fetchall()
        return [(str(key), str(item)) for key, item in rows]

    def _sync_append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        conn = self._sync_connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            (next_seq,) = conn.execute(
                f"SELECT COALESCE(MAX(seq), -1) + 1 FROM {TABLE} WHERE chat_id = ? AND thread_key = ?",
                (chat_id, thread_key),
            ).fetchone()
            conn.executemany(
                f"INSERT INTO {TABLE} (chat_id, thread_key, seq, item) VALUES (?, ?, ?, ?)",
                [(chat_id, thread_key, next_seq + offset, text) for offset, text in enumerate(encoded)],
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _sync_list_chats(self) -> list[str]:
        return [str(chat_id) for (chat_id,) in self._sync_connection().execute(_SQL_LIST).fetchall()]

    def _sync_delete(self, chat_id: str) -> None:
        self._sync_connection().execute(_SQL_DELETE.format("?"), (chat_id,))

    def _sync_close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def load(self, chat_id: str) -> list[tuple[str, str]]:
        return await self._run(self._sync_load, chat_id)

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        await self._run(self._sync_append, chat_id, thread_key, encoded)

    async def list_chats(self) -> list[str]:
        return await self._run(self._sync_list_chats)

    async def delete(self, chat_id: str) -> None:
        await self._run(self._sync_delete, chat_id)

    async def aclose(self) -> None:
        try:
            await self._run(self._sync_close)  # queued after every job already submitted
        finally:
            self._executor.shutdown(wait=True)  # the worker is idle by now: this returns at once


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

    async def acquire(self, chat_id: str) -> tuple[int, Any]:
        """Wait until this process holds the chat's turn lock; returns what `release` needs."""
        key = turn_lock_key(chat_id)
        entry = self._local.get(key)
        if entry is None:
            entry = self._local[key] = _ThreadLock()
        entry.users += 1
        try:
            await entry.lock.acquire()
            try:
                return key, await self._take(key)
            except BaseException:
                entry.lock.release()
                raise
        except BaseException:
            self._forget(key, entry)
            raise

    async def release(self, held: tuple[int, Any]) -> None:
        key, session = held
        try:
            await asyncio.shield(self._unlock(key, session))  # a cancelled turn still unlocks
        finally:
            entry = self._local[key]
            entry.lock.release()
            self._forget(key, entry)

    def _forget(self, key: int, entry: _ThreadLock) -> None:
        entry.users -= 1
        if entry.users == 0:
            del self._local[key]

    async def _take(self, key: int) -> Any:
        wakeup = self._wakeups[key] = asyncio.Event()  # one taker per key at a time: the asyncio lock above
        try:
            while True:
                wakeup.clear()  # before trying: an unlock between the try and the wait is not missed
                attempt = asyncio.ensure_future(self._query(_SQL_TRY_TURN, key))
                try:
                    session, taken = await asyncio.shield(attempt)
                except asyncio.CancelledError:
                    attempt.add_done_callback(self._unlock_if_taken(key))  # granted as we were cancelled?
                    raise
                if taken:
                    return session
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), TURN_LOCK_RETRY_S)
        finally:
            del self._wakeups[key]

    def _unlock_if_taken(self, key: int) -> Callable[[asyncio.Future[Any]], None]:
        def done(attempt: asyncio.Future[Any]) -> None:
            if attempt.cancelled() or attempt.exception() is not None or not attempt.result()[1]:
                return
            task = asyncio.ensure_future(self._unlock(key, attempt.result()[0]))
            self._orphans.add(task)
            task.add_done_callback(self._orphans.discard)

        return done

    async def _query(self, query: str, key: int) -> tuple[Any, Any]:
        async with self._queries:
            if self._closed:  # a turn still waiting when the store closed must not open a new session
                raise StoreError("The thread store was closed while a turn waited for its chat's lock.")
            session = self._conn
            if session is None or session.is_closed():
                session = self._conn = await self._connect()
            return session, await session.fetchval(query, key)

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

    async def _unlock(self, key: int, session: Any) -> None:
        async with self._queries:
            if session is not self._conn or session.is_closed():
                return  # that session ended, and its locks with it
            try:
                await session.fetchrow(_SQL_END_TURN, key)
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


class _PostgresBackend:
    """asyncpg pools, one per event loop that used the store (asyncpg connections belong to the loop that opened them).

    Sequence numbers: each append takes `pg_advisory_xact_lock` on (chat, thread) and then inserts with
    `seq = MAX(seq) + 1` in the same READ COMMITTED transaction. Chosen over a BIGSERIAL id because a sequence hands
    out numbers in call order, not commit order, so a reader could see item n+1 before item n; with the lock, seq is
    dense per thread (0, 1, 2...) exactly as in SQLite, the schema is the same on both, and two processes appending
    to one thread cannot collide on the primary key. Within this process, appends to one thread additionally queue
    on an asyncio lock so they land in call order even when a pool runs them on different connections.

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
            self._dsn, min_size=1, max_size=POSTGRES_POOL_SIZE, timeout=POSTGRES_CONNECT_TIMEOUT_S
        )
        try:
            async with pool.acquire() as conn:
                if await conn.fetchval("SELECT to_regclass($1)", TABLE) is None:
                    async with conn.transaction():  # concurrent CREATE TABLE IF NOT EXISTS can still collide
                        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('agency_swarm_items schema'))")
                        await conn.execute(_SQL_CREATE.format(seq_type="BIGINT"))
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

    async def lock_turn(self, chat_id: str) -> tuple[_TurnLocks, tuple[int, Any]]:
        locks = self._turn_locks_here()
        return locks, await locks.acquire(chat_id)

    async def unlock_turn(self, held: tuple[_TurnLocks, tuple[int, Any]]) -> None:
        locks, lock = held
        await locks.release(lock)

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
        rows = await pool.fetch(_SQL_LOAD.format("$1"), chat_id)
        return [(str(row[0]), str(row[1])) for row in rows]

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        async with self._thread_lock(chat_id, thread_key):
            pool = await self._pool()
            async with pool.acquire() as conn, conn.transaction(isolation="read_committed"):
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('agency_swarm_items'), hashtext($1 || chr(31) || $2))",
                    chat_id,
                    thread_key,
                )
                # one statement per item: each one's MAX(seq) sees the rows the previous ones inserted
                await conn.executemany(
                    f"INSERT INTO {TABLE} (chat_id, thread_key, seq, item) "
                    f"SELECT $1::text, $2::text, COALESCE(MAX(seq), -1) + 1, $3::text FROM {TABLE} "
                    "WHERE chat_id = $1::text AND thread_key = $2::text",
                    [(chat_id, thread_key, text) for text in encoded],
                )

    async def list_chats(self) -> list[str]:
        pool = await self._pool()
        return [str(row[0]) for row in await pool.fetch(_SQL_LIST)]

    async def delete(self, chat_id: str) -> None:
        pool = await self._pool()
        await pool.execute(_SQL_DELETE.format("$1"), chat_id)

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


def _import_asyncpg(redacted: str) -> Any:
    try:
        return importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigError(
            f"Thread store URL {redacted!r} needs asyncpg: pip install 'agency-swarm-sdk[postgres]'."
        ) from exc


# --- the store --------------------------------------------------------------------------------------------------


class SQLThreadStore:
    """Threads in one SQL table, `agency_swarm_items(chat_id, thread_key, seq, item)`, created on first use.

    `url` is SQLAlchemy-style, no SQLAlchemy needed:
    - `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` (`sqlite+aiosqlite://` is accepted too): the
      stdlib sqlite3 module in one worker thread per store; WAL journal, synchronous=NORMAL, file created 0600.
    - `postgresql://user@host:5432/db` (`postgresql+asyncpg://`, `postgres://`): asyncpg (the `postgres` extra),
      a small pool per event loop, opened on first use.

    Items are stored as compact JSON text; one `append` is one transaction. Database failures raise `StoreError`
    naming the URL with its password redacted.

    On PostgreSQL the store also locks turns across processes (`turn_lock`, held by the ThreadManager for each
    top-level turn), on one extra connection per process.
    """

    def __init__(self, url: str, *, max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES) -> None:
        if not isinstance(url, str):
            raise ConfigError(
                f"SQLThreadStore url must be a str like 'sqlite:///threads.db', got {type(url).__name__}."
            )
        redacted = redact_url(url)
        scheme, sep, rest = url.partition("://")
        scheme = scheme.lower()
        backend: _Backend
        if sep and scheme in SQLITE_SCHEMES:
            backend = _SQLiteBackend(_sqlite_path(rest, redacted))
        elif sep and scheme in POSTGRES_SCHEMES:
            backend = _PostgresBackend("postgresql://" + rest, _import_asyncpg(redacted))
        else:
            shown = scheme if sep else "(none)"
            raise ConfigError(
                f"Unsupported thread store URL scheme {shown!r} in {redacted!r}; supported: "
                f"{', '.join(s + '://' for s in SQLITE_SCHEMES + POSTGRES_SCHEMES)}."
            )
        self._setup(redacted, backend, max_item_bytes, _url_secrets(url))

    def _setup(self, redacted: str, backend: _Backend, max_item_bytes: int, secrets: tuple[str, ...]) -> None:
        if isinstance(max_item_bytes, bool) or not isinstance(max_item_bytes, int) or max_item_bytes < 1:
            raise ConfigError(f"max_item_bytes must be a positive int, got {max_item_bytes!r}.")
        self.url = redacted
        self.max_item_bytes = max_item_bytes
        self._backend = backend
        self._secrets = secrets
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    async def load(self, chat_id: str) -> Threads:
        check_chat_id(chat_id)
        rows = await self._guard(f"load chat {chat_id!r}", lambda: self._backend.load(chat_id))
        threads: Threads = {}
        for key, text in rows:
            try:
                item = json.loads(text)
            except ValueError as exc:
                where = f"chat {chat_id!r} thread {key!r}"
                raise StoreError(f"Thread store {self.url}: {where} holds bad JSON: {exc}") from exc
            if not isinstance(item, dict):
                raise StoreError(f"Thread store {self.url}: chat {chat_id!r} thread {key!r} holds a non-object item.")
            threads.setdefault(key, []).append(item)
        return threads

    async def append(self, chat_id: str, thread_key: str, items: list[Item]) -> None:
        check_chat_id(chat_id)
        if not isinstance(thread_key, str) or not thread_key:
            raise ConfigError(f"thread_key must be a non-empty str like 'user->CEO', got {thread_key!r}.")
        self._check_open(f"append to chat {chat_id!r}")
        encoded = self._encode(chat_id, thread_key, items)
        if not encoded:
            return
        operation = f"append {len(encoded)} item(s) to thread {thread_key!r} of chat {chat_id!r}"
        await self._guard(operation, lambda: self._backend.append(chat_id, thread_key, encoded))

    async def list_chats(self) -> list[str]:
        return await self._guard("list chats", self._backend.list_chats)

    async def delete(self, chat_id: str) -> None:
        check_chat_id(chat_id)
        await self._guard(f"delete chat {chat_id!r}", lambda: self._backend.delete(chat_id))

    def turn_lock(self, chat_id: str) -> contextlib.AbstractAsyncContextManager[None] | None:
        """PostgreSQL: while held, no other process (or agency) runs a turn of this chat; the ThreadManager holds it
        for each top-level turn. SQLite: None, it has no lock that fits (docs/design/serving.md says why)."""
        backend = self._backend
        if not isinstance(backend, _PostgresBackend):
            return None
        check_chat_id(chat_id)
        return self._turn_locked(backend, chat_id)

    @contextlib.asynccontextmanager
    async def _turn_locked(self, backend: _PostgresBackend, chat_id: str) -> AsyncIterator[None]:
        held = await self._guard(f"lock chat {chat_id!r} for a turn", lambda: backend.lock_turn(chat_id))
        try:
            yield
        finally:
            # also after aclose(): the lock must not outlive the turn
            await self._guard(f"unlock chat {chat_id!r}", lambda: backend.unlock_turn(held), closing=True)

    async def aclose(self) -> None:
        """Close the worker thread or the pools; idempotent. Every later call raises StoreError."""
        if self._closed:
            return
        self._closed = True
        await self._guard("close", self._backend.aclose, closing=True)

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise StoreError(f"Thread store {self.url} is closed (aclose() was called); cannot {operation}.")

    def _encode(self, chat_id: str, thread_key: str, items: list[Item]) -> list[str]:
        if not isinstance(items, list):
            raise ConfigError(f"append takes a list of item dicts, got {type(items).__name__}.")
        encoded = []
        for index, item in enumerate(items):
            where = f"item {index} for thread {thread_key!r} of chat {chat_id!r}"
            if not isinstance(item, dict):
                raise ConfigError(f"{where} is a {type(item).__name__}; items are dicts.")
            try:
                text = json.dumps(item, separators=(",", ":"))
            except (TypeError, ValueError) as exc:
                raise StoreError(f"Thread store {self.url}: {where} is not JSON-serializable: {exc}") from exc
            size = len(text.encode("utf-8"))
            if size > self.max_item_bytes:
                raise ItemTooLarge(
                    f"Thread store {self.url}: {where} is {size} bytes as JSON, over max_item_bytes="
                    f"{self.max_item_bytes}; nothing of this append was stored.",
                    index=index, size=size, limit=self.max_item_bytes,
                )
            encoded.append(text)
        return encoded

    async def _guard(self, operation: str, call: Callable[[], Awaitable[T]], *, closing: bool = False) -> T:
        if not closing:
            self._check_open(operation)
        try:
            return await call()
        except StoreError:
            raise
        except self._backend.errors as exc:
            detail = f"{type(exc).__name__}: {exc}"
            leaks = any(secret in detail or secret in repr(exc.args) for secret in self._secrets)
            for secret in self._secrets:
                detail = detail.replace(secret, _REDACTED)
            error = StoreError(f"Thread store {self.url} could not {operation}: {detail}")
            raise error from (None if leaks else exc)


class SQLiteThreadStore(SQLThreadStore):
    """Shorthand for `SQLThreadStore("sqlite:///" + path)`; any file name works, no URL quoting involved."""

    def __init__(self, path: str | os.PathLike[str], *, max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES) -> None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigError(f"SQLiteThreadStore path must be a str or a path, got {type(path).__name__}.")
        absolute = os.path.abspath(os.fspath(path))
        self._setup(f"sqlite:///{absolute}", _SQLiteBackend(absolute), max_item_bytes, ())
