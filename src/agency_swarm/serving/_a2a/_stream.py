"""The a2a-sdk's TaskEventStream on our store: a task's saves are its events, so a worker that does not run a task
follows it (SubscribeToTask) by reading the task's saves as they come; and the worker running a task watches them for
a cancel another worker stored (CancelTask)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.server.events import Event as A2AEvent
from a2a.types.a2a_pb2 import StreamResponse, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict

from ..._base._redact import secret_free_logger
from ._tasks import Save, StoreTasks

logger = secret_free_logger("agency_swarm.serving")

POLL_S = 0.2
"""How often a subscriber on a worker that does not run the task reads the task's saves."""
CANCEL_POLL_S = 0.5
"""How often the worker running a task looks for a cancel stored by another worker."""


class StoreEvents(TaskEventStream):
    """Events are written with the saves (`StoreTasks.save`): publishing adds nothing; a subscriber reads the saves
    after the version it knows, every POLL_S, until the a2a-sdk's handler stops at the task's end or pause."""

    def __init__(self, tasks: StoreTasks) -> None:
        self.tasks = tasks

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        del task_id, event  # the save that made the event holds it

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        seen = 0
        while True:
            for save in (await self.tasks.saves(task_id))[seen:]:
                seen = save.version
                version = TaskVersion(save.version)
                if version.is_after(after):
                    yield VersionedEvent(event=event_of(save), version=version)
            await asyncio.sleep(POLL_S)

    async def destroy(self, task_id: str) -> None:
        del task_id  # nothing is kept per task


def event_of(save: Save) -> A2AEvent:
    """The event a save holds; a save without one (a direct write) as the status update it amounts to."""
    if save.event is not None:
        response = ParseDict(save.event, StreamResponse(), ignore_unknown_fields=True)
        kind = response.WhichOneof("payload")
        if kind is not None:
            found: A2AEvent = getattr(response, kind)
            return found
    task = save.parsed()
    return TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)


@contextlib.asynccontextmanager
async def stopped_when_canceled(tasks: StoreTasks, task_id: str) -> AsyncIterator[None]:
    """Run the block (a task's turn) until it ends, or until another worker stores the task as CANCELED: then the
    block's task is cancelled, at once, not only at its next save."""
    turn = asyncio.current_task()
    watcher = asyncio.create_task(_watch(tasks, task_id, turn))
    try:
        yield
    except asyncio.CancelledError:
        fired = watcher.done() and not watcher.cancelled() and watcher.result()
        if fired and turn is not None and turn.uncancel() == 0:  # the watcher's cancel alone: say so instead
            raise CanceledElsewhere(task_id) from None
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


class CanceledElsewhere(Exception):
    """Another worker canceled the task whose turn this worker ran: the turn is stopped."""


async def _watch(tasks: StoreTasks, task_id: str, turn: asyncio.Task[object] | None) -> bool:
    """True once the turn was cancelled because the task is stored CANCELED."""
    while True:
        await asyncio.sleep(CANCEL_POLL_S)
        try:
            saves = await tasks.saves(task_id)
        except Exception:
            logger.warning("A2A task %s: reading it for a cancel failed", task_id, exc_info=True)
            continue
        if saves and saves[-1].state == "TASK_STATE_CANCELED" and turn is not None:
            turn.cancel("another worker canceled this task")
            return True
