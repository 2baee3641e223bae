"""FileThreadStore's attachment bytes: one file per blob under `blobs/<sha256>`, and per chat a directory
`<chat>.attachments/` of hard links to the blobs it holds, so a blob's link count says how many chats hold it."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Collection, Mapping

from .._base._errors import StoreError
from ._writes import finish

BLOBS = "blobs"  # chat files always have a suffix, so no chat can be named this
LINKS_SUFFIX = ".attachments"
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def put_blobs(directory: str, links: str, blobs: Mapping[str, bytes], durable: bool) -> None:
    """Write each blob the store lacks (temp file, then rename), then link it into the chat's directory. Runs in a
    worker thread, under the store's blob lock."""
    pool = os.path.join(directory, BLOBS)
    for made in (pool, links):
        with contextlib.suppress(FileExistsError):
            os.mkdir(made, 0o700)
    for digest, data in blobs.items():
        if not _DIGEST.fullmatch(digest):
            raise StoreError(f"attachment digest {digest!r} is not a sha256 hex digest.")
        link = os.path.join(links, digest)
        if os.path.exists(link):
            continue
        shared = os.path.join(pool, digest)
        if not os.path.exists(shared):
            fd, temp = tempfile.mkstemp(dir=pool, prefix=".put-", suffix=".tmp")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                    if durable:
                        file.flush()
                        os.fsync(file.fileno())
                os.replace(temp, shared)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        try:
            os.link(shared, link)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: the chat keeps a copy of its own
            shutil.copyfile(shared, link)
    if durable:
        _fsync_path(pool)
        _fsync_path(links)


def load_blobs(links: str, digests: Collection[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for digest in digests:
        if not _DIGEST.fullmatch(digest):
            continue
        try:
            with open(os.path.join(links, digest), "rb") as file:
                found[digest] = file.read()
        except FileNotFoundError:
            continue
    return found


def drop_links(directory: str, links: str) -> None:
    """A deleted chat's links go, and each blob no other chat links to (its link count is down to 1)."""
    pool = os.path.join(directory, BLOBS)
    try:
        names = os.listdir(links)
    except FileNotFoundError:
        return
    for name in names:
        os.unlink(os.path.join(links, name))
        shared = os.path.join(pool, name)
        try:
            if os.stat(shared).st_nlink <= 1:
                os.unlink(shared)
        except FileNotFoundError:
            pass
    os.rmdir(links)


class FileBlobs(abc.ABC):
    """The attachment half of FileThreadStore (see `AttachmentStore`); it uses the store's directory, its chat
    paths and its checks."""

    stores_attachments = True
    _dir: str
    _durable: bool

    @abc.abstractmethod
    def _path(self, chat_id: str) -> str: ...

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    @property
    def _blob_lock(self) -> asyncio.Lock:
        lock: asyncio.Lock | None = self.__dict__.get("_blob_lock_")
        if lock is None:
            lock = self.__dict__["_blob_lock_"] = asyncio.Lock()
        return lock

    def _links(self, chat_id: str) -> str:
        return self._path(chat_id)[: -len(".jsonl")] + LINKS_SUFFIX

    async def put_attachments(self, chat_id: str, blobs: Mapping[str, bytes]) -> None:
        links = self._links(chat_id)
        self._check_open()
        if not blobs:
            return
        async with self._blob_lock:
            self._check_open()
            try:  # a worker thread cannot be stopped: finished even if this task is cancelled meanwhile
                await finish(asyncio.to_thread(put_blobs, self._dir, links, dict(blobs), self._durable))
            except OSError as exc:
                raise StoreError(f"cannot store attachments of chat {chat_id!r} in {self._dir}: {exc}") from exc

    async def load_attachments(self, chat_id: str, digests: Collection[str]) -> dict[str, bytes]:
        links = self._links(chat_id)
        self._check_open()
        try:
            return await asyncio.to_thread(load_blobs, links, list(digests))
        except OSError as exc:
            raise StoreError(f"cannot read attachments of chat {chat_id!r} in {self._dir}: {exc}") from exc

    async def _drop_attachments(self, chat_id: str) -> None:
        links = self._links(chat_id)
        async with self._blob_lock:
            try:
                await finish(asyncio.to_thread(drop_links, self._dir, links))
            except OSError as exc:
                raise StoreError(f"cannot delete attachments of chat {chat_id!r} in {self._dir}: {exc}") from exc
