"""Writes that must finish: awaited to their end through cancellation, and clean-up writes with a time bound."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from .._base._redact import secret_free_logger

logger = secret_free_logger(__name__)

CLEAN_UP_SECONDS = 10.0
"""How long a clean-up write (a cancelled turn's "interrupted" outputs, its save) may hold a cancellation up."""

T = TypeVar("T")


async def finish(work: Awaitable[T], *, seconds: float | None = None) -> T:
    """Await `work` to its end even if this task is cancelled meanwhile, and raise that cancellation afterwards.

    `work` runs in a task of its own, which no cancellation of this one reaches. This task waits for it inside an
    anyio shield when anyio is loaded (anyio's cancel scopes, as FastAPI and Jupyter use them, cancel again at every
    await) and through any number of asyncio cancellations (a second Ctrl-C). With `seconds`, it waits that long at
    most: then `work` is cancelled and TimeoutError raised (the cancellation instead, if one came).
    """
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    cancelled: asyncio.CancelledError | None = None
    with _anyio_shield():
        while not task.done():
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                task.cancel()
                task.add_done_callback(_retrieve)  # nobody awaits it any more
                if cancelled is not None:
                    raise cancelled
                raise TimeoutError(f"did not finish within {seconds} s; it was cut off")
            try:
                await asyncio.wait((task,), timeout=remaining)  # never cancels the task it waits for
            except asyncio.CancelledError as error:
                cancelled = error
    if cancelled is not None:
        raise cancelled from (None if task.cancelled() else task.exception())
    return task.result()


async def clean_up(write: Awaitable[object], what: str) -> None:
    """A clean-up write of a failed or cancelled turn (what keeps its chat valid), run to its end even when this task
    is cancelled again, for at most CLEAN_UP_SECONDS: a hung store cannot hold cancellation up for ever. A write that
    fails (or is cut off by the bound) is logged, not raised: the turn's own error is the one its caller gets."""
    try:
        await finish(write, seconds=CLEAN_UP_SECONDS)
    except Exception as error:
        logger.error("%s failed while the turn was being cut short: %s", what, error,
                     exc_info=not isinstance(error, TimeoutError))


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _anyio_shield() -> AbstractContextManager[object]:
    """A shielded anyio cancel scope if anyio is loaded (only then can one of its scopes be cancelling this task)."""
    anyio = sys.modules.get("anyio")
    if anyio is None:
        return nullcontext()
    scope: AbstractContextManager[object] = anyio.CancelScope(shield=True)
    return scope
