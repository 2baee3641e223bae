"""The a2a-sdk's TaskEventStream on our store: a task's saves are its events, so a worker that does not run a task
follows it (SubscribeToTask) by reading the task's saves as they come."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.server.events import Event as A2AEvent
from a2a.types.a2a_pb2 import StreamResponse, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict

from ._tasks import Save, StoreTasks

POLL_S = 0.2
"""How often a subscriber on a worker that does not run the task reads the task's saves."""


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
