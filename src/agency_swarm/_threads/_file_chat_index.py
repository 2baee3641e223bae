"""The file store's ChatIndex: an append-only log of index entries beside the chat files, read once per process."""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

from .._base._errors import StoreError
from .._base._redact import secret_free_logger
from ._chat_index import ChatEntry, MemoryChatIndex, _Row

if TYPE_CHECKING:
    from ._file_store import FileThreadStore

logger = secret_free_logger(__name__)

LOG_NAME = "agency_swarm.chat-owners.log"
"""In the store's directory; not a `.jsonl` name, so never taken for a chat."""
COMPACT_SLACK = 1024
"""The log is rewritten with one line per chat once it holds this many lines more than twice the chats."""


def _row_of(line: bytes) -> tuple[str, _Row] | None:
    try:
        value = json.loads(line)
        row = _Row(value["o"], value["t"], int(value["cr"]), int(value["a"]), bool(value["d"]))
        chat_id = value["c"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if not isinstance(chat_id, str) or not isinstance(row.owner, str):
        return None
    return chat_id, row


def _line(chat_id: str, row: _Row) -> bytes:
    return json.dumps(row.to_json(chat_id), separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


class FileChatIndex:
    """The index in memory, every change appended to `LOG_NAME` as one line (the entry as it now is), read back
    whole when the process first uses it. The store's directory lock means one process writes it. A line torn by
    a crash is cut off when the log is read; the log is compacted when it is mostly superseded lines."""

    def __init__(self, store: FileThreadStore) -> None:
        self._store = store
        self._path = os.path.join(store._dir, LOG_NAME)
        self._memory = MemoryChatIndex(self._stored_now)
        self._lines: int | None = None  # None: not read yet
        self._lock: asyncio.Lock | None = None

    def _stored_now(self, chat_id: str) -> bool:
        try:
            return os.stat(self._store._path(chat_id)).st_size > 0
        except FileNotFoundError:
            return False

    async def _ready(self) -> asyncio.Lock:
        self._store._check_open()
        if self._lock is None:
            self._lock = asyncio.Lock()
        if self._lines is None:
            async with self._lock:
                if self._lines is None:
                    self._lines = await self._guard("read", asyncio.to_thread(self._load))
        return self._lock

    async def _guard(self, what: str, call: Any) -> Any:
        try:
            return await call
        except OSError as exc:
            raise StoreError(f"cannot {what} the chat index {self._path}: {exc}") from exc

    def _load(self) -> int:
        """Read the log (in a worker thread), cutting a torn last line; the number of lines it holds."""
        try:
            with open(self._path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return 0
        whole = data.rfind(b"\n") + 1
        if whole < len(data):
            logger.warning("%s: cut a torn last line (%d bytes) left by a crash", self._path, len(data) - whole)
            os.truncate(self._path, whole)
        lines = data[:whole].splitlines()
        for line in lines:
            found = _row_of(line)
            if found is None:
                logger.warning("%s: skipped a line that is not an index entry", self._path)
                continue
            self._memory.put(*found)
        return len(lines)

    async def _write(self, chat_id: str, row: _Row) -> None:
        """Append the entry's line (one small write on the loop's thread, like the store's own appends), then keep
        it in memory."""
        line = _line(chat_id, row)
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, line)
        finally:
            os.close(fd)
        if written != len(line):
            raise OSError(f"wrote {written} of {len(line)} bytes")
        self._memory.put(chat_id, row)
        self._lines = (self._lines or 0) + 1
        if self._lines > 2 * len(self._memory.rows) + COMPACT_SLACK:
            await asyncio.to_thread(self._compact)

    def _compact(self) -> None:
        from ._file_store import _rewrite

        content = b"".join(_line(chat_id, row) for chat_id, row in self._memory.rows.items())
        _rewrite(self._store._dir, self._path, content)
        self._lines = len(self._memory.rows)

    async def chat_owner(self, chat_id: str) -> str | None:
        await self._ready()
        return await self._memory.chat_owner(chat_id)

    async def claim_chat(self, chat_id: str, owner: str, title: str | None, now_us: int) -> bool:
        async with await self._ready():
            row = self._memory.claimed(chat_id, owner, title, now_us)
            if row is not None:
                await self._guard("write", self._write(chat_id, row))
            return row is not None

    async def forget_chat(self, chat_id: str) -> None:
        async with await self._ready():
            row = self._memory.rows.get(chat_id)
            if row is not None and not row.deleted:
                gone = _Row(row.owner, row.title, row.created_us, row.active_us, deleted=True)
                await self._guard("write", self._write(chat_id, gone))

    async def owned_chats(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[ChatEntry]:
        await self._ready()
        return await self._memory.owned_chats(owner, after, limit)

    async def chat_stored(self, chat_id: str) -> bool:
        self._store._check_open()
        stored: bool = await self._guard("read", asyncio.to_thread(self._stored_now, chat_id))
        return stored
