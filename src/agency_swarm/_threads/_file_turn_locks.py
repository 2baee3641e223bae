"""SQLite's turn locks between processes on one host: a file lock per chat, taken in arrival order (FIFO).

docs/design/serving.md ("SQLite locks turns with a file lock per chat") says why it is built this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite turns are then not locked across processes
    fcntl = None  # type: ignore[assignment]

TURN_LOCK_POLL_S = (0.001, 0.05)
"""A chat lock still held once this process's turn came (its predecessor gave up its place) is tried again after
1 ms, then less often, up to every 50 ms. The tail's lock, held for a read and a write, is polled the same way."""
AVAILABLE = fcntl is not None
"""Windows has no flock: SQLite turns are not locked across processes there."""
TOKEN_BYTES = 8
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass
class TurnHold:
    """A held chat: the chat lock's descriptor, and this holder's place in the chat's queue (a FIFO it keeps open)."""

    lock_fd: int
    place_fd: int
    place_path: str


class FileTurnLocks:
    """Turn locks between processes on one host: an exclusive `flock` on one small file per chat, which turns take in
    the order they asked for it.

    Files live in `<database>.turn-locks/`, named by a hash of the chat id (so any chat id is a safe name). The
    `flock` excludes: it belongs to the open file, so two stores (or agencies) in one process exclude each other as
    two processes do, and it dies with its process, so a crashed holder never blocks a chat. The order comes from
    a queue in front of it (a CLH queue): each turn makes a place, a named FIFO it holds open, writes its name to
    the chat's `.tail` file and reads the name it replaces, its predecessor's place. It waits until no one holds
    that FIFO open (its read end then reports end of file: the predecessor released, gave up or died, all alike to
    the kernel), then takes the `flock`. A releasing process that wants the chat again queues behind the waiter
    instead of taking it straight back. The queue only orders: exclusion is the `flock` alone, so a place given up
    early (a cancelled wait) costs its successor a few polls of the `flock`, never a second holder.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def _base(self, chat_id: str) -> str:
        return os.path.join(self.directory, hashlib.blake2b(chat_id.encode("utf-8"), digest_size=16).hexdigest())

    def _open(self, path: str) -> int:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | CLOEXEC, 0o600)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.directory, 0o700)
            return os.open(path, os.O_RDWR | os.O_CREAT | CLOEXEC, 0o600)

    async def acquire(self, chat_id: str) -> TurnHold:
        """Wait until this store holds the chat's lock, after every turn that asked for it before."""
        base = self._base(chat_id)
        alone = self._lock_if_alone(base)
        if alone is not None:
            return TurnHold(alone, -1, "")
        place_path, place_fd = self._make_place(base)
        lock_fd = -1
        try:
            predecessor = await self._join_queue(base, place_path)
            if predecessor:
                await _wait_until_released(f"{base}.{predecessor}")
            lock_fd = self._open(base)
            await _poll_flock(lock_fd)
            return TurnHold(lock_fd, place_fd, place_path)
        except BaseException:
            if lock_fd >= 0:
                os.close(lock_fd)
            _leave(place_path, place_fd)
            raise

    def release(self, hold: TurnHold) -> None:
        """Let the chat go (the flock first, so the successor finds it free), then this holder's place."""
        try:
            os.close(hold.lock_fd)  # closing the only descriptor of the open file releases its flock
        finally:
            if hold.place_path:
                _leave(hold.place_path, hold.place_fd)

    def _lock_if_alone(self, base: str) -> int | None:
        """The common case, cheaply: no turn queued for the chat (the tail names no place still there) and its lock
        free. Taken without a place: a turn that queues meanwhile finds no place to wait on and polls the flock."""
        if _someone_queued(base):
            return None
        fd = self._open(base)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def _make_place(self, base: str) -> tuple[str, int]:
        """A FIFO named `<chat hash>.<random token>`, open for reading and writing (a writer: its successor's end of
        file comes only when this process lets it go, or dies)."""
        path = f"{base}.{secrets.token_hex(TOKEN_BYTES)}"
        try:
            os.mkfifo(path, 0o600)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.directory, 0o700)
            os.mkfifo(path, 0o600)
        try:
            return path, os.open(path, os.O_RDWR | os.O_NONBLOCK | CLOEXEC)
        except BaseException:
            os.unlink(path)
            raise

    async def _join_queue(self, base: str, place_path: str) -> str:
        """Write this place's token to the chat's tail, under the tail's flock; return the token it replaced."""
        token = place_path.rpartition(".")[2].encode("ascii")
        fd = self._open(base + ".tail")
        try:
            await _poll_flock(fd)  # held for a read and a write: microseconds
            predecessor = os.pread(fd, len(token), 0)
            os.pwrite(fd, token, 0)
            return predecessor.decode("ascii", "replace") if len(predecessor) == len(token) else ""
        finally:
            os.close(fd)  # unlocks


def _someone_queued(base: str) -> bool:
    """The chat's tail names a place that is still there (waiting, holding, or left behind by a crash)."""
    try:
        fd = os.open(base + ".tail", os.O_RDONLY | CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        token = os.pread(fd, 2 * TOKEN_BYTES, 0).decode("ascii", "replace")
    finally:
        os.close(fd)
    return len(token) == 2 * TOKEN_BYTES and os.path.lexists(f"{base}.{token}")


async def _poll_flock(fd: int) -> None:
    """Take the exclusive flock on `fd`, trying again with growing pauses while another open file holds it (no
    thread sits in a blocking call that a cancelled turn could not take back)."""
    pause, longest = TURN_LOCK_POLL_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)


async def _wait_until_released(path: str) -> None:
    """Wait until no process holds the FIFO at `path` open: its owner released its turn, gave up waiting or died."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | CLOEXEC)
    except FileNotFoundError:
        return  # released and removed already
    try:
        while True:
            try:
                if os.read(fd, 64) == b"":
                    break  # end of file: no writer left
            except BlockingIOError:
                pass  # its owner still holds it
            await _readable(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a crashed owner left it behind (one that released removed it before closing)


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _leave(path: str, fd: int) -> None:
    """Give up a place: removed first, so a successor that finds no file knows it was released."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    finally:
        os.close(fd)
