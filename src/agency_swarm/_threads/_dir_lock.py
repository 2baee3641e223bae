"""One process per FileThreadStore directory: an exclusive, non-blocking `flock` on the directory itself.

The lock is taken when the store opens and held until `aclose()` (or until the store is garbage collected, or the
process ends, however it ends: the kernel drops it). A second store on the same directory in this same process takes
the lock over and the first one stops working (`superseded`): that is a notebook cell or a script building its
agency again, and the newer store is the one in use. A forked child shares its parent's lock: a child's inherited
stores refuse to work (`forked`). Linux and macOS; without `fcntl` (Windows), or on a file system that cannot lock
(some NFS set-ups), the rule is not enforced and a warning is logged.
"""

from __future__ import annotations

import os
import weakref

from .._base._errors import StoreError
from .._base._redact import secret_free_logger

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = secret_free_logger(__name__)

SEVERAL_PROCESSES = (
    "For several processes (workers) use SQLThreadStore('postgresql://user@host/db') (or SQLThreadStore("
    "'sqlite:///threads.db') on one host)."
)

_held: weakref.WeakValueDictionary[tuple[int, int], DirectoryLock] = weakref.WeakValueDictionary()
"""The locks this process holds, by (device, inode) of their directory."""


class DirectoryLock:
    """An exclusive lock on `directory`, taken now (StoreError if another process or store holds it)."""

    __slots__ = ("__weakref__", "_release", "directory", "forked", "superseded")

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.forked = False
        """This process is a fork of the one that took the lock: the store must not be used here."""
        self.superseded = False
        """A newer store on the same directory in this process took the lock over: this store must not be used."""
        self._release: weakref.finalize[[int], DirectoryLock] | None = None
        if self._took_over():
            return
        if fcntl is None:  # pragma: no cover - Windows
            logger.warning("%s: no fcntl here; one process per FileThreadStore directory is not enforced", directory)
            return
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            status = os.fstat(fd)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(_in_use(directory)) from None
        except OSError as exc:  # a file system without locks: go on, as the store did before it locked
            os.close(fd)
            logger.warning("%s: cannot lock this directory (%s); one process per FileThreadStore directory is not "
                           "enforced here", directory, exc)
            return
        self._release = weakref.finalize(self, os.close, fd)  # also when the store is dropped without aclose()
        _held[(status.st_dev, status.st_ino)] = self

    def _took_over(self) -> bool:
        """Take the lock of an older store on this directory in this process, which then stops working."""
        try:
            status = os.stat(self.directory)
        except OSError:
            return False
        key = (status.st_dev, status.st_ino)
        older = _held.get(key)
        if older is None or older.forked or older._release is None:
            return False
        older.superseded = True
        fd = older._release.detach()  # the descriptor (and with it the lock) passes to this store
        older._release = None
        if fd is None:
            return False
        self._release = weakref.finalize(self, os.close, fd[2][0])
        _held[key] = self
        return True

    def release(self) -> None:
        """Let another store or process open the directory; idempotent."""
        if self._release is not None:
            self._release()


def _in_use(directory: str) -> str:
    try:
        status = os.stat(directory)
        here = _held.get((status.st_dev, status.st_ino))
    except OSError:
        here = None
    if here is not None and not here.forked:
        return (
            f"FileThreadStore directory {directory} is already open by another FileThreadStore in this process. "
            "Close that one first (await store.aclose(), or await agency.aclose(); `async with Agency(...)` does it), "
            "or give every agency that same store object. Two stores on one directory would write the same files."
        )
    return (
        f"FileThreadStore directory {directory} is in use by another process (a FileThreadStore or an "
        "Agency(threads_dir=...) there): a chat directory takes one process at a time, or their lines would "
        f"interleave in the same files. Stop that process first. {SEVERAL_PROCESSES}"
    )


def _after_fork_in_child() -> None:
    """A forked child shares its parent's lock and open files: its stores refuse to work, and it drops its copy of
    the lock's descriptor (the parent keeps the lock)."""
    for lock in list(_held.values()):
        lock.forked = True
        lock.release()  # closes this process's descriptor only: the lock stays with the parent's
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
