"""A2A tasks kept in the app's ThreadStore: each task's snapshots in a store chat of its own, each chat's task ids in
another, so every worker sharing the store (and a restarted one) serves the same tasks. A task is its chat's (its
context id): a caller sees only the tasks of the chats `ChatOwners` lets it read (or write, for a request that
writes), and every other task reads as one that does not exist."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from a2a.server.cluster.task_store import ConcurrentTaskModificationError, StoredTask, VersionedTaskStore
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event as A2AEvent
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict

from ..._remote._protocol import derived_id
from ..._threads._store import Item, ThreadStore
from .._auth._owners import ChatOwners
from .._auth._principal import PRINCIPAL_KEY, Principal

TASK_CHAT = "agency_swarm.a2a-task."
"""Store chat `TASK_CHAT + task id` holds one task's records; `CHAT_TASKS + digest of the chat id` its chat's ids."""
CHAT_TASKS = "agency_swarm.a2a-chat."
RESERVED = "agency_swarm."
"""No context id (chat id) served over A2A starts with this: our own store chats do."""
TASK_KEY = "a2a->task"
INDEX_KEY = "a2a->tasks"
TASK_ID = re.compile(r"[0-9a-f]{32}")
SAVE_BOUND = 30.0
"""Seconds a turn waits for its task's working state to be stored (or its save to fail); past it the turn fails."""
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"})
WRITING = "agency_swarm.a2a-writing"
"""In a ServerCallContext's state: True while the request writes (sends a message, cancels). The state's
`PRINCIPAL_KEY` holds the caller (`_service.PrincipalContexts` copies it from the HTTP request)."""


def new_task_id(context_id: str, message_id: str) -> str:
    """The id of the task a message starts: the same message (a client's retry) names the same task."""
    return derived_id("a2a-task", context_id, message_id)


def record(task: Task, history_at: int, event: A2AEvent | None) -> Item:
    """One save of `task`: the task without the history its earlier records hold (`history_at` entries), and the
    event that made it (what another worker's subscriber is sent).

    Stored as a user message whose text is JSON, so every store (the file store checks items) keeps it as it is."""
    body = Task()
    body.CopyFrom(task)
    del body.history[:]
    data: dict[str, Any] = {
        "task": MessageToDict(body), "history_at": history_at,
        "history": [MessageToDict(entry) for entry in task.history[history_at:]],
    }
    if event is not None:
        data["event"] = MessageToDict(as_response(event))
    return {"role": "user", "content": json.dumps(data, separators=(",", ":"))}


def as_response(event: A2AEvent) -> StreamResponse:
    if isinstance(event, Task):
        return StreamResponse(task=event)
    if isinstance(event, Message):
        return StreamResponse(message=event)
    if isinstance(event, TaskStatusUpdateEvent):
        return StreamResponse(status_update=event)
    return StreamResponse(artifact_update=event)


@dataclass(frozen=True)
class Save:
    """One save of a task as its store chat holds it: its version (1, 2, ...), the task, the event that made it."""

    version: int
    task: dict[str, Any]
    event: dict[str, Any] | None

    def parsed(self) -> Task:
        return ParseDict(self.task, Task(), ignore_unknown_fields=True)

    @property
    def state(self) -> str:
        return str(self.task.get("status", {}).get("state", ""))


def saves_in(items: list[Item]) -> list[Save]:
    """The saves the records of a task's store chat hold, up to the first that settles the task for good: whatever
    a worker wrote after a cancel (or any end) does not count."""
    found: list[Save] = []
    history: list[Any] = []
    for item in items:
        try:
            data = json.loads(item["content"])
            at = int(data["history_at"])
            history = history[:at] + list(data["history"])
            task, event = data["task"], data.get("event")
        except (KeyError, TypeError, ValueError):
            continue  # not one of ours: nothing else writes here
        found.append(Save(len(found) + 1, {**task, "history": history}, event if isinstance(event, dict) else None))
        if found[-1].state in TERMINAL:
            break
    return found


class StoreTasks(VersionedTaskStore):
    """The a2a-sdk's VersionedTaskStore on a ThreadStore (append-only): a save appends what changed since the last
    one; a task's version is the number of its saves, and a save made from an older version than the stored one is
    refused (ConcurrentTaskModificationError), so a worker running a task sees another worker's cancel of it at its
    next save and stops the task.

    `get` and `list` answer a request's context with the tasks its principal may read (write, while it writes),
    by `owners`; a context without a principal sees none. Without a context (our own reads) every task shows."""

    def __init__(self, store: ThreadStore, owners: ChatOwners) -> None:
        self.store, self.owners = store, owners
        self._awaited: dict[str, asyncio.Event] = {}

    @contextlib.asynccontextmanager
    async def saving_working(self, task_id: str) -> AsyncIterator[None]:
        """Around marking `task_id` working: on leaving, that state is stored (or its save failed), so every worker
        reads the task as working while its turn runs. The a2a-sdk stores events after the executor queues them."""
        saved = self._awaited[task_id] = asyncio.Event()
        try:
            yield
            await asyncio.wait_for(saved.wait(), SAVE_BOUND)
        finally:
            self._awaited.pop(task_id, None)

    async def save(
        self, task: Task, *, event: A2AEvent | None, prev: Task | None, prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        try:
            return await self._save(task, event, prev_version)
        finally:
            awaited = self._awaited.get(task.id)
            if awaited is not None and task.status.state == TaskState.TASK_STATE_WORKING:
                awaited.set()

    async def _save(self, task: Task, event: A2AEvent | None, prev_version: TaskVersion) -> TaskVersion:
        saves = await self.saves(task.id)
        last = saves[-1] if saves else None
        if task.status.state == TaskState.TASK_STATE_CANCELED:  # a cancel overwrites any state but an end
            if last is None or last.state in TERMINAL:
                raise ConcurrentTaskModificationError(task.id)
        elif (last.version if last else 0) != _number(prev_version) or (last is not None and last.state in TERMINAL):
            raise ConcurrentTaskModificationError(task.id)
        return await self._append(task, last, event)

    async def _append(self, task: Task, last: Save | None, event: A2AEvent | None) -> TaskVersion:
        if last is None:
            await self.store.append(chat_tasks(task.context_id), INDEX_KEY, [{"role": "user", "content": task.id}])
        at = min(len(last.task["history"]) if last else 0, len(task.history))
        await self.store.append(TASK_CHAT + checked_task_id(task.id), TASK_KEY, [record(task, at, event)])
        return TaskVersion((last.version if last else 0) + 1)

    async def apply(self, task_id: str, event: A2AEvent) -> bool:
        """Write `event` into the stored task as the a2a-sdk applies one, without it (a durable turn's step writes its
        task so, on whichever worker runs it): a Task starts a task that has no saves; a status update replaces the
        status (the old status message joins the history); an artifact update adds its artifact; a message joins the
        history. An ended task takes nothing (False), so a step run again after a crash writes no end twice."""
        saves = await self.saves(task_id)
        last = saves[-1] if saves else None
        if isinstance(event, Task):
            if last is not None:
                return False
            task = event
        else:
            if last is None or last.state in TERMINAL:
                return False
            task = last.parsed()
            applied(task, event)
        await self._append(task, last, None if isinstance(event, Message) else event)
        return True

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> StoredTask | None:
        saves = await self.saves(task_id)
        if not saves:
            return None
        task = saves[-1].parsed()
        if not await self.visible(task, context):
            return None  # another principal's task reads as one that does not exist
        return StoredTask(task, TaskVersion(saves[-1].version))

    async def task(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        stored = await self.get(task_id, context)
        return None if stored is None else stored.task

    async def saves(self, task_id: str) -> list[Save]:
        """The task's saves, oldest first (none: no such task)."""
        if not TASK_ID.fullmatch(task_id or ""):
            return []  # no id we gave out: unknown, whatever it holds
        return saves_in((await self.store.load(TASK_CHAT + task_id)).get(TASK_KEY, []))

    async def visible(self, task: Task, context: ServerCallContext | None) -> bool:
        """Whether the request of `context` may see `task`: read its chat, or write it while the request writes."""
        if context is None:
            return True
        principal = context.state.get(PRINCIPAL_KEY)
        if not isinstance(principal, Principal):
            return False
        return await self.owners.may(task.context_id, principal, reading=not context.state.get(WRITING, False))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if params.context_id:
            index = await self.store.load(chat_tasks(params.context_id))
            ids = list(dict.fromkeys(str(item.get("content")) for item in index.get(INDEX_KEY, [])))
        else:
            ids = [chat[len(TASK_CHAT):] for chat in await self.store.list_chats() if chat.startswith(TASK_CHAT)]
        tasks = [task for task in [await self.task(task_id, context) for task_id in ids] if task is not None]
        tasks = [task for task in tasks if _wanted(task, params)]
        tasks.sort(key=_sort_key, reverse=True)
        start = _page_start(params.page_token)
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        end = start + size
        return ListTasksResponse(
            tasks=tasks[start:end], total_size=len(tasks), page_size=size,
            next_page_token=_page_token(end) if end < len(tasks) else "",
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if TASK_ID.fullmatch(task_id or "") and await self.get(task_id, context) is not None:
            await self.store.delete(TASK_CHAT + task_id)


def applied(task: Task, event: A2AEvent) -> None:
    """`task` changed by a status update, an artifact update or a message, as the a2a-sdk's TaskManager does."""
    if isinstance(event, TaskStatusUpdateEvent):
        if task.status.HasField("message"):
            task.history.append(task.status.message)
        if event.metadata:
            task.metadata.MergeFrom(event.metadata)
        task.status.CopyFrom(event.status)
    elif isinstance(event, TaskArtifactUpdateEvent):
        append_artifact_to_task(task, event)
    elif isinstance(event, Message):
        if task.status.HasField("message"):
            task.history.append(task.status.message)
            task.status.ClearField("message")
        task.history.append(event)


def _number(version: TaskVersion) -> int:
    value = version._value  # the a2a-sdk's versions have no public value; ours are ints
    return value if isinstance(value, int) else -1


def chat_tasks(context_id: str) -> str:
    """The store chat listing the tasks of chat `context_id` (fixed length, whatever the id holds)."""
    return CHAT_TASKS + derived_id("a2a-chat", context_id)


def checked_task_id(task_id: str) -> str:
    if not TASK_ID.fullmatch(task_id):
        raise InvalidParamsError(message="A task id is 32 hexadecimal characters, as this server gives them out.")
    return task_id


def _wanted(task: Task, params: ListTasksRequest) -> bool:
    if params.context_id and task.context_id != params.context_id:
        return False
    if params.status and task.status.state != params.status:
        return False
    if params.HasField("status_timestamp_after"):
        after = params.status_timestamp_after.ToNanoseconds()
        return task.status.HasField("timestamp") and task.status.timestamp.ToNanoseconds() > after
    return True


def _sort_key(task: Task) -> tuple[int, str]:
    stamped = task.status.HasField("timestamp")
    return (task.status.timestamp.ToNanoseconds() if stamped else 0, task.id)


def _page_token(start: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{start}".encode()).decode()


def _page_start(token: str) -> int:
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
        kind, _, number = text.partition(":")
        if kind == "offset" and number.isdigit():
            return int(number)
    except (binascii.Error, UnicodeError, ValueError):
        pass
    raise InvalidParamsError(message="page_token is not one this server gave out; start again without it.")
