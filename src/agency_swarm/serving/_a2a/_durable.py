"""A2A tasks whose turns are durable (`create_app(a2a=True, durable=True)`): a message queues its task's turn on
DBOS, and the turn's step writes the task (its progress, its end) into the store from whichever worker runs it, so a
task whose worker died ends when another worker, or the same one restarted, finishes its turn. The request that sent
the message follows the task's saves, as a subscriber on another worker does."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

from a2a.server.cluster.task_store import StoredTask
from a2a.server.context import ServerCallContext
from a2a.server.events import Event as A2AEvent
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

from ..._base._errors import ConfigError, TurnCancelled, TurnNotRunning, UnknownTurn
from ..._base._events import Event
from ..._base._redact import secret_free_logger
from ..._remote._protocol import INTERRUPTIONS, META, is_progress, meta_of
from ..._turn._results import RunResult
from ...durable import DurableTurns, Observed, TurnFailed
from ._executor import (
    CANCELED_TEXT,
    AgencyExecutor,
    Job,
    Refused,
    _agent_message,
    _finish,
    _interruptions,
    _progress,
    _refuse,
    with_caller,
)
from ._stream import StoreEvents
from ._tasks import TERMINAL, StoreTasks, new_task_id

logger = secret_free_logger("agency_swarm.serving")

OBSERVER = "agency_swarm.a2a"
"""The name the A2A task writer is registered under (`DurableTurns.observe`) on every worker."""
TURN_ID = "turn_id"
"""In the task's metadata (`metadata.agency_swarm.turn_id`): the durable turn running it, what a cancel stops."""
PAUSED = TaskState.TASK_STATE_INPUT_REQUIRED
FAILED_TEXT = "The turn failed inside the server; see its log."


class StoreQueue(EventQueue):
    """The events of a task's TaskUpdater written straight into the task's saves (`StoreTasks.apply`)."""

    def __init__(self, tasks: StoreTasks, task_id: str) -> None:
        self.tasks, self.task_id = tasks, task_id

    async def enqueue_event(self, event: A2AEvent) -> None:
        await self.tasks.apply(self.task_id, event)


def store_updater(tasks: StoreTasks, task_id: str, context_id: str) -> TaskUpdater:
    return TaskUpdater(StoreQueue(tasks, task_id), task_id, context_id)


class TaskWriter:
    """The TurnObserver of an A2A task's durable turn: the task's progress and end, written from the turn's step.
    A step run again after a crash writes no second end: an ended task takes no more saves."""

    def __init__(self, tasks: StoreTasks) -> None:
        self.tasks = tasks

    def _updater(self, data: Mapping[str, Any]) -> TaskUpdater:
        return store_updater(self.tasks, str(data["task_id"]), str(data["context_id"]))

    async def event(self, data: Mapping[str, Any], event: Event) -> None:
        if is_progress(event):
            updater = self._updater(data)
            await updater.update_status(TaskState.TASK_STATE_WORKING, _progress(updater, event, int(data["depth"])))

    async def ended(self, data: Mapping[str, Any], outcome: RunResult | Exception) -> None:
        updater = self._updater(data)
        if isinstance(outcome, RunResult):
            await _finish(updater, outcome, int(data["depth"]))
        elif isinstance(outcome, TurnCancelled):
            await updater.cancel(_agent_message(updater, CANCELED_TEXT))
        elif isinstance(outcome, TurnFailed) and outcome.kind in ("bad_request", "nothing_to_resume"):
            await _refuse(updater, str(outcome), _paused(data))
        elif isinstance(outcome, TurnFailed) and outcome.kind == "chat_paused":
            text = "This chat waits for approvals on the task that paused it; answer that task first."
            await updater.reject(_agent_message(updater, text))
        elif isinstance(outcome, TurnFailed) and outcome.kind == "run_failed":
            await updater.failed(_agent_message(updater, str(outcome)))
        else:
            await updater.failed(_agent_message(updater, FAILED_TEXT))


def _paused(data: Mapping[str, Any]) -> Task | None:
    """The paused task a resume answered (its waiting calls), rebuilt from what the turn was submitted with."""
    waiting = data.get("waiting")
    if not waiting:
        return None
    task = Task(id=str(data["task_id"]), context_id=str(data["context_id"]), status=TaskStatus(state=PAUSED))
    task.status.message.role = Role.ROLE_AGENT
    task.status.message.metadata.update({META: {INTERRUPTIONS: list(waiting)}})
    return task


def settled(task: Task | TaskStatusUpdateEvent) -> bool:
    """Whether a request stops following the task here: it ended, or it waits for input."""
    return TaskState.Name(task.status.state) in TERMINAL or task.status.state == PAUSED


class DurableSends:
    """Messages and cancels of A2A tasks in durable mode: a message's turn is queued on `turns` (the task's id its
    Idempotency-Key: the same message sent again is the same turn), a cancel cancels the task's durable turn."""

    def __init__(self, executor: AgencyExecutor, tasks: StoreTasks, turns: DurableTurns) -> None:
        self.executor, self.tasks, self.turns = executor, tasks, turns
        self.events = StoreEvents(tasks)
        turns.observe(OBSERVER, TaskWriter(tasks))

    async def send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        """The task once it ended or waits for input (at once with `return_immediately`)."""
        stored = await self.start(params, context)
        if not params.configuration.return_immediately and not settled(stored.task):
            async for _ in self.follow(stored):
                pass
        found = await self.tasks.task(stored.task.id)
        return found if found is not None else stored.task

    async def stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[A2AEvent, None]:
        """The task as stored once its turn is queued, then its events until it ends or waits for input."""
        stored = await self.start(params, context)
        yield stored.task
        if not settled(stored.task):
            async for event in self.follow(stored):
                yield event

    async def follow(self, stored: StoredTask) -> AsyncIterator[A2AEvent]:
        async with contextlib.aclosing(self.events.subscribe(stored.task.id, after=stored.version)) as saves:
            async for save in saves:
                yield save.event
                if isinstance(save.event, Task | TaskStatusUpdateEvent) and settled(save.event):
                    return

    async def start(self, params: SendMessageRequest, context: ServerCallContext) -> StoredTask:
        """Store the message on its task (a new one, or the one it names) and queue the turn it asks for."""
        message = params.message
        task_id = message.task_id or new_task_id(message.context_id, message.message_id)
        current = await self.tasks.task(task_id)  # the caller's: checked (`AgencyRequestHandler._checked`)
        if current is not None and TaskState.Name(current.status.state) in TERMINAL:
            raise UnsupportedOperationError(message=f"Task {task_id} has ended; send a new message without its id.")
        if current is None or message.task_id:  # else: the same message again, its turn queued: followed
            updater = store_updater(self.tasks, task_id, message.context_id)
            if current is None:
                await updater.event_queue.enqueue_event(Task(
                    id=task_id, context_id=message.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[message],
                ))
            else:
                await updater.event_queue.enqueue_event(message)
            await self._queue_turn(updater, message, current, context)
        stored = await self.tasks.get(task_id)
        if stored is None:
            raise TaskNotFoundError(message="Task not found in this context.")
        return stored

    async def _queue_turn(
        self, updater: TaskUpdater, message: Message, current: Task | None, context: ServerCallContext
    ) -> None:
        paused = current if current is not None and current.status.state == PAUSED else None
        try:
            job = self.executor.job(message, current)
        except Refused as refusal:
            await _refuse(updater, str(refusal), paused)
            return
        with_caller(job, context, updater.context_id)
        key = updater.task_id if current is None else f"{updater.task_id}:{message.message_id}"
        turn_id = self.turns.turn_id(updater.context_id, key, resume=job.text is None)
        # Working (with the turn to cancel) before the turn is queued: its step's writes come after this one.
        await updater.update_status(TaskState.TASK_STATE_WORKING, metadata={META: {TURN_ID: turn_id}})
        observed = Observed(OBSERVER, {
            "task_id": updater.task_id, "context_id": updater.context_id, "depth": job.depth,
            "waiting": [] if paused is None else _interruptions(paused),
        })
        try:
            await self._submit(job, updater.context_id, key, observed)
        except ConfigError as bad:
            await _refuse(updater, str(bad), paused)
        except Exception:
            logger.error("Chat %r (A2A task): queuing the turn failed", updater.context_id, exc_info=True)
            await updater.failed(_agent_message(updater, FAILED_TEXT))

    async def _submit(self, job: Job, chat_id: str, key: str, observed: Observed) -> None:
        if job.text is not None:
            await self.turns.submit(
                job.text, chat_id=chat_id, recipient_agent=job.recipient, key=key, context=job.context,
                observed=observed, caller_depth=job.depth,
            )
        else:
            await self.turns.resume(
                chat_id=chat_id, approve=job.approve, reject=job.reject, key=key, context=job.context,
                observed=observed,
            )

    async def cancel(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """Cancel the task's durable turn where it stands (as `POST /chats/{id}/turns/{turn_id}:cancel` does, on
        whichever worker runs it); a task paused for approvals has its waiting calls rejected first. Then CANCELED."""
        task = await self.tasks.task(params.id, context)
        if task is None:
            raise TaskNotFoundError
        if TaskState.Name(task.status.state) in TERMINAL:
            raise TaskNotCancelableError
        turn_id = meta_of(task.metadata).get(TURN_ID)
        if task.status.state != PAUSED and isinstance(turn_id, str):
            with contextlib.suppress(TurnNotRunning, UnknownTurn):  # it ended meanwhile: its end is stored
                await self.turns.cancel(task.context_id, turn_id)
            task = await self.tasks.task(params.id) or task
        if task.status.state == PAUSED:
            await self._reject_waiting(task)
        updater = store_updater(self.tasks, task.id, task.context_id)
        await updater.cancel(_agent_message(updater, CANCELED_TEXT))
        final = await self.tasks.task(params.id)
        if final is None or final.status.state != TaskState.TASK_STATE_CANCELED:
            raise TaskNotCancelableError
        return final

    async def _reject_waiting(self, task: Task) -> None:
        """Every call the paused task waits for rejected (durably): the chat goes on, nothing waits for the task."""
        ids = [str(item.get("call_id")) for item in _interruptions(task)]
        try:
            handle = await self.turns.resume(
                chat_id=task.context_id, reject=dict.fromkeys(ids, CANCELED_TEXT), key=f"{task.id}:cancel"
            )
            await handle.result()
        except Exception:
            logger.error("Chat %r: rejecting the calls of a canceled task failed", task.context_id, exc_info=True)
