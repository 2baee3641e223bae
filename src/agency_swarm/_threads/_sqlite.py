"""The SQLite backend: stdlib sqlite3 in one worker thread, and turn locks between processes as file locks
(`_file_turn_locks`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from . import _sql_schema as sql
from ._file_turn_locks import AVAILABLE as FILE_LOCKS_AVAILABLE
from ._file_turn_locks import FileTurnLocks
from ._store import ChatVersion

T = TypeVar("T")
SQLITE_BUSY_TIMEOUT_MS = 10_000


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


def _migrate(conn: sqlite3.Connection) -> None:
    """Create the tables, or add what a file written by an earlier version lacks (the version column)."""
    _retry_while_locked(lambda: conn.execute(sql.CREATE_ITEMS.format(int="INTEGER")))
    _retry_while_locked(lambda: conn.execute(sql.CREATE_CHATS.format(int="INTEGER")))
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({sql.ITEMS})").fetchall()}
    if "version" not in columns:
        _retry_while_locked(lambda: _add_versions(conn))
    _retry_while_locked(lambda: conn.execute(sql.CREATE_VERSION_INDEX))
    _retry_while_locked(lambda: conn.execute(sql.CREATE_BLOBS.format(blob="BLOB", int="INTEGER")))
    _retry_while_locked(lambda: conn.execute(sql.CREATE_BLOB_HOLDERS))


def _add_versions(conn: sqlite3.Connection) -> None:
    """A file from before versions: add the column and start every chat's version past its items (once)."""
    with _write_transaction(conn):
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({sql.ITEMS})").fetchall()}
        if "version" not in columns:  # another process may have done it while this one waited
            conn.execute(sql.ADD_VERSION_COLUMN.format(int="INTEGER"))
            conn.execute(sql.VERSION_EXISTING_CHATS + " ON CONFLICT (chat_id) DO NOTHING")


@contextlib.contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` (the file's write lock, taken before anything is read) ... COMMIT, or ROLLBACK on any
    error: what the block wrote is stored whole or not at all."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


class SQLiteBackend:
    """One sqlite3 connection, created and used only in this backend's single worker thread.

    An append raises the chat's version and inserts its items numbered by it (see `_sql_schema`) in one
    `BEGIN IMMEDIATE` transaction: the write lock, taken before the version is read, orders appends of every
    process on the file. Jobs run in the
    order they were submitted, so appends to one thread land in the order the calls were made. A job cannot be
    interrupted: an append whose caller is cancelled after the job started still commits (whole, never half).
    """

    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)

    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agency-swarm-sqlite")
        self._conn: sqlite3.Connection | None = None  # only ever touched in the worker thread
        self.turn_locks = FileTurnLocks(path + ".turn-locks") if path != ":memory:" and FILE_LOCKS_AVAILABLE else None
        self.written: dict[str, ChatVersion] = {}
        """Per chat, the version this backend's last committed write left it at: a turn that holds the chat's
        lock reads its own writes' version here instead of asking the database again."""

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
            _migrate(conn)
            if not in_memory:
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.chmod(self.path + suffix, 0o600)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _sync_rows(self, query: str, *args: object) -> list[tuple[str, str]]:
        rows = self._sync_connection().execute(query, args).fetchall()
        return [(str(key), str(item)) for key, item in rows]

    def _sync_version(self, chat_id: str) -> ChatVersion:
        row = self._sync_connection().execute(sql.VERSION.format("?"), (chat_id,)).fetchone()
        return ChatVersion() if row is None else ChatVersion(int(row[0]), int(row[1]))

    def _sync_append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        with _write_transaction(self._sync_connection()) as conn:
            count = len(encoded)
            bumped = conn.execute(f"UPDATE {sql.CHATS} SET version = version + ? WHERE chat_id = ?", (count, chat_id))
            if bumped.rowcount == 0:
                conn.execute(f"INSERT INTO {sql.CHATS} (chat_id, version, cleared) VALUES (?, ?, 0)", (chat_id, count))
            now = self._sync_version(chat_id)
            first = now.version - count + 1
            conn.executemany(
                f"INSERT INTO {sql.ITEMS} (chat_id, thread_key, seq, item, version) VALUES (?, ?, ?, ?, ?)",
                [(chat_id, thread_key, first + n - 1, text, first + n) for n, text in enumerate(encoded)],
            )
        self.written[chat_id] = now  # committed

    def _sync_delete(self, chat_id: str) -> None:
        with _write_transaction(self._sync_connection()) as conn:
            conn.execute(sql.DELETE_ITEMS.format("?"), (chat_id,))
            conn.execute(sql.CLEAR_CHAT.format("?"), (chat_id,))
            held = conn.execute(f"SELECT digest FROM {sql.BLOB_HOLDERS} WHERE chat_id = ?", (chat_id,)).fetchall()
            conn.execute(f"DELETE FROM {sql.BLOB_HOLDERS} WHERE chat_id = ?", (chat_id,))
            for (digest,) in held:
                conn.execute(f"UPDATE {sql.BLOBS} SET holders = holders - 1 WHERE digest = ?", (digest,))
                conn.execute(sql.DROP_UNHELD_BLOBS.format("?"), (digest,))
            now = self._sync_version(chat_id)
        self.written[chat_id] = now

    def _sync_put_blobs(self, chat_id: str, blobs: dict[str, bytes]) -> None:
        with _write_transaction(self._sync_connection()) as conn:
            for digest, data in blobs.items():
                added = conn.execute(
                    f"INSERT OR IGNORE INTO {sql.BLOB_HOLDERS} (chat_id, digest) VALUES (?, ?)", (chat_id, digest)
                )
                if added.rowcount == 1:
                    conn.execute(
                        f"INSERT INTO {sql.BLOBS} (digest, data, holders) VALUES (?, ?, 1) "
                        "ON CONFLICT (digest) DO UPDATE SET holders = holders + 1", (digest, data),
                    )

    def _sync_load_blobs(self, chat_id: str, digests: list[str]) -> dict[str, bytes]:
        conn = self._sync_connection()
        found: dict[str, bytes] = {}
        for digest in digests:
            row = conn.execute(sql.LOAD_BLOBS.format("?", "?"), (chat_id, digest)).fetchone()
            if row is not None:
                found[str(row[0])] = bytes(row[1])
        return found

    def _sync_close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def load(self, chat_id: str) -> list[tuple[str, str]]:
        return await self._run(self._sync_rows, sql.LOAD.format("?"), chat_id)

    async def load_after(self, chat_id: str, version: int) -> list[tuple[str, str]]:
        return await self._run(self._sync_rows, sql.LOAD_AFTER.format("?", "?"), chat_id, version)

    async def version(self, chat_id: str) -> ChatVersion:
        return await self._run(self._sync_version, chat_id)

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None:
        await self._run(self._sync_append, chat_id, thread_key, encoded)

    async def list_chats(self) -> list[str]:
        rows = await self._run(lambda: self._sync_connection().execute(sql.LIST).fetchall())
        return [str(chat_id) for (chat_id,) in rows]

    async def delete(self, chat_id: str) -> None:
        await self._run(self._sync_delete, chat_id)

    async def put_blobs(self, chat_id: str, blobs: dict[str, bytes]) -> None:
        await self._run(self._sync_put_blobs, chat_id, blobs)

    async def load_blobs(self, chat_id: str, digests: list[str]) -> dict[str, bytes]:
        return await self._run(self._sync_load_blobs, chat_id, digests)

    async def aclose(self) -> None:
        try:
            await self._run(self._sync_close)  # queued after every job already submitted
        finally:
            self._executor.shutdown(wait=True)  # the worker is idle by now: this returns at once
