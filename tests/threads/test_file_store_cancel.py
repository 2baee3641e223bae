"""A FileThreadStore append that is cancelled while a worker thread writes it still finishes it, under the chat's
lock: the file stays whole and the store's idea of its size stays right (a later failed append cuts back to it)."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from aiofiles.threadpool.binary import AsyncFileIO

from agency_swarm import FileThreadStore
from agency_swarm._base._errors import StoreError
from agency_swarm._threads import _file_store as file_store_module


def msg(n: int, pad: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n}", "pad": "x" * pad}


async def test_a_cancelled_large_append_is_finished_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileThreadStore(tmp_path / "threads")
    await store.append("c", "user->CEO", [msg(1)])
    real_write = store._write
    entered, release, written = threading.Event(), threading.Event(), threading.Event()

    def slow_write(fd: int, data: bytes) -> None:  # a worker thread's write that the test holds up
        entered.set()
        release.wait()
        os.write(fd, data)
        written.set()

    async def held_write(file: AsyncFileIO, data: bytes) -> None:
        await asyncio.to_thread(slow_write, file.fileno(), data)

    monkeypatch.setattr(store, "_write", held_write)
    big = msg(2, pad=file_store_module.INLINE_WRITE_BYTES)  # goes to a worker thread
    append = asyncio.ensure_future(store.append("c", "user->CEO", [big]))
    await asyncio.to_thread(entered.wait)
    append.cancel()  # while the worker writes
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await append
    await asyncio.to_thread(written.wait)

    async def disk_full(file: AsyncFileIO, data: bytes) -> None:
        await real_write(file, data[:15])  # part of the append reached the file, then the disk filled up
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store, "_write", disk_full)
    with pytest.raises(StoreError, match="No space left"):
        await store.append("c", "user->CEO", [msg(3)])
    assert await store.load("c") == {"user->CEO": [msg(1), big]}  # cut back to after the cancelled append
    await store.aclose()
