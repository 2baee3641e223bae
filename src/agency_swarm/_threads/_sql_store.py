"""Thread stores on SQL databases by URL: SQLite (stdlib sqlite3 in one worker thread) and PostgreSQL (asyncpg)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Protocol, TypeVar

from .._base._errors import ConfigError, ItemTooLarge, StoreError, TurnLockLost
from ._manager import check_chat_id
from ._pg_cancel import CancelHandler
from ._pg_turn_locks import LOCK_SESSION_TIMEOUT_S
from ._postgres import PostgresBackend, import_asyncpg
from ._running import CancelOutcome
from ._sql_urls import POSTGRES_SCHEMES, REDACTED, SQLITE_SCHEMES, redact_url, sqlite_path, url_secrets
from ._sqlite import SQLiteBackend
from ._store import DEFAULT_MAX_ITEM_BYTES, ChatVersion, Item, Threads

__all__ = ["POSTGRES_SCHEMES", "SQLITE_SCHEMES", "SQLThreadStore", "SQLiteThreadStore", "redact_url"]

T = TypeVar("T")
_DIGEST = re.compile(r"[0-9a-f]{64}")


class _Backend(Protocol):
    errors: tuple[type[BaseException], ...]

    async def load(self, chat_id: str) -> list[tuple[str, str]]: ...

    async def load_after(self, chat_id: str, version: int) -> list[tuple[str, str]]: ...

    async def version(self, chat_id: str) -> ChatVersion: ...

    async def append(self, chat_id: str, thread_key: str, encoded: list[str]) -> None: ...

    async def list_chats(self) -> list[str]: ...

    async def delete(self, chat_id: str) -> None: ...

    async def aclose(self) -> None: ...

    async def put_blobs(self, chat_id: str, blobs: dict[str, bytes]) -> None: ...

    async def load_blobs(self, chat_id: str, digests: list[str]) -> dict[str, bytes]: ...


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
    top-level turn), on one extra connection per process. `lock_session_timeout` (seconds, PostgreSQL only) bounds
    how long that connection's locks outlive it when its network goes silent: the server ends it after about that
    long, freeing its chats for other workers, and this process gives it up after half of it, stopping the turns
    that held locks on it with `TurnLockLost`. None leaves TCP as the system has it (hours). A turn's writes
    carry a fencing token either way: once another process took its chat, the database refuses them.

    Attachment bytes are stored once per database in `agency_swarm_blobs` (by sha256), with the chats that hold
    them in `agency_swarm_blob_holders`; deleting a chat deletes the blobs no other chat holds.
    """

    stores_attachments = True

    def __init__(
        self,
        url: str,
        *,
        max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
        lock_session_timeout: float | None = LOCK_SESSION_TIMEOUT_S,
    ) -> None:
        if not isinstance(url, str):
            raise ConfigError(
                f"SQLThreadStore url must be a str like 'sqlite:///threads.db', got {type(url).__name__}."
            )
        _check_timeout(lock_session_timeout)
        redacted = redact_url(url)
        scheme, sep, rest = url.partition("://")
        scheme = scheme.lower()
        backend: _Backend
        if sep and scheme in SQLITE_SCHEMES:
            backend = SQLiteBackend(sqlite_path(rest, redacted))
        elif sep and scheme in POSTGRES_SCHEMES:
            backend = PostgresBackend(
                "postgresql://" + rest, import_asyncpg(redacted), url=redacted,
                lock_session_timeout=lock_session_timeout,
            )
        else:
            shown = scheme if sep else "(none)"
            raise ConfigError(
                f"Unsupported thread store URL scheme {shown!r} in {redacted!r}; supported: "
                f"{', '.join(s + '://' for s in SQLITE_SCHEMES + POSTGRES_SCHEMES)}."
            )
        self._setup(redacted, backend, max_item_bytes, url_secrets(url))

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
        return self._decoded(chat_id, rows)

    async def load_after(self, chat_id: str, version: int) -> Threads:
        """The items stored after `version` of the chat (see ChatVersion), per thread key in order."""
        check_chat_id(chat_id)
        rows = await self._guard(f"load chat {chat_id!r}", lambda: self._backend.load_after(chat_id, version))
        return self._decoded(chat_id, rows)

    async def version(self, chat_id: str) -> ChatVersion:
        """Where the chat stands now: the version of its newest item and of its last delete."""
        check_chat_id(chat_id)
        return await self._guard(f"read the version of chat {chat_id!r}", lambda: self._backend.version(chat_id))

    def _decoded(self, chat_id: str, rows: list[tuple[str, str]]) -> Threads:
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

    async def put_attachments(self, chat_id: str, blobs: Mapping[str, bytes]) -> None:
        """Store attachment bytes once per database and note that the chat holds them (see `AttachmentStore`)."""
        check_chat_id(chat_id)
        kept = {digest: bytes(data) for digest, data in blobs.items() if _DIGEST.fullmatch(digest)}
        if len(kept) != len(blobs):
            raise ConfigError("attachment digests must be sha256 hex digests.")
        if kept:
            operation = f"store {len(kept)} attachment(s) of chat {chat_id!r}"
            await self._guard(operation, lambda: self._backend.put_blobs(chat_id, kept))

    async def load_attachments(self, chat_id: str, digests: Collection[str]) -> dict[str, bytes]:
        """The bytes of those of `digests` the chat holds."""
        check_chat_id(chat_id)
        wanted = [digest for digest in digests if _DIGEST.fullmatch(digest)]
        if not wanted:
            return {}
        operation = f"load attachments of chat {chat_id!r}"
        return await self._guard(operation, lambda: self._backend.load_blobs(chat_id, wanted))

    async def delete(self, chat_id: str) -> None:
        check_chat_id(chat_id)
        await self._guard(f"delete chat {chat_id!r}", lambda: self._backend.delete(chat_id))

    def on_cancel(self, handler: CancelHandler) -> None:
        """PostgreSQL: `handler` (a manager's running turns) answers the cancels other processes ask for."""
        if isinstance(self._backend, PostgresBackend):
            self._backend.cancels.handlers.append(handler)

    async def cancel_elsewhere(self, chat_id: str, turn_id: str | None) -> CancelOutcome | None:
        """PostgreSQL: cancel the chat's turn in the process running it; what it answered, or None when no process
        runs a turn of the chat (other stores: None)."""
        backend = self._backend
        if not isinstance(backend, PostgresBackend):
            return None
        check_chat_id(chat_id)
        operation = f"cancel a turn of chat {chat_id!r}"
        return await self._guard(operation, lambda: backend.cancel_elsewhere(chat_id, turn_id))

    def turn_lock(self, chat_id: str) -> contextlib.AbstractAsyncContextManager[ChatVersion | None] | None:
        """While held, no other process (or agency) runs a turn of this chat; the ThreadManager holds it for each
        top-level turn. It yields the chat's version, read once the lock is held (see TurnLockingStore).
        PostgreSQL: an advisory lock. SQLite: a file lock next to the database, taken in arrival order (POSIX); None
        for `:memory:`."""
        backend = self._backend
        if isinstance(backend, PostgresBackend):
            check_chat_id(chat_id)
            return self._postgres_turn(backend, chat_id)
        if isinstance(backend, SQLiteBackend) and backend.turn_locks is not None:
            check_chat_id(chat_id)
            return self._sqlite_turn(backend, chat_id)
        return None

    @contextlib.asynccontextmanager
    async def _postgres_turn(self, backend: PostgresBackend, chat_id: str) -> AsyncIterator[ChatVersion]:
        held = await self._guard(f"lock chat {chat_id!r} for a turn", lambda: backend.lock_turn(chat_id))
        try:
            yield held[1].version  # read once the lock was held; the unlock sets it to what the turn left
        except asyncio.CancelledError as cancelled:
            if held[1].lost_lock_cancelled():  # the lock's session ended: that, not a cancellation, stopped the turn
                raise TurnLockLost(
                    f"Thread store {self.url}: the session holding the turn lock of chat {chat_id!r} ended (network "
                    f"or server); the turn was stopped, as another process may take the chat now.",
                    chat_id=chat_id,
                ) from cancelled
            raise
        finally:
            # also after aclose(): the lock must not outlive the turn
            await self._guard(f"unlock chat {chat_id!r}", lambda: backend.unlock_turn(held), closing=True)

    @contextlib.asynccontextmanager
    async def _sqlite_turn(self, backend: SQLiteBackend, chat_id: str) -> AsyncIterator[ChatVersion]:
        locks = backend.turn_locks
        assert locks is not None
        hold = await self._guard(f"lock chat {chat_id!r} for a turn", lambda: locks.acquire(chat_id))
        try:
            version = await self.version(chat_id)
            backend.written.pop(chat_id, None)
            yield version
            # Only this store writes the chat while it holds the lock: its last write says where the turn left it.
            after = backend.written.pop(chat_id, None)
            if after is not None:
                version.version, version.cleared = after.version, after.cleared
        finally:
            locks.release(hold)

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
                detail = detail.replace(secret, REDACTED)
            error = StoreError(f"Thread store {self.url} could not {operation}: {detail}")
            raise error from (None if leaks else exc)


def _check_timeout(seconds: object) -> None:
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 1 <= seconds <= 3600:
        raise ConfigError(f"lock_session_timeout must be seconds between 1 and 3600, or None; got {seconds!r}.")


class SQLiteThreadStore(SQLThreadStore):
    """Shorthand for `SQLThreadStore("sqlite:///" + path)`; any file name works, no URL quoting involved."""

    def __init__(self, path: str | os.PathLike[str], *, max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES) -> None:
        if not isinstance(path, str | os.PathLike):
            raise ConfigError(f"SQLiteThreadStore path must be a str or a path, got {type(path).__name__}.")
        absolute = os.path.abspath(os.fspath(path))
        self._setup(f"sqlite:///{absolute}", SQLiteBackend(absolute), max_item_bytes, ())
