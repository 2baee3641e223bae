"""Heartbeats between durable workers: a live worker hands a silent worker's unfinished turns back to the queue.

Open-source DBOS recovers a worker's workflows only when a process with the same executor id launches. Each worker
here writes a heartbeat row every `heartbeat_seconds`; a worker that sees a row older than `expire_after_seconds`
claims it (one claimant: an UPDATE ... RETURNING), puts that executor's PENDING workflows back on their queue
(`DBOS.resume_workflows_async`; the dead worker's queue, which need not be the claimant's: workers of every queue
share the table), then deletes the row. A claimant that dies before deleting leaves a claim that expires in turn.
A turn resumed twice, or one still running somewhere, runs again harmlessly: its id is stored with its message, so
the later run continues it or returns its result, under the chat's turn lock. The same beat keeps the worker's
agency on its queue's row (`_queues`: another agency's workers are refused while it is live).
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg  # type: ignore[import-untyped]
from dbos import DBOS

from .._base._redact import secret_free_logger
from ._queues import AgencyIdentity, claim_queue

logger = secret_free_logger("agency_swarm.durable")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agency_swarm_executors (
    executor_id TEXT PRIMARY KEY,
    beat_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    claimed_by TEXT,
    claimed_at TIMESTAMPTZ
)"""
_BEAT = """
WITH queue AS (
    UPDATE agency_swarm_queues SET beat_at = clock_timestamp() WHERE queue_name = $2 AND agency = $3 RETURNING 1
), worker AS (
    INSERT INTO agency_swarm_executors (executor_id) VALUES ($1)
    ON CONFLICT (executor_id) DO UPDATE SET beat_at = clock_timestamp(), claimed_by = NULL, claimed_at = NULL
)
SELECT count(*) FROM queue"""
_CLAIM = """
UPDATE agency_swarm_executors SET claimed_by = $1, claimed_at = clock_timestamp()
WHERE executor_id <> $1 AND beat_at < clock_timestamp() - make_interval(secs => $2)
  AND (claimed_at IS NULL OR claimed_at < clock_timestamp() - make_interval(secs => $2))
RETURNING executor_id"""
_RELEASE = "DELETE FROM agency_swarm_executors WHERE executor_id = $1 AND claimed_by = $2"
_SLOT_LOCKS = 0x61730002
"""The advisory-lock namespace of worker slots (the turn locks use their own)."""
MAX_SLOTS = 1024


class Supervisor:
    def __init__(
        self, url: str, executor_id: str | None, queue_name: str, identity: AgencyIdentity, beat: float,
        expire_after: float,
    ) -> None:
        self.url, self.executor_id, self.queue_name, self.identity = url, executor_id or "", queue_name, identity
        self._configured = self.executor_id  # blank: a slot is taken at each connect
        self.beat, self.expire_after = beat, expire_after
        self._task: asyncio.Task[None] | None = None
        self._connection: asyncpg.Connection | None = None

    async def connect(self, slot_prefix: str) -> str:
        """Open the heartbeat's connection and claim the queue for this agency (ConfigError when another agency
        uses it); without an executor id, take the first free worker slot `<slot_prefix>-<n>` (a session lock,
        freed at once when a worker dies, so its restart takes the same slot and DBOS recovers that slot's turns at
        launch). Returns the executor id."""
        self.executor_id = self._configured
        self._connection = await asyncpg.connect(self.url)
        with contextlib.suppress(asyncpg.UniqueViolationError):  # two workers making the table at once
            await self._connection.execute(_SCHEMA)
        await claim_queue(self._connection, self.queue_name, self.identity, self.expire_after)
        if not self.executor_id:
            for slot in range(MAX_SLOTS):
                name = f"{slot_prefix}-{slot}"
                if await self._connection.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2))", _SLOT_LOCKS, name):
                    self.executor_id = name
                    break
            else:
                raise RuntimeError(f"agency_swarm.durable: all {MAX_SLOTS} worker slots of {slot_prefix!r} are taken.")
        return self.executor_id

    async def start(self) -> None:
        assert self._connection is not None
        await self._beat(self._connection)
        self._task = asyncio.create_task(self._run(), name=f"agency_swarm.durable heartbeat {self.executor_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._connection is not None:
            await self._connection.close()  # and with it the worker slot's lock
            self._connection = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.beat)  # the heartbeat's period, not a wait for something else
            try:
                await self.tick()
            except Exception as error:  # the database is away, or DBOS failed: never let the heartbeat task die
                logger.warning("Durable heartbeat of %s failed (%s)", self.executor_id, type(error).__name__)
                await self._reconnect()

    async def tick(self) -> list[str]:
        """One beat: this worker's heartbeat, then every expired worker's turns back on the queue. Returns the ids of
        the turns handed back."""
        connection = self._connection
        assert connection is not None
        await self._beat(connection)
        handed: list[str] = []
        for row in await connection.fetch(_CLAIM, self.executor_id, self.expire_after):
            dead = row["executor_id"]
            pending = await DBOS.list_workflows_async(
                status="PENDING", executor_id=dead, load_input=False, load_output=False
            )
            queues: dict[str, list[str]] = {}  # each back on its own queue: the dead worker's may not be this one's
            for workflow in pending:
                if workflow.queue_name is not None:
                    queues.setdefault(workflow.queue_name, []).append(workflow.workflow_id)
            for queue_name, ids in queues.items():
                await DBOS.resume_workflows_async(ids, queue_name=queue_name)
                logger.warning("Worker %s stopped beating: %d of its turns are queued again", dead, len(ids))
                handed += ids
            await connection.execute(_RELEASE, dead, self.executor_id)
        return handed

    async def _beat(self, connection: asyncpg.Connection) -> None:
        """This worker's heartbeat, and its agency's on the queue (which keeps other agencies off it)."""
        if not await connection.fetchval(_BEAT, self.executor_id, self.queue_name, self.identity.key):
            # Only after this worker was silent for expire_after_seconds with no turn left: said, every beat.
            logger.error(
                "Durable queue %r is no longer this agency's (another agency took it while this worker was silent):"
                " stop this worker", self.queue_name,
            )

    async def _reconnect(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close()
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            self._connection = await asyncpg.connect(self.url)
