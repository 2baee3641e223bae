"""A2A tasks kept in the app's ThreadStore: each task's snapshots in a store chat of its own, each chat's task ids in
another, so every worker sharing the store (and a restarted one) serves the same tasks. A task is its chat's (its
context id): a caller sees only the tasks of the chats `ChatOwners` lets it read (or write, for a request that
writes), and every other task reads as one that does not exist."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import OrderedDict
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task
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
KNOWN_LIMIT = 10_000
WRITING = "agency_swarm.a2a-writing"
"""In a ServerCallContext's state: True while the request writes (sends a message, cancels). The state's
`PRINCIPAL_KEY` holds the caller (`_service.PrincipalContexts` copies it from the HTTP request)."""


def new_task_id(context_id: str, message_id: str) -> str:
    """The id of the task a message starts: the same message (a client's retry) names the same task."""
    return derived_id("a2a-task", context_id, message_id)


def record(task: Task, history_at: int) -> Item:
    """One save of `task`: the task without the history its earlier records hold (`history_at` entries).

    Stored as a user message whose text is JSON, so every store (the file store checks items) keeps it as it is."""
    body = Task()
    body.CopyFrom(task)
    del body.history[:]
    data = {
        "task": MessageToDict(body), "history_at": history_at,
        "history": [MessageToDict(entry) for entry in task.history[history_at:]],
    }
    return {"role": "user", "content": json.dumps(data, separators=(",", ":"))}


def folded(items: list[Item]) -> Task | None:
    """The task the records of its store chat add up to (None: none, or none that reads)."""
    last: dict[str, Any] | None = None
    history: list[Any] = []
    for item in items:
        try:
            data = json.loads(item["content"])
            at = int(data["history_at"])
            history = history[:at] + list(data["history"])
            last = data["task"]
        except (KeyError, TypeError, ValueError):
            continue  # not one of ours: nothing else writes here
    if last is None:
        return None
    return ParseDict({**last, "history": history}, Task(), ignore_unknown_fields=True)


class StoreTasks(TaskStore):
    """The a2a-sdk's TaskStore on a ThreadStore (append-only): a save appends what changed since the last one.

    `get` and `list` answer a request's context with the tasks its principal may read (write, while it writes),
    by `owners`; a context without a principal sees none. Without a context (our own reads) every task shows."""

    def __init__(self, store: ThreadStore, owners: ChatOwners) -> None:
        self.store, self.owners = store, owners
        self._known: OrderedDict[str, int] = OrderedDict()
        """History entries already stored, per task id saved by this process (a hint: a wrong one costs bytes)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        known = self._known.get(task.id)
        if known is None:
            stored = await self.load(task.id)
            if stored is None:
                await self.store.append(chat_tasks(task.context_id), INDEX_KEY, [{"role": "user", "content": task.id}])
            known = 0 if stored is None else len(stored.history)
        at = min(known, len(task.history))
        await self.store.append(TASK_CHAT + checked_task_id(task.id), TASK_KEY, [record(task, at)])
        self._known[task.id] = len(task.history)
        self._known.move_to_end(task.id)
        if len(self._known) > KNOWN_LIMIT:
            self._known.popitem(last=False)

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        task = await self.load(task_id)
        if task is None or not await self.visible(task, context):
            return None  # another principal's task reads as one that does not exist
        return task

    async def load(self, task_id: str) -> Task | None:
        """The task, whoever's it is."""
        if not TASK_ID.fullmatch(task_id or ""):
            return None  # no id we gave out: unknown, whatever it holds
        threads = await self.store.load(TASK_CHAT + task_id)
        return folded(threads.get(TASK_KEY, []))

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
        tasks = [task for task in [await self.get(task_id, context) for task_id in ids] if task is not None]
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
            self._known.pop(task_id, None)


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
