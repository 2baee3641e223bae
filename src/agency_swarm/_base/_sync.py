"""Blocking calls for scripts and notebooks: every turn runs on one long-lived background event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

Inside = tuple[tuple[object, str], ...]
"""(lock holder, chat id) of turns in progress: their thread manager and, if it locks turns itself, their store."""

INSIDE: ContextVar[Inside] = ContextVar("agency_swarm_inside", default=())
"""What the running code is inside: set while a function tool runs (in its task, and copied into the worker thread
of a sync tool and into get_response_sync's loop). Only around tools, never across an event: a stream's turn runs in
its reader's context, and a mark left there between events would outlive a reader that stops early."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _portal() -> asyncio.AbstractEventLoop:
    """One loop for all sync calls: an AsyncOpenAI client stays bound to the loop it first ran on."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="agency-swarm-sync", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even when this thread already runs a loop (Jupyter)."""
    loop = _portal()
    if threading.current_thread().name == "agency-swarm-sync":
        coroutine.close()
        raise RuntimeError("get_response_sync cannot be called from inside an agency_swarm tool; await get_response.")
    inside = INSIDE.get()
    if inside:  # called by a tool (in its worker thread): the turn it starts must know which turns wait for it
        coroutine = _inside(inside, coroutine)
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # Ctrl-C in the caller stops the turn too
        raise


async def _inside(inside: Inside, coroutine: Coroutine[Any, Any, T]) -> T:
    """`coroutine` on the background loop, marked as running inside the caller's turns: a turn it starts of a chat
    the calling tool runs in raises ReentrantTurn instead of waiting for ever. (asyncio happens to copy the calling
    thread's context into the task too; this does not depend on it.)"""
    INSIDE.set(inside)
    return await coroutine
