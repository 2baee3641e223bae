"""How many of a queue's turns wait to start: one count of DBOS's ENQUEUED rows, read when /metrics is scraped.

The count is the queue's, not a worker's: whichever worker answers a scrape reads it once, so summing workers never
counts a turn twice. It has a connection of its own (the heartbeat's is busy on its own schedule), opened at the
first read and kept; `workflow_status` has an index on `status`, and ENQUEUED rows are few."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg  # type: ignore[import-untyped]

from .._base._redact import secret_free_logger

logger = secret_free_logger("agency_swarm.durable")

READ_TIMEOUT_SECONDS = 5.0
_QUEUED = "SELECT count(*) FROM dbos.workflow_status WHERE status = 'ENQUEUED' AND queue_name = $1"


class QueueDepth:
    """The queued (not yet started) turns of `queue`, read on demand."""

    def __init__(self, database_url: str, queue: str) -> None:
        self.url, self.queue = database_url, queue
        self._connection: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()

    async def read(self) -> int | None:
        """The count now, or None when the database does not answer within `READ_TIMEOUT_SECONDS`."""
        async with self._lock:  # one query at a time on the connection, however many scrapes come at once
            try:
                return await asyncio.wait_for(self._count(), READ_TIMEOUT_SECONDS)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                logger.warning("Reading the durable queue's depth failed (%s)", type(error).__name__)
                await self._drop()
                return None

    async def _count(self) -> int:
        if self._connection is None:
            self._connection = await asyncpg.connect(self.url)
        count: int = await self._connection.fetchval(_QUEUED, self.queue)
        return count

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.terminate()

    async def aclose(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()
