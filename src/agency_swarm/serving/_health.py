"""Store health for /healthz: a read and a write, shared by concurrent requests and cached for a second."""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import Callable

from .._base._redact import secret_free_logger
from .._threads._store import ThreadStore

logger = secret_free_logger("agency_swarm.serving")

HEALTH_CACHE_SECONDS = 1.0
"""/healthz reuses the store check's answer this long: a load balancer polling often costs one check (a read and two
small writes) a second."""
HEALTH_TIMEOUT_SECONDS = 2.0
"""A store check that has not answered by then is a failure (so /healthz answers before a balancer gives up)."""
HEALTH_PROBE_CHAT = "agency_swarm.healthz"
"""/healthz reads this chat, writes one item to it and deletes it; the routes refuse this id (400), so no client can
fill it (a read of nothing: an indexed read on SQL stores, a file lookup on files)."""
HEALTH_PROBE_THREAD = "health->probe"
HEALTH_PROBE_ITEM = {"type": "agency_swarm.health_probe"}


class StoreHealth:
    """Whether the app's store answers and takes writes, as /healthz says: a read (`load` of HEALTH_PROBE_CHAT), then
    a write (one item appended to it, then the chat deleted), shared by concurrent requests and reused for
    HEALTH_CACHE_SECONDS after it came, so polling stays cheap. A store that reads but cannot write (disk full,
    read-only) fails it: every turn would fail too.

    `clock` (seconds, monotonic) is there for tests. The problem it reports names the failure's kind, never the
    store's address; the log gets a line when the store goes down or comes back, not one per poll.
    """

    def __init__(self, store: ThreadStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._checked_at: float | None = None
        self._problem: str | None = None
        self._check: asyncio.Task[str | None] | None = None

    async def problem(self) -> str | None:
        """None when the store answered; otherwise what is wrong, fit for the client."""
        if self._checked_at is not None and self.clock() - self._checked_at < HEALTH_CACHE_SECONDS:
            return self._problem
        if self._check is None or self._check.done():
            self._check = asyncio.create_task(self._run())
        return await asyncio.shield(self._check)  # a client that leaves does not cancel the others' check

    async def _run(self) -> str | None:
        problem: str | None = None
        try:
            problem = await asyncio.wait_for(self.probe(), HEALTH_TIMEOUT_SECONDS)
        except TimeoutError:
            problem = f"The thread store did not answer within {HEALTH_TIMEOUT_SECONDS:g} s."
        if problem != self._problem or self._checked_at is None:
            if problem is None:
                logger.info("Health check: the thread store answers.")
            else:  # its kind only: a driver's message may name the host, the user or the database
                logger.warning("Health check: %s", problem)
        self._checked_at, self._problem = self.clock(), problem
        return problem

    async def probe(self) -> str | None:
        """One check now, not shared or cached: None, or what is wrong."""
        try:
            await self.store.load(HEALTH_PROBE_CHAT)
        except Exception as exc:
            return f"The thread store is unavailable ({failure_kind(exc)})."
        try:
            await self.store.append(HEALTH_PROBE_CHAT, HEALTH_PROBE_THREAD, [dict(HEALTH_PROBE_ITEM)])
            await self.store.delete(HEALTH_PROBE_CHAT)
        except Exception as exc:
            return f"The thread store cannot write ({failure_kind(exc)})."
        return None


def failure_kind(exc: BaseException) -> str:
    """The failure's type (the driver's, under our StoreError), and an OSError's errno name (ENOSPC); never its
    message, which may name the host, the user or the database."""
    cause = exc if exc.__cause__ is None else exc.__cause__
    code = errno.errorcode.get(cause.errno, "") if type(cause) is OSError and cause.errno else ""
    return f"{type(cause).__name__} {code}" if code else type(cause).__name__
