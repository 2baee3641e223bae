"""FileThreadStore: one append-only JSON Lines file per chat in a local directory, repaired after crashes."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import hashlib
import json
import os
import tempfile
import urllib.parse
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import aiofiles
from aiofiles.threadpool.binary import AsyncFileIO

from .._base._errors import ConfigError, InvalidChatId, ItemTooLarge, StoreError
from .._base._redact import secret_free_logger
from ._checks import item_problem
from ._dir_lock import SEVERAL_PROCESSES, DirectoryLock
from ._file_blobs import FileBlobs
from ._manager import check_chat_id, finish
from ._store import DEFAULT_MAX_ITEM_BYTES, Item, Threads

logger = secret_free_logger(__name__)

_SAFE_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SUFFIX = ".jsonl"
_QUARANTINE_SUFFIX = ".jsonl.quarantine"
_ID_SUFFIX = ".id"
_HASHED_PREFIX = "~"  # percent-encoding never produces "~", so hashed names cannot collide with encoded ones
_MAX_STEM = 200  # leaves room for ".jsonl.quarantine" under the usual 255-byte file name limit
_CHUNK = 64 * 1024
INLINE_WRITE_BYTES = 16 * 1024
"""Appends up to this size are written on the event loop's thread (a page-cache copy); larger ones in a worker."""
_write_fd = os.write  # (a name of our own, so tests can make writes short)
_NOT_JSON = "not JSON"
_BAD_SHAPE = 'not a {"k": thread key, "i": item object} line'


def _stem(chat_id: str) -> str:
    """The file name (without suffix) of a chat: bytes outside [A-Za-z0-9_-] become %XX; long ones a hash."""
    raw = chat_id.encode("utf-8", "surrogatepass")
    stem = "".join(chr(byte) if byte in _SAFE_BYTES else f"%{byte:02X}" for byte in raw)
    if len(stem) <= _MAX_STEM:
        return stem
    return _HASHED_PREFIX + hashlib.sha256(raw).hexdigest()


def _chat_id_of(stem: str) -> str | None:
    """The chat id an encoded stem stands for; None for a name this store did not make."""
    try:
        chat_id = urllib.parse.unquote_to_bytes(stem).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return chat_id if chat_id and _stem(chat_id) == stem else None


def _valid_key(key: object) -> bool:
    return isinstance(key, str) and key.count("->") == 1 and not key.startswith("->") and not key.endswith("->")


def _encode_line(chat_id: str, thread_key: str, index: int, item: Item) -> bytes:
    record = {"k": thread_key, "i": item}
    try:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(
            f"item {index} of thread {thread_key!r} in chat {chat_id!r} cannot be stored as JSON "
            f"({type(exc).__name__}: {exc})."
        ) from exc
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \u-escape it so the line stays valid UTF-8
        return json.dumps(record, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _decode_line(raw: bytes) -> tuple[str, Item] | str:
    """(thread key, item), or why the line is not one."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return _NOT_JSON
    if not isinstance(value, dict):
        return _BAD_SHAPE
    key, item = value.get("k"), value.get("i")
    if not isinstance(key, str) or not _valid_key(key) or not isinstance(item, dict):
        return _BAD_SHAPE
    return key, item


@dataclass
class _Entry:
    line: int  # 1-based line number in the file
    raw: bytes
    key: str | None  # None: unknown (the line is not JSON)
    item: Item | None
    reason: str = ""  # why it is quarantined; "" while it is kept


@dataclass
class _Scan:
    entries: list[_Entry] = field(default_factory=list)  # every complete line, in file order
    torn: _Entry | None = None  # the unfinished last line of an interrupted write
    torn_offset: int = 0  # where the torn tail starts

    @property
    def quarantined(self) -> list[_Entry]:
        return [entry for entry in self.entries if entry.reason]


def _scan(data: bytes) -> _Scan:
    scan = _Scan()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    offset = 0
    for number, raw in enumerate(lines, start=1):
        decoded = _decode_line(raw)
        if isinstance(decoded, str):
            key = _known_key(raw) if decoded == _BAD_SHAPE else None
            scan.entries.append(_Entry(number, raw, key, None, reason=f"corrupt line ({decoded})"))
        else:  # JSON of the right shape, but perhaps not an item the model API takes: quarantined as well
            problem = item_problem(decoded[1]) and f"valid JSON, but {item_problem(decoded[1])}"
            scan.entries.append(_Entry(number, raw, decoded[0], decoded[1], reason=problem))
        offset += len(raw) + 1
    if tail:
        scan.torn, scan.torn_offset = _Entry(len(lines) + 1, tail, None, None, reason="torn last line"), offset
    elif scan.entries and scan.entries[-1].reason == f"corrupt line ({_NOT_JSON})":
        last = scan.entries.pop()  # invalid JSON at the very end: a write cut short, not a corrupt middle
        last.reason = "torn last line"
        scan.torn, scan.torn_offset = last, offset - len(last.raw) - 1
    _cascade(scan.entries)
    return scan


def _known_key(raw: bytes) -> str | None:
    value = json.loads(raw)
    key = value.get("k") if isinstance(value, dict) else None
    return key if isinstance(key, str) and _valid_key(key) else None


def _kind(entry: _Entry) -> object:
    return entry.item.get("type") if entry.item is not None else None


def _cascade(entries: list[_Entry]) -> None:
    """Quarantine what a quarantined line leaves invalid for the model API.

    A reasoning item must stay directly before its follower: when the line after it in its thread is
    quarantined, it goes too. A function_call_output without its function_call is rejected: it goes too.
    A quarantined line that is not JSON has no known thread, so every thread is checked.
    """
    threads: dict[str, list[_Entry]] = {}
    for entry in entries:
        if entry.key is not None and entry.item is not None:
            threads.setdefault(entry.key, []).append(entry)
    pending = [entry for entry in entries if entry.reason]
    while pending:
        gone = pending.pop()
        for key in [gone.key] if gone.key is not None else list(threads):
            thread = threads.get(key, [])
            position = bisect.bisect_left([entry.line for entry in thread], gone.line)
            before = next((entry for entry in reversed(thread[:position]) if not entry.reason), None)
            if before is not None and _kind(before) == "reasoning":
                before.reason = f"reasoning item whose follower (line {gone.line}) was quarantined"
                pending.append(before)
        for key in [gone.key] if gone.key is not None else list(threads):
            thread = threads.get(key, [])
            calls = {e.item.get("call_id") for e in thread if not e.reason and e.item and _kind(e) == "function_call"}
            for entry in thread:
                if not entry.reason and entry.item is not None and _kind(entry) == "function_call_output" and (
                    entry.item.get("call_id") not in calls
                ):
                    entry.reason = f"function_call_output whose function_call was quarantined (line {gone.line})"
                    pending.append(entry)


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_quarantine(path: str, records: list[_Entry]) -> None:
    """Append `<line>\\t<reason>\\t<raw line>` per record to a 0600 file, fsynced."""
    data = b"".join(b"%d\t%s\t%s\n" % (r.line, r.reason.encode(), r.raw) for r in records)
    fd, _ = _open_private(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_private(path: str, flags: int) -> tuple[int, bool]:
    """Open a file, creating it with mode 0600 whatever the umask; (fd, whether it was created)."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return os.open(path, flags), False
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd, True


def _rewrite(directory: str, path: str, content: bytes) -> None:
    """Replace a file atomically: a 0600 temp file in the same directory, fsynced, then os.replace."""
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".rewrite-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)



@dataclass
class _Handle:
    file: AsyncFileIO  # unbuffered: a write reaches the OS at once
    size: int  # bytes in the file after the last successful append


class FileThreadStore(FileBlobs):
    """Keeps every chat as one append-only JSON Lines file in a local directory.

    Layout: `directory` (created with mode 0700) holds `<chat>.jsonl` per chat (mode 0600), where `<chat>` is
    the chat id's UTF-8 bytes with everything outside `[A-Za-z0-9_-]` written as `%XX` (ids whose encoded
    name would exceed 200 characters get `~<sha256>.jsonl` plus a `~<sha256>.id` file holding the id). Each
    line is one item: `{"k": thread key, "i": item}`. Attachment bytes live once in `blobs/<sha256>`, hard-linked
    into `<chat>.attachments/` for each chat that holds them. One `append` is one unbuffered write of all its lines
    (`durable=True` also fsyncs, which survives power loss but costs a disk round trip per append).

    Crash repair on `load` (and before the first append of a process): a torn last line is cut off (logged;
    its bytes are kept in `<chat>.jsonl.quarantine`); a corrupt line in the middle, or one whose item the model
    API would refuse, is moved to that quarantine file (logged, one line each), together with what it leaves
    invalid for the model API (the reasoning item right before it, a function_call_output left without its
    function_call).

    One process writes a chat directory: the store locks it (`flock`) from its creation to `aclose()`, and a
    second process, or a second store in this process, gets a StoreError. Several processes share chats through
    the SQL store.
    """

    max_open_files = 256
    """Append handles kept open at once; the least recently used is closed beyond this."""
    checks_items = True
    """`load` quarantines items the model API would refuse itself: the ThreadManager need not check them again."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        durable: bool = False,
        max_item_bytes: int = DEFAULT_MAX_ITEM_BYTES,
    ) -> None:
        if isinstance(max_item_bytes, bool) or not isinstance(max_item_bytes, int) or max_item_bytes < 1:
            raise ConfigError(f"max_item_bytes must be a positive int, got {max_item_bytes!r}.")
        self._dir = os.path.realpath(os.fspath(directory))
        self._durable = durable
        self._max_item_bytes = max_item_bytes
        self._handles: OrderedDict[str, _Handle] = OrderedDict()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._rollback: dict[str, int] = {}  # chat -> size its file must be cut back to before the next append
        self._closed = False
        try:
            os.makedirs(self._dir, mode=0o700)
            os.chmod(self._dir, 0o700)  # whatever the umask
        except FileExistsError:
            if not os.path.isdir(self._dir):
                raise StoreError(f"FileThreadStore directory {self._dir} exists and is not a directory.") from None
        except OSError as exc:
            raise StoreError(f"cannot create the FileThreadStore directory {self._dir}: {exc}") from exc
        self._dir_lock = DirectoryLock(self._dir)  # one process (and one store) per directory, until aclose()

    def __repr__(self) -> str:
        return f"FileThreadStore({self._dir!r}, durable={self._durable})"

    # -- protocol ----------------------------------------------------------------------------
    async def load(self, chat_id: str) -> Threads:
        path = self._path(chat_id)
        async with self._lock(chat_id):
            self._check_open()
            try:
                async with aiofiles.open(path, "rb") as file:
                    data = await file.read()
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise StoreError(f"cannot read {path}: {exc}") from exc
            scan = await asyncio.to_thread(_scan, data)
            if scan.torn is not None or scan.quarantined:
                await self._repair(chat_id, path, scan)
        threads: Threads = {}
        for entry in scan.entries:
            if not entry.reason and entry.key is not None and entry.item is not None:
                threads.setdefault(entry.key, []).append(entry.item)
        return threads

    async def append(self, chat_id: str, thread_key: str, items: list[Item]) -> None:
        path = self._path(chat_id)
        if not _valid_key(thread_key):
            raise ConfigError(f"thread key {thread_key!r} of chat {chat_id!r} must look like 'sender->recipient'.")
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise ConfigError(f"items for thread {thread_key!r} of chat {chat_id!r} must be a list of dicts.")
        self._check_open()
        if not items:
            return
        lines = [_encode_line(chat_id, thread_key, index, item) for index, item in enumerate(items)]
        for index, line in enumerate(lines):
            if len(line) > self._max_item_bytes:
                raise ItemTooLarge(
                    f"item {index} of thread {thread_key!r} in chat {chat_id!r} is {len(line)} bytes as JSON; "
                    f"this FileThreadStore takes at most max_item_bytes={self._max_item_bytes}. Nothing was stored.",
                    index=index, size=len(line), limit=self._max_item_bytes,
                )
        data = b"\n".join(lines) + b"\n"
        async with self._lock(chat_id):
            self._check_open()
            handle = await self._handle(chat_id, path)
            commit = self._commit(chat_id, path, handle, data)
            if len(data) <= INLINE_WRITE_BYTES and not self._durable:
                await commit  # written on this thread, without a pause: no cancellation can come in between
            else:  # a worker thread writes it, and a thread cannot be stopped: so the append is finished (and the
                await finish(commit)  # chat kept locked) even if this task is cancelled meanwhile

    async def _commit(self, chat_id: str, path: str, handle: _Handle, data: bytes) -> None:
        """Write one append's lines (and fsync them if durable); after a failure, cut the file back."""
        try:
            await self._write(handle.file, data)
            if self._durable:
                await asyncio.to_thread(os.fsync, handle.file.fileno())
        except OSError as exc:
            await self._roll_back(chat_id, path, handle)
            raise StoreError(f"could not append to {path}: {exc}. Items stored before remain.") from exc
        handle.size += len(data)

    async def list_chats(self) -> list[str]:
        self._check_open()
        try:
            return await asyncio.to_thread(self._list_chats)
        except OSError as exc:
            raise StoreError(f"cannot list {self._dir}: {exc}") from exc

    async def delete(self, chat_id: str) -> None:
        path = self._path(chat_id)
        async with self._lock(chat_id):
            self._check_open()
            await self._close_handle(chat_id)
            self._rollback.pop(chat_id, None)
            base = path[: -len(_SUFFIX)]
            for name in (path, base + _QUARANTINE_SUFFIX, base + _ID_SUFFIX):
                try:
                    await asyncio.to_thread(os.unlink, name)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StoreError(f"cannot delete {name}: {exc}") from exc
            await self._drop_attachments(chat_id)  # after the items: a crash in between leaves bytes, not references

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        failures: list[str] = []
        for chat_id in list(self._handles):
            async with self._lock(chat_id):
                try:
                    await self._close_handle(chat_id, quiet=False)
                except OSError as exc:
                    failures.append(f"{chat_id!r}: {exc}")
        self._dir_lock.release()
        if failures:
            raise StoreError(f"closing FileThreadStore {self._dir} failed for chat(s) {', '.join(failures)}.")

    # -- internals ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed or self._dir_lock.forked or self._dir_lock.superseded:
            if self._closed:
                raise StoreError(f"FileThreadStore {self._dir} is closed.")
            if self._dir_lock.superseded:
                raise StoreError(
                    f"FileThreadStore {self._dir} was replaced by a newer FileThreadStore on the same directory in "
                    "this process (an agency built again, e.g. a notebook cell run twice): use the newer one."
                )
            raise StoreError(
                f"FileThreadStore {self._dir} was opened by the process this one was forked from; it writes there, "
                f"not here. Open stores after forking (one process per directory). {SEVERAL_PROCESSES}"
            )

    def _path(self, chat_id: str) -> str:
        stem = _stem(check_chat_id(chat_id))
        path = os.path.join(self._dir, stem + _SUFFIX)
        if os.path.dirname(path) != self._dir or stem in (".", "..") or os.sep in stem:
            raise InvalidChatId(f"chat_id {chat_id!r} would name a file outside {self._dir}.")
        return path

    def _lock(self, chat_id: str) -> asyncio.Lock:
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = asyncio.Lock()
        return lock

    async def _write(self, file: AsyncFileIO, data: bytes) -> None:
        """One write of all the append's lines, straight to the OS (unbuffered: nothing is left to flush).

        Up to INLINE_WRITE_BYTES (a turn's items, nearly always) the write happens right here: writing a few KiB to
        a local file copies them into the page cache and returns (~10 µs), while a worker-thread round trip costs
        ~120 µs. Larger appends, and the fsync of durable stores, go to a worker thread so the event loop never
        waits on the disk. A short write (a regular file only does that when the disk fills up) is continued.
        """
        view = memoryview(data)
        inline = len(data) <= INLINE_WRITE_BYTES
        fd = file.fileno()
        written = 0
        while written < len(data):
            count = _write_fd(fd, view[written:]) if inline else await file.write(view[written:])
            if not count:
                raise OSError(errno.EIO, f"write stored nothing after {written} of {len(data)} bytes")
            written += count

    async def _handle(self, chat_id: str, path: str) -> _Handle:
        handle = self._handles.get(chat_id)
        if handle is not None:
            self._handles.move_to_end(chat_id)
            return handle
        await self._evict()
        try:
            fd, size = await asyncio.to_thread(self._open_append, chat_id, path, self._rollback.get(chat_id))
        except OSError as exc:
            raise StoreError(f"cannot open {path} for appending: {exc}") from exc
        self._rollback.pop(chat_id, None)
        try:
            file = await aiofiles.open(fd, "ab", buffering=0)
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot open {path} for appending: {exc}") from exc
        handle = self._handles[chat_id] = _Handle(file, size)
        return handle

    def _open_append(self, chat_id: str, path: str, cut_to: int | None) -> tuple[int, int]:
        """Open a chat file for appending (in a worker thread), cutting off what a failed or torn write left."""
        base = path[: -len(_SUFFIX)]
        if os.path.basename(base).startswith(_HASHED_PREFIX):
            self._write_id_file(base + _ID_SUFFIX, chat_id)
        fd, created = _open_private(path, os.O_RDWR | os.O_APPEND)
        try:
            if created and self._durable:
                _fsync_directory(self._dir)
            size = os.fstat(fd).st_size
            if cut_to is not None and size > cut_to:
                os.ftruncate(fd, cut_to)
                size = cut_to
            size = self._cut_torn_tail(fd, size, path)
        except BaseException:
            os.close(fd)
            raise
        return fd, size

    def _write_id_file(self, path: str, chat_id: str) -> None:
        content = chat_id.encode("utf-8", "surrogatepass")
        try:
            with open(path, "rb") as file:
                if file.read() == content:
                    return
        except FileNotFoundError:
            pass
        _rewrite(self._dir, path, content)

    def _cut_torn_tail(self, fd: int, size: int, path: str) -> int:
        """A file that does not end with a newline had a write cut short: keep it up to its last full line."""
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        end = size
        cut = 0
        while end > 0:
            start = max(0, end - _CHUNK)
            newline = os.pread(fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                cut = start + newline + 1
                break
            end = start
        lines, position = 0, 0
        while position < cut:
            lines += os.pread(fd, min(_CHUNK, cut - position), position).count(b"\n")
            position += _CHUNK
        torn = _Entry(lines + 1, os.pread(fd, size - cut, cut), None, None, reason="torn last line")
        _append_quarantine(path + ".quarantine", [torn])
        os.ftruncate(fd, cut)
        os.fsync(fd)
        logger.warning("%s: cut off a torn last line (line %d, %d bytes) left by an interrupted write; "
                       "its bytes are in %s.quarantine", path, torn.line, size - cut, path)
        return cut

    async def _repair(self, chat_id: str, path: str, scan: _Scan) -> None:
        """Write a load's findings back: quarantine first, then the chat file without those lines."""
        await self._close_handle(chat_id)  # the file may be replaced: reopen on the next append
        quarantined = scan.quarantined
        records = [*quarantined, *([scan.torn] if scan.torn is not None else [])]

        def write_back() -> None:
            _append_quarantine(path + ".quarantine", records)
            if quarantined:
                kept = b"".join(entry.raw + b"\n" for entry in scan.entries if not entry.reason)
                _rewrite(self._dir, path, kept)
            else:
                os.truncate(path, scan.torn_offset)
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

        try:
            await asyncio.to_thread(write_back)
        except OSError as exc:  # the data still loads; the next load tries again
            logger.warning("%s: could not write the repair back (%s); the file is unchanged", path, exc)
            if scan.torn is not None:
                self._rollback[chat_id] = scan.torn_offset  # never append after a torn line
            moved = "skipped for now"
        else:
            moved = f"moved to {path}.quarantine"
            if scan.torn is not None:
                logger.warning("%s: cut off a torn last line (line %d, %d bytes) left by an interrupted write; "
                               "its bytes are in %s.quarantine", path, scan.torn.line, len(scan.torn.raw), path)
        for entry in quarantined:  # one log line each, the only report (never the line's contents)
            logger.warning("%s: line %d %s: %s", path, entry.line, moved, entry.reason)

    async def _roll_back(self, chat_id: str, path: str, handle: _Handle) -> None:
        """After a failed write: drop the handle and cut the file back to its last complete append."""
        self._handles.pop(chat_id, None)
        with contextlib.suppress(OSError):
            await handle.file.close()
        try:
            await asyncio.to_thread(os.truncate, path, handle.size)
        except OSError as exc:
            self._rollback[chat_id] = handle.size  # done before the next append, or that append fails
            logger.warning("%s: could not cut back a failed append (%s); will retry before the next one", path, exc)

    async def _evict(self) -> None:
        while len(self._handles) >= self.max_open_files:
            idle = next((chat for chat in self._handles if not self._busy(chat)), None)
            if idle is None:
                return  # every handle is mid-write: go over the cap for a moment
            await self._close_handle(idle)

    def _busy(self, chat_id: str) -> bool:
        lock = self._locks.get(chat_id)
        return lock is not None and lock.locked()

    async def _close_handle(self, chat_id: str, *, quiet: bool = True) -> None:
        handle = self._handles.pop(chat_id, None)
        if handle is None:
            return
        try:
            await handle.file.close()
        except OSError as exc:
            if not quiet:
                raise
            logger.warning("closing the append handle of chat %r in %s failed: %s", chat_id, self._dir, exc)

    def _list_chats(self) -> list[str]:
        chats: list[str] = []
        with os.scandir(self._dir) as entries:
            for entry in entries:
                if not entry.name.endswith(_SUFFIX) or not entry.is_file(follow_symlinks=False):
                    continue
                if entry.stat(follow_symlinks=False).st_size == 0:
                    continue
                stem = entry.name[: -len(_SUFFIX)]
                chat_id = self._hashed_chat_id(stem) if stem.startswith(_HASHED_PREFIX) else _chat_id_of(stem)
                if chat_id is not None:
                    chats.append(chat_id)
        return sorted(chats)

    def _hashed_chat_id(self, stem: str) -> str | None:
        try:
            with open(os.path.join(self._dir, stem + _ID_SUFFIX), "rb") as file:
                chat_id = file.read().decode("utf-8", "surrogatepass")
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("%s: cannot read the chat id of %s%s: %s", self._dir, stem, _SUFFIX, exc)
            return None
        return chat_id if _stem(chat_id) == stem else None
