"""The AgentExecutor that runs the agency's turns for A2A tasks: a task is a turn, its progress status updates, its
final output an artifact, a pause for approvals INPUT_REQUIRED until the next message approves or rejects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value

from ..._agency._agency import Agency
from ..._base._errors import ChatPaused, ConfigError, RunError, StoreError
from ..._base._events import Event
from ..._base._redact import secret_free_logger
from ..._remote._protocol import (
    DEPTH,
    EVENT,
    INTERRUPTIONS,
    META,
    as_text,
    is_progress,
    message_data,
    message_text,
    meta_of,
    progress_text,
)
from ..._turn._results import RunResult
from ..._turn._state import CALLER_DEPTH
from .._auth._principal import PRINCIPAL_KEY, Principal
from .._auth._principal import RequestContext as CallerContext
from ._stream import CanceledElsewhere, stopped_when_canceled
from ._tasks import StoreTasks

logger = secret_free_logger("agency_swarm.serving")

APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "ok"})
REJECT_WORDS = frozenset({"reject", "rejected", "no", "n", "deny"})
HOW_TO_ANSWER = (
    'Answer on this task: "approve" or "reject" (every waiting call), or a data part {"approve": [call ids], '
    '"reject": [call ids] or {call id: message}}.'
)
CANCELED_TEXT = "The task was canceled."


class Refused(Exception):
    """A message the task cannot take: the text says why and what to send instead."""


@dataclass(kw_only=True)
class Job:
    """What a message asks for: a new turn (`text`), or decisions on the calls a paused one waits for."""

    text: str | None = None
    recipient: str | None = None
    context: CallerContext[Any] | None = None
    depth: int = 0
    approve: list[str] = field(default_factory=list)
    reject: dict[str, str | None] = field(default_factory=dict)


def with_caller(job: Job, context: ServerCallContext, chat_id: str) -> None:
    """Tools of the job's turn see the caller the request's context holds, as on the chat routes."""
    principal = context.state.get(PRINCIPAL_KEY)
    if isinstance(principal, Principal):
        job.context = CallerContext(principal, chat_id)


class AgencyExecutor(AgentExecutor):
    """Runs one turn of the agency per A2A request, in the chat the task's context id names."""

    def __init__(self, agency: Agency, tasks: StoreTasks | None = None) -> None:
        self.agency, self.tasks = agency, tasks

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, chat_id, message = str(context.task_id), str(context.context_id), context.message
        current = context.current_task
        updater = TaskUpdater(event_queue, task_id, chat_id)
        if current is None:
            await event_queue.enqueue_event(Task(
                id=task_id, context_id=chat_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[] if message is None else [message],
            ))
        waiting = current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        try:
            job = self.job(message, current)
        except Refused as refusal:
            await _refuse(updater, str(refusal), current if waiting else None)
            return
        with_caller(job, context.call_context, chat_id)
        token = CALLER_DEPTH.set(job.depth)
        try:
            if self.tasks is None:
                await self._run(updater, chat_id, task_id, job, current if waiting else None)
            else:
                async with stopped_when_canceled(self.tasks, task_id):  # a cancel on another worker stops it here
                    await self._run(updater, chat_id, task_id, job, current if waiting else None)
        except CanceledElsewhere:
            await updater.cancel(_agent_message(updater, CANCELED_TEXT))  # this worker's readers hear of it too
        finally:
            CALLER_DEPTH.reset(token)

    async def _run(self, updater: TaskUpdater, chat_id: str, task_id: str, job: Job, paused: Task | None) -> None:
        try:
            if job.text is not None:
                stream = self.agency.get_response_stream(
                    job.text, job.recipient, chat_id=chat_id, turn_id=task_id, context=job.context
                )
            else:
                stream = self.agency.resume_stream(chat_id, approve=job.approve, reject=job.reject, context=job.context)
            await self._start_work(updater, task_id)
            async with stream:
                async for event in stream:
                    if is_progress(event):
                        await updater.update_status(TaskState.TASK_STATE_WORKING, _progress(updater, event, job.depth))
            await _finish(updater, stream.result, job.depth)
        except ChatPaused as waiting:
            text = (
                "This chat waits for approval of "
                + ", ".join(f"{item.call_id} ({item.agent}.{item.tool})" for item in waiting.interruptions)
                + " on the task that paused it; answer that task first."
            )
            await updater.reject(_agent_message(updater, text))
        except ConfigError as bad:
            await _refuse(updater, str(bad), paused)
        except RunError as failed:
            await updater.failed(_agent_message(updater, str(failed)))
        except StoreError:
            logger.error("Chat %r (A2A task): the store failed", chat_id, exc_info=True)
            await updater.failed(_agent_message(updater, "The thread store is unavailable; try again."))
        except Exception:
            logger.error("Chat %r (A2A task): the turn failed", chat_id, exc_info=True)
            await updater.failed(_agent_message(updater, "The turn failed inside the server; see its log."))

    async def _start_work(self, updater: TaskUpdater, task_id: str) -> None:
        if self.tasks is None:
            await updater.start_work()
            return
        async with self.tasks.saving_working(task_id):  # read as working on every worker before the turn starts
            await updater.start_work()

    def job(self, message: Message | None, current: Task | None) -> Job:
        """What `message` asks for, on the task `current` (None: a new one); Refused says why it cannot be done."""
        if message is None:
            raise Refused("The request has no message.")
        meta = meta_of(message.metadata)
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            return _decisions(message, current)
        depth = meta.get(DEPTH, 0)
        if isinstance(depth, float) and depth.is_integer():
            depth = int(depth)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise Refused(f"metadata.{META}.{DEPTH} must be an integer >= 0 (the sender's depth in its chart).")
        limit = self.agency.max_recursion_depth
        if depth > limit:
            raise Refused(
                f"The depth limit is reached: this message comes at depth {depth}, and this agency answers messages "
                f"at depth {limit} at most. Answer with what you have."
            )
        text = message_text(message)
        if not text.strip():
            raise Refused("The message has no text; send what you ask in a text part.")
        recipient = meta.get("recipient_agent")
        entries = [agent.name for agent in self.agency.entry_points]
        if recipient is not None and recipient not in entries:
            raise Refused(f"recipient_agent must be one of: {', '.join(entries)}.")
        return Job(text=text, recipient=recipient, depth=depth)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """A task paused for approvals is answered first (every waiting call rejected: the chat goes on, nothing
        waits for a task that ended); then the task is CANCELED. A running task's turn is stopped by the SDK
        cancelling `execute`, which saves what the turn stored."""
        task = context.current_task
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            ids = [str(item.get("call_id")) for item in _interruptions(task)]
            try:
                await self.agency.resume(str(context.context_id), reject=dict.fromkeys(ids, CANCELED_TEXT))
            except Exception:
                logger.error("Chat %r: rejecting the calls of a canceled task failed", context.context_id,
                             exc_info=True)
        await updater.cancel(_agent_message(updater, CANCELED_TEXT))


async def _refuse(updater: TaskUpdater, text: str, paused: Task | None) -> None:
    """A new task is REJECTED; a paused one stays INPUT_REQUIRED, waiting for the same calls."""
    if paused is None:
        await updater.reject(_agent_message(updater, text))
    else:
        await updater.requires_input(_agent_message(updater, text, {INTERRUPTIONS: _interruptions(paused)}))


def _decisions(message: Message, current: Task) -> Job:
    """Decisions on the waiting calls: a data part {"approve": [...], "reject": [...] or {...}}, or one word."""
    waiting = [str(item.get("call_id")) for item in _interruptions(current)]
    for data in message_data(message):
        if isinstance(data, dict) and ("approve" in data or "reject" in data):
            approve, reject = data.get("approve", []), data.get("reject", [])
            if not isinstance(approve, list) or not all(isinstance(item, str) for item in approve):
                raise Refused(f'"approve" must be a list of call ids. {HOW_TO_ANSWER}')
            if isinstance(reject, list) and all(isinstance(item, str) for item in reject):
                return Job(approve=approve, reject=dict.fromkeys(reject))
            if isinstance(reject, dict) and all(isinstance(text, str | None) for text in reject.values()):
                return Job(approve=approve, reject={str(key): text for key, text in reject.items()})
            raise Refused(f'"reject" must be a list of call ids or an object {{call id: message}}. {HOW_TO_ANSWER}')
    word = message_text(message).strip().lower().rstrip(".!")
    if word in APPROVE_WORDS:
        return Job(approve=waiting)
    if word in REJECT_WORDS:
        return Job(reject=dict.fromkeys(waiting))
    raise Refused(f"This task waits for approval of {', '.join(waiting) or 'nothing'}. {HOW_TO_ANSWER}")


def _interruptions(task: Task) -> list[dict[str, Any]]:
    found = meta_of(task.status.message.metadata).get(INTERRUPTIONS) if task.status.HasField("message") else None
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []


def _agent_message(updater: TaskUpdater, text: str, meta: dict[str, Any] | None = None) -> Message:
    return updater.new_agent_message([Part(text=text)], metadata=None if meta is None else {META: meta})


def _progress(updater: TaskUpdater, event: Event, depth_base: int) -> Message:
    """A status message for one event of the turn, tagged with its agent and its depth in the caller's chart."""
    data = event.to_dict()
    data["depth"] = event.depth + depth_base
    return _agent_message(updater, progress_text(event), {"agent": event.agent, DEPTH: data["depth"], EVENT: data})


async def _finish(updater: TaskUpdater, result: RunResult, depth_base: int) -> None:
    """INPUT_REQUIRED with the waiting calls, or the final output as an artifact and COMPLETED."""
    if result.paused:
        waiting = [
            {"agent": item.agent, "caller": item.caller, DEPTH: item.depth + depth_base, "call_id": item.call_id,
             "tool": item.tool, "arguments": item.arguments}
            for item in result.interruptions
        ]
        listing = "; ".join(f"{item['agent']} wants to run {item['tool']}({item['arguments']}) [{item['call_id']}]"
                            for item in waiting)
        text = f"Approval needed: {listing}. {HOW_TO_ANSWER}"
        await updater.requires_input(_agent_message(updater, text, {INTERRUPTIONS: waiting}))
        return
    text = as_text(result.final_output)
    parts = [Part(text=text)]
    if not isinstance(result.final_output, str):
        parts.append(Part(data=ParseDict(_jsonable(result.final_output), Value()), media_type="application/json"))
    await updater.add_artifact(parts, name="final_output", metadata={META: {"agent": result.agent}})
    await updater.complete(_agent_message(updater, text, {"agent": result.agent}))


def _jsonable(output: Any) -> Any:
    from fastapi.encoders import jsonable_encoder

    return jsonable_encoder(output)

