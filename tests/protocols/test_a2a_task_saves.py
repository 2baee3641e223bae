"""The A2A task store's promise to a running turn: once it marks its task working, every worker reads it working.
The a2a-sdk stores a queued event on its own task, so the turn waits for that save before it calls a model."""

from __future__ import annotations

import asyncio

import pytest
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.cluster.version import TaskVersion
from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus

from agency_swarm import MemoryThreadStore
from agency_swarm.serving._a2a._tasks import StoreTasks, new_task_id

BOUND = 10


def tasks_on(store: MemoryThreadStore) -> StoreTasks:
    return StoreTasks(store, owners=None)  # type: ignore[arg-type]  # no request context: owners are not asked


def task(task_id: str, state: TaskState.ValueType) -> Task:
    return Task(id=task_id, context_id="chat", status=TaskStatus(state=state))


async def test_marking_working_returns_only_once_another_reader_sees_it_working() -> None:
    store = MemoryThreadStore()
    tasks, reader = tasks_on(store), tasks_on(store)
    task_id = new_task_id("chat", "m1")
    first = await tasks.save(task(task_id, TaskState.TASK_STATE_SUBMITTED), event=None, prev=None,
                             prev_version=TaskVersion.MISSING, context=None)  # type: ignore[arg-type]
    queued = asyncio.Event()

    async def the_sdk_stores_it_later() -> None:
        await queued.wait()
        await tasks.save(task(task_id, TaskState.TASK_STATE_WORKING), event=None, prev=None, prev_version=first,
                         context=None)  # type: ignore[arg-type]

    storing = asyncio.create_task(the_sdk_stores_it_later())
    async with asyncio.timeout(BOUND):
        async with tasks.saving_working(task_id):
            queued.set()  # as updater.start_work() does: queue it, return at once
        seen = await reader.task(task_id)
    await storing
    assert seen is not None
    assert seen.status.state == TaskState.TASK_STATE_WORKING


async def test_a_refused_working_save_does_not_hold_the_turn() -> None:
    store = MemoryThreadStore()
    tasks = tasks_on(store)
    task_id = new_task_id("chat", "m2")
    await tasks.save(task(task_id, TaskState.TASK_STATE_SUBMITTED), event=None, prev=None,
                     prev_version=TaskVersion.MISSING, context=None)  # type: ignore[arg-type]
    async with asyncio.timeout(BOUND):
        async with tasks.saving_working(task_id):
            with pytest.raises(ConcurrentTaskModificationError):  # an old version: another worker moved it on
                await tasks.save(task(task_id, TaskState.TASK_STATE_WORKING), event=None, prev=None,
                                 prev_version=TaskVersion(7), context=None)  # type: ignore[arg-type]
    assert (await tasks.task(task_id)).status.state == TaskState.TASK_STATE_SUBMITTED  # type: ignore[union-attr]
